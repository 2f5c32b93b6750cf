"""Every catalogued vLLM release, one Deployment each with the same defects: each
version-dependent rule evaluates on each release (no "not evaluated" for the release),
and the release's own defaults are used (not the reference release's)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.vllm_releases import flag_releases, memory_default
from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import capacity as _capacity
from gpustrata_policies.view import catalogs

BASE: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "sweep", "namespace": "llm"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "sweep"}},
        "template": {
            "metadata": {"labels": {"app": "sweep"}},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "containers": [
                    {
                        "name": "vllm",
                        "image": "IMAGE",
                        # Defects: a batch budget below max_num_seqs, a block size no
                        # release takes, an option no release has, a hair-trigger probe.
                        "args": [
                            "--model",
                            "Qwen/Qwen2.5-1.5B-Instruct",
                            "--max-model-len",
                            "8192",
                            "--max-num-seqs",
                            "64",
                            "--max-num-batched-tokens",
                            "32",
                            "--block-size",
                            "7",
                            "--no-such-flag",
                        ],
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                        "livenessProbe": {
                            "httpGet": {"path": "/health", "port": 8000},
                            "timeoutSeconds": 1,
                            "failureThreshold": 1,
                        },
                    }
                ],
            },
        },
    },
}
RELEASES = sorted(
    {r.version for r in load_compat_catalog().vllm_releases()} | set(flag_releases()),
    key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.replace("post", "").split(".")),
)
# Rules whose verdict depends on the release and that this Deployment exercises.
VERSION_RULES = ("V005", "V006", "V010", "V013")


def _deployment(version: str) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"]["template"]["spec"]["containers"][0]["image"] = f"vllm/vllm-openai:v{version}"
    return doc


@pytest.mark.parametrize("version", RELEASES)
def test_every_version_rule_evaluates_on_every_release(version: str) -> None:
    report = evaluate([_deployment(version)])
    for rule in VERSION_RULES:
        skipped = [n.reason for n in report.not_evaluated if n.rule == rule]
        assert skipped == [], (version, rule, skipped)
        found = [f.message for f in report.findings if f.rule == rule]
        assert found, f"{rule} found nothing on vLLM {version}"
        assert all(f"vLLM {version}" in m for m in found), (rule, found)
    v013 = [f.message for f in report.findings if f.rule == "V013"]
    assert any("--no-such-flag" in m for m in v013)


def _memory_note(version: str) -> str:
    objs = to_objects([_deployment(version)])
    rule = find_rule("V003")
    assert rule is not None
    ctx = RuleContext(rule.meta, load_config(None), objs)
    (site,) = _capacity.engine_sites(ctx, objs[0])
    found = _capacity.capacity_inputs(ctx, site)
    assert not isinstance(found, str), found
    return found[0].settings.defaults["gpu_memory_utilization"]


@pytest.mark.parametrize("version", RELEASES)
def test_capacity_uses_the_image_release_memory_default(version: str) -> None:
    """V003/V004/V012 size the KV cache with the image's own gpu_memory_utilization
    default (0.9 before 0.20, 0.92 after), not the reference release's."""
    note = _memory_note(version)
    fact = memory_default(version)
    if version == catalogs.vllm_releases().reference:
        assert str(fact.value if fact else "") in note
    elif fact is None:
        assert "was not read" in note
    else:
        assert f"vLLM {version}'s default {fact.value:g}" in note


def test_a_0_7_image_is_not_sized_with_the_reference_default() -> None:
    assert "0.9 " in _memory_note("0.7.3") + " "
    assert "0.92" not in _memory_note("0.7.3")


# O002 needs the image's CUDA. Releases whose vllm/vllm-openai CUDA was not read: 0.6.0 and
# 0.6.1.post2 ship neither docker/Dockerfile nor the release pipeline in their sdist,
# 0.6.2-0.6.4.post1's release pipeline builds no image, 0.15.1 has no sdist on PyPI.
IMAGE_CUDA_UNREAD = {
    "0.6.0",
    "0.6.1.post2",
    "0.6.2",
    "0.6.3.post1",
    "0.6.4",
    "0.6.4.post1",
    "0.15.1",
}
OLD_DRIVER_POOL: dict[str, Any] = {
    "apiVersion": "gpustrata.io/v1alpha1",
    "kind": "GpuNodePool",
    "metadata": {"name": "gpu-l4"},
    "spec": {
        "instanceType": "g6.xlarge",
        "gpuProduct": "NVIDIA-L4",
        "gpuCount": 1,
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        # Below every CUDA 12.1+ floor (12.1 GA: 530.30.02), on a branch no image lists.
        "driverVersion": "525.147.05",
        "maxSize": 1,
    },
}


@pytest.mark.parametrize(
    "version", sorted({r.version for r in load_compat_catalog().vllm_releases()})
)
def test_o002_knows_the_cuda_of_every_release_image_read(version: str) -> None:
    report = evaluate([OLD_DRIVER_POOL, _deployment(version)])
    skipped = [n.reason for n in report.not_evaluated if n.rule == "O002"]
    found = [f.message for f in report.findings if f.rule == "O002"]
    if version in IMAGE_CUDA_UNREAD:
        assert found == [] and skipped == [
            f"container 'vllm' image vllm/vllm-openai:v{version}: the CUDA version of the vLLM "
            f"{version} image is not catalogued"
        ]
        return
    assert skipped == [], skipped
    assert len(found) == 1 and f"(vLLM {version} " in found[0], found
    assert "runs driver 525.147.05" in found[0]
