"""``EngineSite`` is the only way a rule sees a vLLM engine (issue 32 item 2).

Rules read an engine's settings, release and GPUs through
:class:`~gpustrata_policies.view.engines.EngineSite` (``engine_sites``; its ``flag``,
``int_flag``, ``bool_flag``, ``flag_on``, ``release`` and ``gpus``), never by walking
containers or ``serveConfigV2`` engines with a reader of their own: such twin readers
disagreed before (Ray ``accelerator_type``, MIG, the image's release, malformed flags).
The first test fails on a rule module that imports or calls one of the old readers.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from _release import REFERENCE, REFERENCE_IMAGE
from conftest import REPO
from test_site_gpus import _ray, _worker

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import capacity, engines, ray
from gpustrata_policies.view.engines import EngineSite, engine_sites

RULES = REPO / "policies" / "gpustrata_policies" / "rules"

WALKERS = frozenset(
    {
        "vllm_engine",  # a container's engine read outside the sites
        "container_engines",  # the same, over an object's containers
        "preset_engine",
        "image_release",  # a release read from one image: EngineSite.release()
        "vllm_version",
        "as_int",  # typed reads: EngineSite.int_flag / bool_flag
        "as_bool",
        "int_setting",
        "flag_bool",
        "get_int",  # EngineArgs.get_int: None for a malformed value V013 reports
    }
)
"""Names a rule module must not import or call: the readers EngineSite replaced."""

SERVE_CONFIG_READERS = {
    "r003_placement_fits_workers": "KubeRay's type check of serveConfigV2 itself",
    "r004_ray_versions_match": "runtime_env pip pins of the Serve applications",
    "r005_ray_path_tolerates_model_load": "the Serve applications' runtime_env",
    "k014_secrets_by_reference": "the Serve applications' runtime_env",
    "g001_gateway_outlasts_generation": "the Serve config's http_options.request_timeout_s",
}
"""Rules that read ``serve_config`` for what is not an engine (its engines they must not
read: ``.engines`` is a walk of their own)."""


def walks(source: str) -> list[str]:
    """The old engine readers *source* imports, calls or reads (``name`` / ``.name``),
    and ``.engines`` of a ``serve_config`` result."""
    tree = ast.parse(source)
    found: list[str] = []
    reads_serve_config = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                reads_serve_config |= alias.name == "serve_config"
                if alias.name in WALKERS:
                    found.append(f"imports {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in WALKERS:
            found.append(f"reads .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in WALKERS:
            found.append(f"calls {node.id}")
    if reads_serve_config:
        found += [
            "reads serve_config(...).engines"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "engines"
        ]
    return found


def _rule_modules() -> list[Path]:
    return sorted(RULES.rglob("*.py"))


def test_the_walk_check_sees_an_old_reader() -> None:
    own = (
        "from gpustrata_policies.view.vllm_args import serve_config, vllm_engine\n"
        "def check(ctx, obj):\n"
        "    for c in obj.containers():\n"
        "        e = vllm_engine(c)\n"
        "        n = e.get_int('tensor_parallel_size')\n"
        "    cfg = serve_config(obj)\n"
        "    return cfg.engines\n"
    )
    assert walks(own) == [
        "imports vllm_engine",
        "calls vllm_engine",
        "reads .get_int",
        "reads serve_config(...).engines",
    ]
    ported = (
        "from gpustrata_policies.view.engines import engine_sites\n"
        "def check(ctx, obj):\n"
        "    return [s.int_flag('tensor_parallel_size') for s in engine_sites(ctx, obj)]\n"
    )
    assert walks(ported) == []


def test_no_rule_walks_engines_itself() -> None:
    modules = _rule_modules()
    assert len(modules) > 50  # every rule folder's rule.py and the shared modules
    offenders = {
        str(p.relative_to(RULES)): found
        for p in modules
        if (found := walks(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}
    serve = {
        p.parent.name
        for p in modules
        if "serve_config" in p.read_text(encoding="utf-8") and p.parent != RULES
    }
    assert serve <= set(SERVE_CONFIG_READERS), serve - set(SERVE_CONFIG_READERS)


def test_the_twin_readers_are_gone() -> None:
    assert not hasattr(engines, "site_version")  # EngineSite.release() / site_release
    assert not hasattr(ray, "flag_is_on")  # EngineSite.flag_on / as_bool
    assert not hasattr(ray, "container_engines")  # engine_sites(ctx, obj, ray_pods=True)


# --------------------------------------------------------------------------- sites


def _sites(doc: dict[str, Any], *, ray_pods: bool = False) -> tuple[RuleContext, list[EngineSite]]:
    objs = to_objects([doc])
    rule = find_rule("V003")
    assert rule is not None
    ctx = RuleContext(rule.meta, load_config(None), objs)
    return ctx, engine_sites(ctx, objs[0], ray_pods=ray_pods)


def _deployment(args: list[str], image: str = REFERENCE_IMAGE) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "llm"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": image,
                            "command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", *args],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                },
            },
        },
    }


def _messages(doc: dict[str, Any], rule: str, env: str = "prod") -> list[str]:
    return [f.message for f in evaluate([doc], environment=env).findings if f.rule == rule]


def test_one_release_for_the_rules_and_the_capacity_view() -> None:
    """A container's image and a Ray Serve LLM engine's ``ray-llm`` image: the release
    the rules read (``site.release()``) is the one the capacity view estimates with."""
    _, [site] = _sites(_deployment([]))
    assert site.release().version == REFERENCE
    assert capacity.engine_version(site).version == REFERENCE
    _, [ray_site] = _sites(_ray("L4", [_worker("gpu", None)]))
    pinned = ray_site.release()
    assert pinned.version is not None and pinned.found is not None and pinned.found.ray
    assert capacity.engine_version(ray_site).version == pinned.version
    assert f"pinned by Ray {pinned.found.ray}" in capacity.engine_version(ray_site).where


def test_an_unpinned_image_is_no_release_for_every_reader() -> None:
    _, [site] = _sites(_deployment([], image="vllm/vllm-openai:latest"))
    read = site.release()
    assert read.version is None and "unpinned" in read.where
    assert capacity.engine_version(site).version is None


def test_typed_reads_keep_a_malformed_flag_malformed() -> None:
    """``"--tensor-parallel-size 2"`` in one argument: vLLM refuses it (V013), so no rule
    may read the setting as 2 or as its default 1."""
    _, [site] = _sites(_deployment(["--tensor-parallel-size 2", "--enforce-eager true"]))
    assert site.int_flag("tensor_parallel_size") == "--tensor-parallel-size 2"
    assert site.gpus_per_engine() is None
    assert site.bool_flag("enforce-eager") is None and not site.flag_on("enforce_eager")
    assert _messages(_deployment(["--enforce-eager true"]), "V008") == []
    assert _messages(_deployment(["--enforce-eager"]), "V008")


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["--enforce-eager"], True), (["--enforce-eager=false"], False), ([], False)],
)
def test_bool_reads_as_vllm(args: list[str], expected: bool) -> None:
    _, [site] = _sites(_deployment(args))
    assert site.flag_on("enforce_eager") is expected


def test_o007_sees_the_ray_accelerator_type_gpu() -> None:
    """A Ray Serve LLM engine whose worker group selects no GPU but whose
    ``accelerator_type`` is T4 runs on a T4: O007 judges bf16 on it, as V005/V006 and the
    capacity view do (before, O007 read only node selectors and pools and saw no GPU)."""
    doc = _ray("T4", [_worker("gpu", None)])
    serve = doc["spec"]["serveConfigV2"].replace("block_size: 8", "dtype: bfloat16")
    doc["spec"]["serveConfigV2"] = serve
    ctx, [site] = _sites(doc)
    refs = site.gpus(ctx)
    assert not isinstance(refs, str) and [r.gpu.id for r in refs] == ["t4"]
    [message] = _messages(doc, "O007")
    t4 = capacity.catalogs.hardware().gpus["t4"]
    assert f"{t4.name} (Ray Serve LLM accelerator_type T4, compute capability 7.5)" in message
    assert "dtype bfloat16" in message


def test_o007_names_the_selector_as_before() -> None:
    [message] = _messages(_deployment(["--dtype", "bfloat16"]), "O007")
    assert "(selected by nvidia.com/gpu.product=Tesla-T4, compute capability 7.5)" in message


def _ray_cluster_head(args: list[str]) -> dict[str, Any]:
    script = "ray start --head && vllm serve Qwen/Qwen2.5-7B-Instruct " + " ".join(args)
    head = {
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "head",
                        "image": REFERENCE_IMAGE,
                        "command": ["bash", "-c", script],
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ]
            }
        },
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "multi", "namespace": "llm"},
        "spec": {"headGroupSpec": head, "workerGroupSpecs": []},
    }


def test_engines_in_ray_pods_are_sites_only_when_asked() -> None:
    """A RayCluster head running ``ray start; vllm serve`` is an engine for the rules on
    the engine process (V007, V008, K014, R002: ``ray_pods=True``); the GPU and capacity
    rules judge Ray engines through their Serve config, so the default leaves it out."""
    doc = _ray_cluster_head(["--enforce-eager"])
    assert _sites(doc)[1] == []
    [site] = _sites(doc, ray_pods=True)[1]
    assert site.container is not None and site.container.name == "head"
    assert site.flag_on("enforce_eager")
    [message] = _messages(doc, "V008")
    assert "container 'head'" in message


def test_a_ray_engine_runs_the_release_of_its_gpu_worker_group() -> None:
    """Two worker groups with different ``ray-llm`` images: the engine runs on the GPU
    group, so its release is that group's image's for every reader. Before, V005, V006,
    V013, G002 and K020 read the first worker image that named a release (a CPU group's
    here) while the capacity view read the GPU group's."""
    cpu = _worker("cpu", None)
    cpu_spec = cpu["template"]["spec"]
    cpu_spec["containers"][0]["image"] = "rayproject/ray-llm:2.48.0-py311-cu128"
    cpu_spec["containers"][0]["resources"] = {}
    cpu["rayStartParams"] = {"num-gpus": "0"}
    _, [site] = _sites(_ray("L4", [cpu, _worker("gpu", None)]))
    read = site.release()
    assert site.image == "rayproject/ray-llm:2.60.0-py311-cu128"
    assert read.image == site.image and read.found is not None and read.found.ray == "2.60.0"
    assert read.version == capacity.engine_version(site).version
