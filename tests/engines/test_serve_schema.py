"""Every rendered serveConfigV2 passes Ray Serve's own schema and has no unknown key."""

from __future__ import annotations

import ast
import copy
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from _engines_required import require_engine
from _stacks import STACKS, stack_doc

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.planning.build import build_plan
from gpustrata.render.from_plan import workload_objects
from gpustrata.runtime.serve_schema import (
    llm_source_fields,
    ray_accelerator_types,
    validate_serve_config,
)


@pytest.fixture(scope="module", autouse=True)
def ray_installed() -> None:
    require_engine("ray")


def _serve_configs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    objects = workload_objects(build_plan(doc))
    return [
        yaml.safe_load(o["spec"]["serveConfigV2"]) for o in objects if o["kind"] == "RayService"
    ]


def _variants() -> list[tuple[str, dict[str, Any]]]:
    """The reference stacks, and prod with every TP of the sweep."""
    out = [(env, stack_doc(env)) for env in STACKS]
    for tp in (1, 2, 4, 8):
        doc = stack_doc("prod")
        doc["models"][0]["engine"]["tensor_parallel_size"] = tp
        out.append((f"prod-tp{tp}", doc))
    return out


@pytest.mark.parametrize(("name", "doc"), _variants(), ids=[n for n, _ in _variants()])
def test_rendered_serve_configs_are_valid(name: str, doc: dict[str, Any]) -> None:
    configs = _serve_configs(doc)
    if name != "dev":
        assert configs, f"{name} renders no RayService"
    for config in configs:
        assert validate_serve_config(config) == []


def test_the_checks_catch_what_ray_serve_ignores() -> None:
    (config,) = _serve_configs(stack_doc("prod"))
    bad = copy.deepcopy(config)
    app = bad["applications"][0]
    llm = app["args"]["llm_configs"][0]
    app["route_prefx"] = "/v1"
    llm["engine_kwarg"] = {}
    llm["deployment_config"]["autoscaling_config"]["target_ongoing_request"] = 8
    llm["placement_group_config"]["strategy"] = "STRICTPACK"
    llm["accelerator_type"] = "H100-80GB"
    path = "serveConfigV2.applications[0]"
    llm_path = f"{path}.args.llm_configs[0]"
    problems = validate_serve_config(bad)
    assert problems[0] == (
        f"{path}.route_prefx: unknown key (not a field of Ray's ServeApplicationSchema)"
    )
    assert problems[1:4] == [
        f"{llm_path}.engine_kwarg: unknown key (not a field of Ray Serve LLM's LLMConfig)",
        f"{llm_path}.accelerator_type: 'H100-80GB' is not one of Ray Serve LLM's accelerator "
        "types (ray.util.accelerators.accelerators)",
        f"{llm_path}.deployment_config.autoscaling_config.target_ongoing_request: unknown key "
        "(not a field of Ray's AutoscalingConfig)",
    ]
    assert problems[4].startswith(f"{llm_path}.placement_group_config: 1 validation error")
    assert len(problems) == 5
    # Ray Serve's schema alone accepts all of it: it ignores unknown keys, args are opaque.
    from ray.serve.schema import ServeDeploySchema

    ServeDeploySchema.model_validate(bad)


def test_llm_field_names_come_from_the_installed_ray() -> None:
    assert {"llm_configs", "ingress_cls_config", "ingress_deployment_config"} == set(
        llm_source_fields("LLMServingArgs")
    )
    fields = llm_source_fields("LLMConfig")
    assert {
        "model_loading_config",
        "engine_kwargs",
        "deployment_config",
        "placement_group_config",
        "accelerator_type",
        "runtime_env",
    } <= fields
    assert "model_source" in llm_source_fields("ModelLoadingConfig")


def test_engine_kwargs_are_vllm_engine_args() -> None:
    """engine_kwargs keys are fields of vLLM's EngineArgs (read from the vLLM source)."""
    require_engine("vllm")
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    source = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"]
    names = {
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
    for _, doc in _variants():
        for config in _serve_configs(doc):
            for llm in config["applications"][0]["args"]["llm_configs"]:
                assert set(llm["engine_kwargs"]) <= names


def test_catalogue_accelerator_types_are_what_ray_detects() -> None:
    """The hardware catalogue's ray_accelerator_type equals Ray's own detection from the GPU's
    NVML name (GFD product label with the spaces back) and is a Serve LLM accelerator type."""
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    known = ray_accelerator_types()
    checked = 0
    for gpu in load_hardware_catalog().gpus.values():
        detected = NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type(
            gpu.gfd_products[0].replace("-", " ")
        )
        if gpu.ray_accelerator_type is None:
            assert detected not in known, gpu.id
            continue
        assert detected == gpu.ray_accelerator_type, gpu.id
        assert detected in known, gpu.id
        checked += 1
    assert checked >= 10
