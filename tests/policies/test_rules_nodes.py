"""Node-pool and GPU Operator rules (K003, K005, K006, K008, K015, O001-O007): their default
enforcement, and how they read pools and operators from each source (manifests, Pulumi
resources under ``gpustrata plan``, unknown preview values). Their fixtures and exact
findings: the rule folders, run by ``test_rule_folders.py``."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _release import REFERENCE_IMAGE

from gpustrata.core.unknown import PULUMI_UNKNOWN_SENTINELS
from gpustrata_policies import evaluate, objects_from_pulumi
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.view.catalogs import image_cuda
from gpustrata_policies.view.gpu_operator import operators_of
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import pools_of

RULES = (
    "K003",
    "K005",
    "K006",
    "K008",
    "K015",
    "O001",
    "O002",
    "O003",
    "O004",
    "O005",
    "O006",
    "O007",
)
ADVISORY = {"K003", "K006", "K008", "K015", "O004"}


@pytest.mark.parametrize("rule_id", RULES)
def test_default_enforcement_follows_rules_md(rule_id: str) -> None:
    rule = find_rule(rule_id)
    assert rule is not None
    expected = "advisory" if rule_id in ADVISORY else "mandatory"
    assert set(rule.meta.default_enforcement.values()) == {expected}


# --- where pools and operators come from -----------------------------------------------

POOL_DESCRIPTION = {
    "apiVersion": "gpustrata.io/v1alpha1",
    "kind": "GpuNodePool",
    "metadata": {"name": "gpu-l4"},
    "spec": {
        "instanceType": "g6.xlarge",
        "gpuProduct": "NVIDIA-L4",
        "gpuCount": 1,
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        "kubelet": {
            "systemReserved": {"cpu": "500m", "memory": "1Gi"},
            "kubeReserved": {"cpu": "80m", "memory": "893Mi"},
            "evictionHard": {"memory.available": "500Mi"},
        },
        "kubernetesVersion": "1.37",
        "amiType": "AL2023_x86_64_NVIDIA",
        "driverVersion": "580.173.02",
        "maxSize": 1,
    },
}
NODE_GROUP_INPUTS = {
    "nodeGroupName": "gpu-l4",
    "instanceTypes": ["g6.xlarge"],
    "amiType": "AL2023_x86_64_NVIDIA",
    "version": "1.37",
    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
    "scalingConfig": {"minSize": 0, "maxSize": 1, "desiredSize": 0},
}


def _release(values: dict[str, Any], version: Any = "v26.7.0") -> dict[str, Any]:
    return {
        "name": "gpu-operator",
        "chart": "gpu-operator",
        "version": version,
        "namespace": "gpu-operator",
        "values": values,
    }


def test_a_described_pool_replaces_the_node_group_it_describes() -> None:
    objects = objects_from_pulumi(
        [
            ("aws:eks/nodeGroup:NodeGroup", "gpustrata-gpu-l4-ng", NODE_GROUP_INPUTS),
            ("gpustrata:index:GpuNodePool", "gpustrata-gpu-l4", {"description": POOL_DESCRIPTION}),
        ]
    )
    pools = pools_of([K8sObject(o) for o in objects])
    assert [(p.name, p.derived, p.kubernetes_version) for p in pools] == [("gpu-l4", False, "1.37")]
    # Alone, the node group is a pool too (amiType and version read from its inputs) ...
    (alone,) = pools_of([K8sObject(o) for o in objects[:1]])
    assert (alone.derived, alone.ami_type, alone.driver_preinstalled) == (
        True,
        "AL2023_x86_64_NVIDIA",
        True,
    )
    # ... whose kubelet settings live in user data: K006 says so instead of guessing.
    report = evaluate(objects[:1])
    assert [(n.rule, n.reason) for n in report.not_evaluated if n.rule == "K006"] == [
        (
            "K006",
            "pool gpu-l4 (1 x NVIDIA-L4) is a node group whose kubelet settings live in its "
            "launch template user data",
        )
    ]
    assert not [f for f in evaluate(objects).findings if f.rule in {"K003", "K006"}]


def test_gpu_operator_description_replaces_its_helm_release() -> None:
    description = {
        "apiVersion": "gpustrata.io/v1alpha1",
        "kind": "GpuOperator",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
        "spec": {
            "chart": "gpu-operator",
            "version": "v26.7.0",
            "releaseName": "gpu-operator",
            "values": {"driver": {"enabled": False}},
            "declaredOverrides": ["toolkit"],
        },
    }
    objects = objects_from_pulumi(
        [
            ("kubernetes:helm.sh/v3:Release", "gpustrata-gpu-operator-release", _release({})),
            ("gpustrata:index:GpuOperator", "gpustrata-gpu-operator", {"description": description}),
            ("gpustrata:index:GpuNodePool", "gpustrata-gpu-l4", {"description": POOL_DESCRIPTION}),
        ]
    )
    (op,) = operators_of([K8sObject(o) for o in objects])
    assert (op.source, op.version, op.declared_overrides) == (
        "GpuOperator",
        "v26.7.0",
        frozenset({"toolkit"}),
    )
    found = {(f.rule, f.resource, f.message) for f in evaluate(objects).findings}
    assert (
        "O001",
        "GpuOperator/gpu-operator/gpu-operator",
        "GPU Operator v26.7.0 supports Amazon EKS 1.33 to 1.36 (its platform support "
        "matrix), but pool(s) gpu-l4 run Kubernetes 1.37",
    ) in found
    assert not [r for r, _, _ in found if r == "O003"]  # driver off, AMI ships one


def test_unknown_preview_values_are_not_evaluated() -> None:
    unknown = next(iter(PULUMI_UNKNOWN_SENTINELS))
    objects = objects_from_pulumi(
        [
            ("kubernetes:helm.sh/v3:Release", "op", _release({"mig": unknown}, version=unknown)),
            ("gpustrata:index:GpuNodePool", "pool", {"description": POOL_DESCRIPTION}),
        ]
    )
    report = evaluate(objects)
    assert not [f for f in report.findings if f.rule.startswith("O")]
    assert not [n for n in report.not_evaluated if "could not read" in n.reason]
    unknown_ops = {n.rule for n in report.not_evaluated if "unknown until" in n.reason}
    assert {"O001", "O003", "O004", "O006"} <= unknown_ops


def _vllm_pod(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "old-vllm", "namespace": "llm"},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "vllm",
                    "image": image,
                    "args": ["--model", "Qwen/Qwen2.5-7B-Instruct"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        },
    }


def test_driver_known_but_image_cuda_unknown_is_not_evaluated() -> None:
    # 0.6.4's release pipeline builds no image, so its image's CUDA stays uncatalogued.
    report = evaluate([POOL_DESCRIPTION, _vllm_pod("vllm/vllm-openai:v0.6.4")])
    assert [(n.rule, n.reason) for n in report.not_evaluated if n.rule == "O002"] == [
        (
            "O002",
            "container 'vllm' image vllm/vllm-openai:v0.6.4: the CUDA version of the vLLM "
            "0.6.4 image is not catalogued",
        )
    ]


@pytest.mark.parametrize(
    ("image", "flagged"),
    [
        # 0.6.5-0.7.3 images were built with --build-arg CUDA_VERSION=12.1.0 (floor 530.30.02),
        # 0.8.0-0.8.5.post1 with 12.4.0 (floor 550.54.14): the same 535 driver splits them.
        ("vllm/vllm-openai:v0.7.3", False),
        ("vllm/vllm-openai:v0.8.5", True),
    ],
)
def test_pre_0_9_images_are_judged_by_their_release_pipeline_cuda(
    image: str, flagged: bool
) -> None:
    pool = copy.deepcopy(POOL_DESCRIPTION)
    pool["spec"]["driverVersion"] = "535.230.02"
    report = evaluate([pool, _vllm_pod(image)])
    assert not [n for n in report.not_evaluated if n.rule == "O002"]
    o002 = [f.message for f in report.findings if f.rule == "O002"]
    if not flagged:
        assert o002 == []
        return
    assert len(o002) == 1
    assert o002[0].startswith(
        f"container 'vllm' image {image} is built on CUDA 12.4.0 (vLLM 0.8.5 "
        ".buildkite/release-pipeline.yaml --build-arg CUDA_VERSION), whose "
        "NVIDIA_REQUIRE_CUDA=cuda>=12.4 needs NVIDIA driver >= 550.54.14"
    )


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("vllm/vllm-openai:v0.33.0", "13.0.3"),  # a read release's CUDA, not "the current"
        ("vllm/vllm-openai:v0.19.1", "12.9.1"),
        ("vllm/vllm-openai:v0.9.0", "12.8.1"),
        ("vllm/vllm-openai:v0.8.5", "12.4.0"),
        ("vllm/vllm-openai:v0.8.0", "12.4.0"),
        ("vllm/vllm-openai:v0.7.3", "12.1.0"),
        ("vllm/vllm-openai:v0.6.5", "12.1.0"),
        ("vllm/vllm-openai:v0.19.1-cu130", "13.0"),
        ("vllm/vllm-openai:v0.33.0-cu129", "12.9"),
        ("rayproject/ray-llm:2.46.0-py311-cu124", "12.4"),
        ("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "12.1"),
        ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", "12.4.1"),
    ],
)
def test_image_cuda_from_tag_or_catalogue(image: str, cuda: str) -> None:
    found = image_cuda(image)
    assert found is not None and found.cuda == cuda


def test_image_without_cuda_says_nothing() -> None:
    assert image_cuda("busybox:1.36") is None
    unknown = image_cuda("vllm/vllm-openai:v0.6.4")
    assert unknown is not None and unknown.cuda is None


def _k008_objects(hpa_max: Any, hpa_target: Any) -> list[dict[str, Any]]:
    def deployment(name: str, strategy: dict[str, Any]) -> dict[str, Any]:
        pod = {
            "nodeSelector": {"pool": "p"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": REFERENCE_IMAGE,
                    "resources": {"limits": {"nvidia.com/gpu": 2}},
                }
            ],
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"replicas": 1, "strategy": strategy, "template": {"spec": pod}},
        }

    surge = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    return [
        {
            "apiVersion": "gpustrata.io/v1alpha1",
            "kind": "GpuNodePool",
            "metadata": {"name": "p"},
            "spec": {
                "gpuCount": 4,
                "maxSize": 1,
                "labels": {"pool": "p"},
                "gpuProduct": "NVIDIA-L4",
            },
        },
        deployment("a", surge),
        deployment("b", {"type": "Recreate"}),
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": hpa_target,
                },
                "maxReplicas": hpa_max,
            },
        },
    ]


@pytest.mark.parametrize("target", ["other", "a"])
def test_k008_an_unknown_autoscaler_spoils_only_its_own_target(target: str) -> None:
    """A preview-time unknown maxReplicas on another workload's HPA must not hide the surge
    of Deployment a (2 + 2 surge GPUs next to b's 2, on a 4-GPU pool); on a's own HPA it
    makes a "not evaluated"."""
    from gpustrata.core.unknown import UNKNOWN

    rule = find_rule("K008")
    assert rule is not None
    report = evaluate(_k008_objects(UNKNOWN, target), environment="prod", rules=[rule])
    flagged = [f.resource for f in report.findings]
    unknown = [n.resource for n in report.not_evaluated]
    if target == "other":
        assert (flagged, unknown) == (["Deployment/ns/a"], [])
    else:
        assert (flagged, unknown) == ([], ["Deployment/ns/a"])


def test_a_pool_described_by_its_instance_type_alone_is_a_gpu_pool() -> None:
    """Issue 34: a GpuNodePool with instanceType, labels and taints (no gpuCount or
    gpuProduct) was silently no GPU pool; the catalogue knows g6.xlarge's one L4."""
    pool = {
        "apiVersion": "gpustrata.io/v1alpha1",
        "kind": "GpuNodePool",
        "metadata": {"name": "l4"},
        "spec": {
            "instanceType": "g6.xlarge",
            "labels": {"workload": "llm"},
            "taints": [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}],
        },
    }
    (described,) = pools_of([K8sObject(pool)])
    assert (described.has_gpus, described.gpu_count, described.gpu_product) == (
        True,
        1,
        "NVIDIA-L4",
    )
    pod = {
        "nodeSelector": {"workload": "llm"},
        "containers": [
            {
                "name": "vllm",
                "image": REFERENCE_IMAGE,
                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "8", "memory": "12Gi"}},
            }
        ],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {"template": {"spec": pod}},
    }
    found = {f.rule: f.message for f in evaluate([pool, deployment]).findings}
    assert "dedicated=llm:NoSchedule" in found["K004"]  # the pool's taint, not tolerated
    assert (
        "pool l4 (1 x NVIDIA-L4) offers 4 CPU (capacity (g6.xlarge in the hardware"
        in (found["K005"])
    )


def test_an_unknown_pool_instance_type_suggests_related_ones() -> None:
    """Issue 34 item 8: the rules' reason for an uncatalogued instance type names types of
    its family (g6f -> g6), not unrelated ones."""
    pool = {
        "apiVersion": "gpustrata.io/v1alpha1",
        "kind": "GpuNodePool",
        "metadata": {"name": "pool-a"},
        "spec": {"instanceType": "g6f.xlarge", "gpuCount": 1, "labels": {"pool": "a"}},
    }
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.33.0",
        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
        "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "24Gi"}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}, "containers": [container]}}},
    }
    reasons = {n.rule: n.reason for n in evaluate([pool, deployment]).not_evaluated}
    assert reasons["V003"].endswith(
        "the GPU model of pool pool-a (g6f.xlarge) is not in the hardware catalogue; "
        "did you mean g6.xlarge or g6.2xlarge or g6.4xlarge?"
    )
