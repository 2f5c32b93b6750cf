"""Node-pool and GPU Operator rules (K003, K005, K006, K008, K015, O001-O007): exact
messages of the bad fixtures, and how the rules read pools and operators from each source
(manifests, Pulumi resources under ``gpustrata plan``, unknown preview values)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES

from gpustrata.core.unknown import PULUMI_UNKNOWN_SENTINELS
from gpustrata_policies import evaluate, objects_from_pulumi
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.inputs.manifests import load_paths
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

EXPECTED: dict[str, list[tuple[str, str]]] = {
    "K003/bad-untainted-pools.yaml": [
        (
            "GpuNodePool/-/k003-open",
            "GPU pool k003-open (1 x NVIDIA-L4) has no taint; Pods that request no GPU can be "
            "scheduled onto its nodes and take the CPU and memory the GPU Pods need",
        ),
        (
            "GpuNodePool/-/k003-soft",
            "GPU pool k003-soft (1 x NVIDIA-A10G) has only PreferNoSchedule taints "
            "(nvidia.com/gpu), which the scheduler may ignore; Pods that request no GPU can "
            "be scheduled onto its nodes and take the CPU and memory the GPU Pods need",
        ),
    ],
    "K005/bad-exceeds-pool.yaml": [
        (
            "Deployment/llm/k005-too-big",
            "pod requests 2 GPU(s), 16 CPU, 126.0Gi memory per pod, more than any pool it can "
            "land on: pool k005-small (1 x NVIDIA-L40S) offers 1 GPU(s) per node, 15.39 CPU, "
            "123.7Gi memory (allocatable after kubelet reservations); it stays Pending",
        ),
        (
            "Deployment/llm/k005-no-pool",
            "pod requests 1 GPU(s) and selects workload=training, but no described GPU pool "
            "has those labels (pools: k005-small); it stays Pending",
        ),
    ],
    "K005/bad-instance-too-small.yaml": [
        (
            "Pod/llm/k005-tp4-on-g6",
            "pod requests 4 GPU(s) per pod but selects instance type g6.xlarge, which offers "
            "1 GPU(s) per node (g6.xlarge capacity before kubelet reservations, hardware "
            "catalogue); it stays Pending",
        ),
    ],
    "K006/bad-reservations.yaml": [
        (
            "GpuNodePool/-/k006-a100",
            "GPU pool k006-a100 (8 x NVIDIA-A100-SXM4-40GB): systemReserved lists "
            "nvidia.com/gpu, which the kubelet cannot reserve (it accepts only cpu, memory, "
            'ephemeral-storage, pid and exits with \'cannot reserve "nvidia.com/gpu" '
            "resource'); systemReserved reserves no memory for system daemons; kubeReserved "
            "reserves no cpu for the kubelet and runtime; evictionHard sets no "
            "memory.available threshold (at most the kubelet's 100Mi default applies)",
        ),
    ],
    "K008/bad-no-spare-gpu.yaml": [
        (
            "Deployment/llm/k008-defaults",
            "Deployment k008-defaults updates 1 replica(s) with maxSurge 1 and maxUnavailable "
            "0 (the RollingUpdate defaults maxSurge 25%, maxUnavailable 25%): the surge "
            "Pod(s) need 1 GPU(s) but pool(s) k008-single have 0 spare (1 GPU(s) at max size, "
            "1 held by GPU workloads at their max replicas); no old Pod is removed first, so "
            "the rollout never finishes",
        ),
        (
            "Deployment/llm/k008-surge",
            "Deployment k008-surge updates 2 replica(s) with maxSurge 1 and maxUnavailable 0 "
            "(its rollingUpdate): the surge Pod(s) need 1 GPU(s) but pool(s) k008-pair have 0 "
            "spare (2 GPU(s) at max size, 2 held by GPU workloads at their max replicas); no "
            "old Pod is removed first, so the rollout never finishes",
        ),
    ],
    "K015/bad-no-room-for-weights.yaml": [
        (
            "Deployment/llm/k015-disk",
            "container 'nothing' downloads Qwen/Qwen2.5-7B-Instruct (at least 15.2 GB of "
            "weights) into /root/.cache/huggingface/hub with no volume for them and sets "
            "no ephemeral-storage request or limit; the scheduler reserves no disk for the "
            "download, and under disk pressure the kubelet evicts Pods by usage above their "
            "request, this one early",
        ),
        (
            "Deployment/llm/k015-disk",
            "container 'small-limit' downloads Qwen/Qwen2.5-14B-Instruct (at least 29.4 GB of "
            "weights) into /root/.cache/huggingface/hub, but its ephemeral-storage request "
            "20Gi and limit 20Gi are below that; the kubelet evicts the Pod past its limit, "
            "and a small request lets the scheduler place it on a node without the room",
        ),
        (
            "Deployment/llm/k015-disk",
            "container 'small-emptydir' downloads meta-llama/Llama-3.1-8B-Instruct (at least "
            "16.1 GB of weights) into /cache/hub, on the emptyDir 'cache' whose sizeLimit 8Gi "
            "is smaller; the kubelet evicts the Pod when the download passes it",
        ),
        (
            "RayService/ray/k015-ray",
            "container 'ray-worker' (worker group 'gpu') downloads "
            "s3://models/llama-3.3-70b-instruct/ (at least 141.1 GB of weights) into "
            "/home/ray/.cache/huggingface/hub with no volume for them and sets "
            "no ephemeral-storage request or limit; the scheduler reserves no disk for the "
            "download, and under disk pressure the kubelet evicts Pods by usage above their "
            "request, this one early",
        ),
    ],
    "O001/bad-clusterpolicy-too-old.yaml": [
        (
            "ClusterPolicy/-/cluster-policy",
            "GPU Operator v25.3.4 supports Amazon EKS 1.29 to 1.33 (its platform support "
            "matrix), but pool(s) o001-cp run Kubernetes 1.34",
        ),
    ],
    "O001/bad-kubernetes-too-new.yaml": [
        (
            "HelmRelease/gpu-operator/gpu-operator",
            "GPU Operator v26.7.0 supports Amazon EKS 1.33 to 1.36 (its platform support "
            "matrix), but pool(s) o001-new run Kubernetes 1.37",
        ),
    ],
    "O002/bad-driver-too-old.yaml": [
        (
            "Deployment/llm/o002-vllm-new",
            "container 'vllm' image vllm/vllm-openai:v0.33.0 is built on CUDA 13.0.3 (vLLM "
            "0.33.0 docker/Dockerfile ARG CUDA_VERSION), which needs NVIDIA driver >= "
            "580.95.05 (CUDA 13.0.2's driver, the newest 13.0 update in the driver table: a "
            "lower bound), but pool o002-old-ami runs driver 570.124.06 (preinstalled in the "
            "node image AL2023_x86_64_NVIDIA); the container does not start "
            "(nvidia-container-cli: unsatisfied condition: cuda>=13.0)",
        ),
        (
            "RayCluster/ray/o002-ray",
            "container 'ray-worker' (worker group 'h100') image "
            "rayproject/ray-llm:2.60.0-py311-cu128 is built on CUDA 12.8 (the tag's cu128), "
            "which needs NVIDIA driver >= 570.26, but pool o002-operator-driver runs driver "
            "550.54.15 (installed by GPU Operator v25.3.4, driver.version); the container "
            "does not start (nvidia-container-cli: unsatisfied condition: cuda>=12.8)",
        ),
    ],
    "O003/bad-no-driver.yaml": [
        (
            "HelmRelease/o003-nodriver/gpu-operator",
            "GPU Operator v26.7.0 does not install the NVIDIA driver (driver.enabled: false), "
            "and pool(s) o003-none run a node image without one (o003-none: "
            "AL2023_x86_64_STANDARD); the device plugin finds no GPU there and nvidia.com/gpu "
            "stays 0",
        ),
    ],
    "O003/bad-two-drivers.yaml": [
        (
            "HelmRelease/o003-default/gpu-operator",
            "GPU Operator v26.7.0 installs its own NVIDIA driver (driver.enabled: true, the "
            "chart default), but pool(s) o003-twice run a node image that already ships one "
            "(o003-twice: AL2023_x86_64_NVIDIA); set driver.enabled=false for nodes whose "
            "image has the driver",
        ),
    ],
    "O004/bad-unpinned-and-untested.yaml": [
        (
            "HelmRelease/o004-floating/gpu-operator",
            "the GPU Operator chart version is not pinned (>=25.3.0); each install takes the "
            "newest release and with it new driver, toolkit, device plugin and DCGM exporter "
            "versions",
        ),
        (
            "HelmRelease/o004-untested/gpu-operator",
            "GPU Operator v26.7.0 runs components outside its tested set: driver.version "
            "550.54.15 (tested: 595.91.07, 610.57.04, 580.173.02, 535.309.01); "
            "toolkit.version v1.16.2 (tested: v1.20.0); declare deliberate overrides "
            "(gpustrata.io/declared-overrides or declaredOverrides) or use the tested "
            "versions",
        ),
    ],
    "O005/bad-mixed-on-partitioned-pool.yaml": [
        (
            "Job/llm/o005-whole-on-mig",
            "pod requests nvidia.com/gpu on pool o005-partitioned, whose GPUs are "
            "MIG-partitioned (nvidia.com/mig.config: all-3g.40gb), but MIG strategy mixed "
            "advertises MIG-enabled GPUs only as nvidia.com/mig-<profile>, so those nodes "
            "offer no nvidia.com/gpu and the pod stays Pending; use strategy single (each "
            "nvidia.com/gpu is then one MIG instance) or request nvidia.com/mig-<profile> "
            "with mixed",
        ),
        (
            "Job/llm/o005-other-profile",
            "pod requests nvidia.com/mig-1g.10gb, but pool o005-partitioned partitions its "
            "GPUs as all-3g.40gb, which makes no 1g.10gb instances; it stays Pending",
        ),
    ],
    "O005/bad-strategy-single.yaml": [
        (
            "Job/llm/o005-wrong-resource",
            "pod requests nvidia.com/mig-1g.10gb, but the GPU Operator's MIG strategy is "
            "single, and only mixed advertises nvidia.com/mig-<profile> resources (single "
            "advertises MIG devices as nvidia.com/gpu); NVIDIA L40S (pool o005-no-mig) does "
            "not support MIG; it stays Pending",
        ),
    ],
    "O006/bad-untolerated-taints.yaml": [
        (
            "HelmRelease/o006-defaults/gpu-operator",
            "GPU Operator v26.7.0: the operand DaemonSets (daemonsets.tolerations) do not "
            "tolerate pool o006-llm: dedicated=llm:NoSchedule (they tolerate "
            "nvidia.com/gpu:NoSchedule (Exists), the chart default); the device plugin, GPU "
            "Feature Discovery and DCGM exporter never run there, so those nodes advertise no "
            "nvidia.com/gpu",
        ),
        (
            "HelmRelease/o006-defaults/gpu-operator",
            "GPU Operator v26.7.0: the node-feature-discovery workers "
            "(node-feature-discovery.worker.tolerations) do not tolerate pool o006-llm: "
            "dedicated=llm:NoSchedule (they tolerate "
            'node-role.kubernetes.io/control-plane="":NoSchedule (Equal), '
            "nvidia.com/gpu:NoSchedule (Exists), the chart default); those nodes get no PCI "
            "labels, so the operator does not recognise them as GPU nodes and deploys no "
            "operands there",
        ),
        (
            "ClusterPolicy/-/o006-cluster-policy",
            "GPU Operator v26.7.0: the operand DaemonSets (daemonsets.tolerations) do not "
            "tolerate pool o006-llm: nvidia.com/gpu=true:NoSchedule (they tolerate "
            "nvidia.com/gpu=present:NoSchedule (Equal), dedicated (Exists)); the device "
            "plugin, GPU Feature Discovery and DCGM exporter never run there, so those nodes "
            "advertise no nvidia.com/gpu",
        ),
    ],
    "O007/bad-bf16-and-fp8-on-t4.yaml": [
        (
            "Deployment/llm/o007-t4",
            "container 'bf16' runs on NVIDIA T4 Tensor Core GPU (selected by "
            "nvidia.com/gpu.product=Tesla-T4, compute capability 7.5): dtype bfloat16 needs "
            "compute capability 8.0 or newer (vLLM refuses to start: 'Bfloat16 is only "
            "supported on GPUs with compute capability of at least 8.0'); use --dtype half",
        ),
        (
            "Deployment/llm/o007-t4",
            "container 'fp8' runs on NVIDIA T4 Tensor Core GPU (selected by "
            "nvidia.com/gpu.product=Tesla-T4, compute capability 7.5): FP8 weights "
            "(--quantization: fp8) need compute capability 8.0 or newer (weight-only FP8 via "
            "Marlin on Ampere, native FP8 from 8.9); vLLM has no FP8 kernels below 8.0",
        ),
    ],
}

BAD = sorted(p for r in RULES for p in (FIXTURES / r).glob("bad-*.yaml"))


def _rel(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def test_every_bad_fixture_has_expected_messages() -> None:
    assert sorted(EXPECTED) == [_rel(p) for p in BAD]


@pytest.mark.parametrize("path", BAD, ids=_rel)
def test_bad_fixture_gives_exactly_the_expected_findings(path: Path) -> None:
    rule_id = path.parent.name
    report = evaluate(load_paths([str(path)]))
    got = [(f.resource, f.message) for f in report.findings if f.rule == rule_id]
    assert got == EXPECTED[_rel(path)]
    mine = [f for f in report.findings if f.rule == rule_id]
    assert all(f.file == str(path) and f.line for f in mine)
    expected = "advisory" if rule_id in ADVISORY else "mandatory"
    assert {f.enforcement for f in mine} == {expected}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/good-*.yaml")), ids=_rel)
def test_good_fixtures_are_clean_for_these_rules(path: Path) -> None:
    """Every rule's good fixture (not only these rules'): no finding, nothing unevaluated."""
    report = evaluate(load_paths([str(path)]))
    assert [(f.rule, f.message) for f in report.findings if f.rule in RULES] == []
    assert [(n.rule, n.reason) for n in report.not_evaluated if n.rule in RULES] == []


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


def test_driver_known_but_image_cuda_unknown_is_not_evaluated() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "old-vllm", "namespace": "llm"},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.8.5",
                    "args": ["--model", "Qwen/Qwen2.5-7B-Instruct"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        },
    }
    report = evaluate([POOL_DESCRIPTION, pod])
    assert [(n.rule, n.reason) for n in report.not_evaluated if n.rule == "O002"] == [
        (
            "O002",
            "container 'vllm' image vllm/vllm-openai:v0.8.5: the CUDA version of the vLLM "
            "0.8.5 image is not catalogued",
        )
    ]


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("vllm/vllm-openai:v0.33.0", "13.0.3"),
        ("vllm/vllm-openai:v0.19.1", "12.9.1"),
        ("vllm/vllm-openai:v0.9.0", "12.8.1"),
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
    unknown = image_cuda("vllm/vllm-openai:v0.7.3")
    assert unknown is not None and unknown.cuda is None


def _k008_objects(hpa_max: Any, hpa_target: Any) -> list[dict[str, Any]]:
    def deployment(name: str, strategy: dict[str, Any]) -> dict[str, Any]:
        pod = {
            "nodeSelector": {"pool": "p"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "vllm/vllm-openai:v0.33.0",
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
