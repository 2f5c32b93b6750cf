"""Each rule on its fixtures: bad ones give exactly the expected messages, good ones nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths

EXPECTED: dict[str, list[tuple[str, str]]] = {
    "K001/bad-request-without-limit.yaml": [
        (
            "Deployment/llm/vllm",
            "container 'vllm' requests nvidia.com/gpu: 1 but sets no limit; "
            "the API server rejects it (Limit must be set for non overcommitable resources)",
        ),
        (
            "Deployment/llm/vllm",
            "container 'sidecar' requests nvidia.com/gpu: 1 but limits it to 2; "
            "the API server rejects it (must be equal to nvidia.com/gpu limit of 2)",
        ),
    ],
    "K002/bad-fractional-gpu.yaml": [
        (
            "Pod/llm/half-gpu",
            "container 'app' sets limits.nvidia.com/gpu: 500m, which is not a whole "
            "number (the API server rejects it: must be an integer)",
        ),
        (
            "Pod/llm/half-gpu",
            "container 'app' sets limits.nvidia.com/mig-1g.10gb: 0.5, which is not a "
            "whole number (the API server rejects it: must be an integer)",
        ),
    ],
    "K004/bad-no-toleration-no-pool.yaml": [
        (
            "RayCluster/ray/llm",
            "pod (worker group 'gpu') requests 1 GPU(s) but does not tolerate the "
            "nvidia.com/gpu:NoSchedule taint of GPU nodes (no GpuNodePool is described, so the "
            "default "
            "GPU taint is assumed); on tainted GPU nodes it stays Pending",
        ),
    ],
    "K004/bad-untolerated-pool-taint.yaml": [
        (
            "Deployment/llm/vllm",
            "pod requests 1 GPU(s) and targets GPU pool(s) h100 but does not "
            "tolerate their taints (pool h100: nvidia.com/gpu=true:NoSchedule); it stays Pending",
        ),
    ],
    "K007/bad-ray-disk-shm.yaml": [
        (
            "RayService/ray/llm",
            "container 'ray-worker' (worker group 'gpu') runs vLLM engines of 4 GPUs "
            "(tensor x pipeline parallel) and mounts the disk-backed emptyDir 'shm' at /dev/shm; "
            "NCCL "
            "between the engine's GPU workers needs at least 1Gi of memory-backed /dev/shm",
        ),
    ],
    "K007/bad-tp4-no-shm.yaml": [
        (
            "Deployment/llm/llama-70b",
            "container 'vllm' runs vLLM engines of 4 GPUs (tensor x pipeline "
            "parallel) and mounts nothing at /dev/shm (the container runtime gives 64Mi); NCCL "
            "between "
            "the engine's GPU workers needs at least 1Gi of memory-backed /dev/shm",
        ),
    ],
    "K009/bad-vpa-controls-gpu.yaml": [
        (
            "VerticalPodAutoscaler/llm/vllm",
            "VPA in updateMode Auto controls nvidia.com/gpu for container "
            "'vllm' of GPU workload Deployment/vllm; restrict controlledResources to cpu and "
            "memory",
        ),
    ],
    "K010/bad-hpa-and-scaledobject.yaml": [
        (
            "HorizontalPodAutoscaler/llm/vllm",
            "HorizontalPodAutoscaler vllm and ScaledObject vllm-keda "
            "both set the replica count of Deployment/vllm; they overwrite each other",
        ),
        (
            "ScaledObject/llm/vllm-keda",
            "ScaledObject vllm-keda and HorizontalPodAutoscaler vllm both "
            "set the replica count of Deployment/vllm; they overwrite each other",
        ),
    ],
    "K010/bad-hpa-on-autoscaling-raycluster.yaml": [
        (
            "HorizontalPodAutoscaler/ray/llm",
            "HorizontalPodAutoscaler llm scales RayCluster/llm, whose "
            "KubeRay in-tree autoscaler (enableInTreeAutoscaling: true) also sets its worker "
            "replicas",
        ),
    ],
    "K011/bad-hpa-on-cpu.yaml": [
        (
            "HorizontalPodAutoscaler/llm/vllm",
            "HorizontalPodAutoscaler vllm scales vLLM workload "
            "Deployment/vllm on cpu, DCGM_FI_DEV_GPU_UTIL only; GPU engines saturate on queue "
            "and KV "
            "cache, not CPU or memory",
        ),
    ],
    "K012/bad-three-replicas-no-pdb.yaml": [
        (
            "Deployment/llm/vllm",
            "Deployment vllm runs 3 vLLM replicas but no PodDisruptionBudget "
            "selects its pods and nothing spreads them across nodes (topologyKey "
            "kubernetes.io/hostname); "
            "one node drain or failure can stop every replica at once",
        ),
    ],
    "K013/bad-latest-and-untagged.yaml": [
        (
            "Deployment/llm/vllm",
            "init container 'fetch' image registry.example.com:5000/tools/fetch has "
            "no tag, so it pulls :latest; what runs changes without a change here",
        ),
        (
            "Deployment/llm/vllm",
            "container 'vllm' image vllm/vllm-openai:latest uses the :latest tag; "
            "what runs changes without a change here",
        ),
    ],
    "K014/bad-literal-token.yaml": [
        (
            "Deployment/llm/vllm",
            "container 'vllm' passes --api-key as a literal value (17 characters) "
            "on its command line",
        ),
        (
            "Deployment/llm/vllm",
            "container 'vllm' sets HF_TOKEN to a literal value (34 characters); "
            "secrets in a spec are readable by anyone who can read the object",
        ),
        (
            "RayService/ray/llm",
            "serveConfigV2 runtime_env sets HUGGING_FACE_HUB_TOKEN to a literal "
            "value (34 characters)",
        ),
    ],
    "V011/bad-no-readiness.yaml": [
        (
            "Deployment/llm/vllm",
            "container 'vllm' serves vLLM but has no readinessProbe, so the pod is "
            "Ready (and gets traffic) while the engine loads",
        ),
        (
            "Deployment/llm/vllm",
            "container 'vllm-b' serves vLLM but has a tcpSocket readinessProbe on "
            "port 8000, not vLLM's port 8001",
        ),
    ],
}

BAD = sorted(FIXTURES.glob("*/bad-*.yaml"))
GOOD = sorted(FIXTURES.glob("*/good-*.yaml"))


def _rel(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def test_every_bad_fixture_has_expected_messages() -> None:
    """Every bad fixture's exact messages are asserted here or in a layer's own module."""
    from test_rules_capacity import EXPECTED as CAPACITY
    from test_rules_nodes import EXPECTED as NODES
    from test_rules_serving import EXPECTED as SERVING
    from test_rules_vllm_engine import EXPECTED_VLLM_ENGINE as VLLM_ENGINE

    groups = [EXPECTED, NODES, CAPACITY, SERVING, VLLM_ENGINE]
    owned = [key for group in groups for key in group]
    assert len(owned) == len(set(owned)), "a fixture is claimed by two modules"
    assert sorted(owned) == [_rel(p) for p in BAD]


@pytest.mark.parametrize("path", [p for p in BAD if _rel(p) in EXPECTED], ids=_rel)
def test_bad_fixture_gives_exactly_the_expected_findings(path: Path) -> None:
    rule_id = path.parent.name
    report = evaluate(load_paths([str(path)]))
    got = [(f.resource, f.message) for f in report.findings if f.rule == rule_id]
    assert got == EXPECTED[_rel(path)]
    assert all(f.file == str(path) and f.line for f in report.findings)
    assert report.exit_code == (
        1 if any(f.enforcement == "mandatory" for f in report.findings) else 0
    )


@pytest.mark.parametrize("path", GOOD, ids=_rel)
def test_good_fixture_is_clean_for_every_rule(path: Path) -> None:
    """No rule finds anything in a good fixture, and its own rule evaluates it.

    Other rules may say "not evaluated": a K001 fixture need not name a GPU model for
    the capacity rules (V003, V004, ...) to size it, and saying so is their contract.
    """
    report = evaluate(load_paths([str(path)]))
    assert [(f.rule, f.message) for f in report.findings] == []
    own = path.parent.name
    assert [(n.rule, n.reason) for n in report.not_evaluated if n.rule == own] == []
    assert report.exit_code == 0
