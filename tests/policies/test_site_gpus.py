"""One reader of the GPUs an engine gets (issue 32 item 2).

``view.engines.site_gpus`` is what the capacity rules (V003/V004/V012, through
``capacity_inputs``), V005 and V006 all ask. Before, V005/V006 read their own union of
every Ray worker group's and every pool's GPUs and ignored MIG and ``accelerator_type``, so
they judged a GPU the engine never gets. Each case below checks that the capacity view and
V005/V006 see the same GPU(s), and that V006's message names it.
"""

from __future__ import annotations

from typing import Any

import yaml
from _release import REFERENCE_IMAGE

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules.v005_batch_budget_covers_context import rule as v005
from gpustrata_policies.view import capacity
from gpustrata_policies.view.engines import GpuRef, engine_sites, site_gpus

_RAY_IMAGE = "rayproject/ray-llm:2.60.0-py311-cu128"  # pins a vLLM release V006 has read


def _worker(name: str, product: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "w", "image": _RAY_IMAGE, "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ]
    }
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {
        "groupName": name,
        "replicas": 1,
        "rayStartParams": {"num-gpus": "1"},
        "template": {"spec": spec},
    }


def _ray(accelerator: str, workers: list[dict[str, Any]]) -> dict[str, Any]:
    serve = {
        "applications": [
            {
                "name": "llms",
                "import_path": "ray.serve.llm:build_openai_app",
                "args": {
                    "llm_configs": [
                        {
                            "model_loading_config": {
                                "model_id": "qwen",
                                "model_source": "Qwen/Qwen2.5-7B-Instruct",
                            },
                            "accelerator_type": accelerator,
                            "engine_kwargs": {"block_size": 8},
                        }
                    ]
                },
            }
        ]
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "llm", "namespace": "ray"},
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve),
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {
                    "rayStartParams": {"num-gpus": "0"},
                    "template": {"spec": {"containers": [{"name": "h", "image": _RAY_IMAGE}]}},
                },
                "workerGroupSpecs": workers,
            },
        },
    }


def _mig(product: str, profile: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mig", "namespace": "llm"},
        "spec": {
            "selector": {"matchLabels": {"app": "mig"}},
            "template": {
                "metadata": {"labels": {"app": "mig"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": product},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": REFERENCE_IMAGE,
                            "command": [
                                "vllm",
                                "serve",
                                "Qwen/Qwen2.5-7B-Instruct",
                                "--block-size",
                                "8",
                            ],
                            "resources": {"limits": {f"nvidia.com/mig-{profile}": 1}},
                        }
                    ],
                },
            },
        },
    }


def _seen(doc: dict[str, Any]) -> tuple[list[GpuRef], list[str], list[str]]:
    """(site_gpus, the GPU ids capacity estimates on, the GPU ids V005 judges) of the one
    engine in *doc*."""
    objs = to_objects([doc])
    rule = find_rule("V003")
    assert rule is not None
    ctx = RuleContext(rule.meta, load_config(None), objs)
    [site] = engine_sites(ctx, objs[0])
    refs = site_gpus(ctx, site)
    assert not isinstance(refs, str), refs
    inputs = capacity.capacity_inputs(ctx, site)
    assert not isinstance(inputs, str), inputs
    judged = [g.id for g, _ in v005._gpus(ctx, site)]
    return refs, [i.gpu.gpu.id for i in inputs], judged


def _v006(doc: dict[str, Any]) -> str:
    [message] = [f.message for f in evaluate([doc]).findings if f.rule == "V006"]
    return message


def test_ray_accelerator_type_picks_the_worker_group_for_every_rule() -> None:
    doc = _ray(
        "H100",
        [_worker("small", "NVIDIA-L4"), _worker("big", "NVIDIA-H100-80GB-HBM3")],
    )
    refs, estimated, judged = _seen(doc)
    assert [r.gpu.id for r in refs] == ["h100-sxm-80gb"]
    assert refs[0].where == "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
    assert estimated == judged == ["h100-sxm-80gb"]
    message = _v006(doc)
    assert "NVIDIA H100" in message and "L4" not in message  # not the other group's GPU


def test_ray_accelerator_type_names_the_gpu_when_no_selector_does() -> None:
    doc = _ray("L4", [_worker("gpu", None)])
    refs, estimated, judged = _seen(doc)
    assert [r.gpu.id for r in refs] == ["l4"]
    assert refs[0].where == "Ray Serve LLM accelerator_type L4"
    assert estimated == judged == ["l4"]
    message = _v006(doc)
    assert "(Ray Serve LLM accelerator_type L4)" in message and "any GPU" not in message


def test_a_mig_slice_is_its_parents_compute_with_the_slices_memory() -> None:
    doc = _mig("NVIDIA-A100-SXM4-80GB", "3g.40gb")
    refs, estimated, judged = _seen(doc)
    [ref] = refs
    assert ref.gpu.id == "a100-sxm-80gb-mig-3g.40gb"
    assert ref.gpu.memory_gib == 40.0  # half the 80 GB parent, as CUDA shows the slice
    parent = capacity.catalogs.hardware().gpus["a100-sxm-80gb"]
    assert ref.gpu.compute_capability == parent.compute_capability
    label = "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"
    assert ref.where == f"nvidia.com/mig-3g.40gb of {parent.name}, {label}"
    assert estimated == judged == [ref.gpu.id]
    assert "MIG 3g.40gb" in _v006(doc)


def test_a_mig_profile_the_parent_lacks_is_a_reason_not_a_guess() -> None:
    doc = _mig("NVIDIA-L4", "3g.40gb")
    objs = to_objects([doc])
    rule = find_rule("V003")
    assert rule is not None
    ctx = RuleContext(rule.meta, load_config(None), objs)
    [site] = engine_sites(ctx, objs[0])
    reason = site_gpus(ctx, site)
    assert isinstance(reason, str)
    assert "nvidia.com/mig-3g.40gb" in reason and "NVIDIA L4" in reason
    assert capacity.capacity_inputs(ctx, site) == reason
    assert v005._gpus(ctx, site) == []  # V005 then judges every batch tier
