"""Karpenter NodePools and EC2NodeClasses as GPU pools (issue 15 item 2): what the view reads
from them, how Pods match them, and the rules (K004, K005, K006, O003, V003, V004, V012) that
evaluate on them. Fixture-level findings live in the rule folders (test_rule_folders.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _release import REFERENCE_IMAGE
from conftest import deployment_of

from gpustrata_policies import evaluate
from gpustrata_policies.findings import Report
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool, pool_matches, pools_of


def node_class(name: str = "gpu", **spec: Any) -> dict[str, Any]:
    body = {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}]}
    body.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": body,
    }


def node_pool(
    name: str,
    requirements: list[dict[str, Any]],
    *,
    api: str = "karpenter.sh/v1",
    taints: list[dict[str, Any]] | None = None,
    limits: dict[str, Any] | None = None,
    template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
        "requirements": requirements,
        "taints": taints
        if taints is not None
        else [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    }
    spec.update(template or {})
    return {
        "apiVersion": api,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": spec},
            "limits": limits or {},
            "disruption": {"consolidationPolicy": "WhenEmpty"},
        },
    }


def req(key: str, *values: str, op: str = "In") -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


FAMILY = "karpenter.k8s.aws/instance-family"
SIZE = "karpenter.k8s.aws/instance-size"


def deployment(model: str, args: list[str], selector: dict[str, str]) -> dict[str, Any]:
    return deployment_of(
        {
            "nodeSelector": selector,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "vllm",
                    "image": REFERENCE_IMAGE,
                    "args": ["--model", model, *args],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        }
    )


def pools(*raws: dict[str, Any]) -> dict[str, GpuPool]:
    return {p.name: p for p in pools_of([K8sObject(r) for r in raws])}


def rule(report: Report, rule_id: str) -> tuple[list[str], list[str]]:
    return (
        [f.message for f in report.findings if f.rule == rule_id],
        [n.reason for n in report.not_evaluated if n.rule == rule_id],
    )


def test_a_nodepool_reads_its_types_gpu_limits_image_and_kubelet() -> None:
    kubelet = {"systemReserved": {"cpu": "1", "memory": "1Gi"}}
    found = pools(
        node_class(kubelet=kubelet),
        node_pool(
            "gpu-l4",
            [req(FAMILY, "g6"), req(SIZE, "2xlarge", "4xlarge", "8xlarge")],
            limits={"nvidia.com/gpu": 6},
        ),
    )["gpu-l4"]
    assert found.extra["instanceTypes"] == ["g6.2xlarge", "g6.4xlarge", "g6.8xlarge"]
    assert (found.gpu_product, found.gpu_count) == ("NVIDIA-L4", 1)
    assert found.max_size == 6  # limits nvidia.com/gpu 6 / 1 GPU per node
    assert found.driver_preinstalled is True
    assert "alias al2023@latest" in found.extra["nodeImage"]
    assert found.extra["kubelet"] == kubelet
    assert found.extra["kubeletObject"].kind == "EC2NodeClass"
    assert found.hard_taints == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]


def test_several_gpu_models_leave_product_and_count_unset_and_name_each() -> None:
    found = pools(node_class(), node_pool("mixed", [req(FAMILY, "g6", "g6e")]))["mixed"]
    assert found.gpu_product is None and found.gpu_count is None  # 1, 4 or 8 per node
    assert found.extra["gpuModels"] == ["l4", "l40s"]
    assert found.has_gpus


def test_a_cpu_nodepool_is_no_gpu_pool() -> None:
    cpu = node_pool("cpu", [req(FAMILY, "m5")], taints=[])
    assert not pools(node_class(), cpu)["cpu"].has_gpus


def test_unknown_types_are_named() -> None:
    found = pools(
        node_class(), node_pool("odd", [req("node.kubernetes.io/instance-type", "x9.huge")])
    )
    assert found["odd"].extra["unknownTypes"] == ["x9.huge"]
    report = evaluate(
        [
            K8sObject(node_class()),
            K8sObject(node_pool("odd", [req("node.kubernetes.io/instance-type", "x9.huge")])),
            K8sObject(
                deployment("meta-llama/Llama-3.1-8B-Instruct", [], {"karpenter.sh/nodepool": "odd"})
            ),
        ]
    )
    _, reasons = rule(report, "V003")
    assert any("x9.huge" in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({"karpenter.sh/nodepool": "gpu-l4"}, True),
        ({"node.kubernetes.io/instance-type": "g6.4xlarge"}, True),
        ({"node.kubernetes.io/instance-type": "p5.48xlarge"}, False),
        ({"karpenter.sh/capacity-type": "spot"}, True),
        ({"karpenter.k8s.aws/instance-gpu-name": "l4"}, True),
        ({"karpenter.k8s.aws/instance-gpu-name": "h100"}, False),
        # GFD labels appear only once the node runs; Karpenter does not launch for them.
        ({"nvidia.com/gpu.product": "NVIDIA-L4"}, False),
    ],
)
def test_pods_match_any_node_the_nodepool_may_launch(
    selector: dict[str, str], matches: bool
) -> None:
    pool = pools(
        node_class(),
        node_pool(
            "gpu-l4",
            [
                req(FAMILY, "g6"),
                req(SIZE, "2xlarge", "4xlarge"),
                req("karpenter.sh/capacity-type", "spot", "on-demand"),
            ],
        ),
    )["gpu-l4"]
    assert pool_matches(selector, [], pool) is matches


def test_v1beta1_kubelet_on_the_nodepool_and_a_custom_ami() -> None:
    kubelet = {"evictionHard": {"memory.available": "1Gi"}}
    found = pools(
        {
            **node_class(amiFamily="Custom", amiSelectorTerms=[{"id": "ami-123"}]),
            "apiVersion": "karpenter.k8s.aws/v1beta1",
        },
        node_pool(
            "b", [req(FAMILY, "p5")], api="karpenter.sh/v1beta1", template={"kubelet": kubelet}
        ),
    )["b"]
    assert found.extra["kubeletObject"].kind == "NodePool"
    assert found.driver_preinstalled is None  # an AMI of one's own: unknown
    assert found.gpu_product == "NVIDIA-H100-80GB-HBM3"


def test_bottlerocket_nodes_ship_the_driver_so_an_installing_operator_is_o003() -> None:
    operator = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
        "spec": {
            "chart": {"spec": {"chart": "gpu-operator", "version": "v26.7.0"}},
            "values": {"driver": {"enabled": True}},
        },
    }
    report = evaluate(
        [
            K8sObject(node_class(amiSelectorTerms=[{"alias": "bottlerocket@latest"}])),
            K8sObject(node_pool("gpu-a10g", [req(FAMILY, "g5")])),
            K8sObject(operator),
        ]
    )
    findings, _ = rule(report, "O003")
    assert len(findings) == 1 and "gpu-a10g" in findings[0]
    assert "bottlerocket@latest" in findings[0]


def test_a_multi_model_nodepool_checks_the_engine_on_each_model() -> None:
    """Llama 3.1 8B with its full context: fits an L40S, not an L4; a NodePool that may
    launch either is reported for the L4."""
    report = evaluate(
        [
            K8sObject(node_class()),
            K8sObject(node_pool("mixed", [req(FAMILY, "g6", "g6e"), req(SIZE, "2xlarge")])),
            K8sObject(
                deployment(
                    "meta-llama/Llama-3.1-8B-Instruct",
                    ["--max-model-len", "131072"],
                    {"karpenter.sh/nodepool": "mixed"},
                )
            ),
        ]
    )
    findings, _ = rule(report, "V004")
    assert len(findings) == 1 and "L4" in findings[0] and "L40S" not in findings[0]


def test_odd_nodepool_input_does_not_crash() -> None:
    odd = node_pool("odd", "not-a-list")  # type: ignore[arg-type]
    odd["spec"]["template"]["spec"]["taints"] = [None, {"key": 3}]
    found = pools(
        odd, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}}
    )
    assert set(found) == {"odd", "x"}


@pytest.mark.parametrize(
    ("sizes", "fits"), [(("2xlarge", "48xlarge"), True), (("2xlarge", "4xlarge"), False)]
)
def test_k005_fits_a_pod_to_any_type_the_nodepool_may_launch(
    sizes: tuple[str, ...], fits: bool
) -> None:
    pod = deployment("Qwen/Qwen2.5-1.5B-Instruct", [], {"karpenter.sh/nodepool": "l4"})
    pod["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 8}
    }
    report = evaluate(
        [
            K8sObject(node_class()),
            K8sObject(node_pool("l4", [req(FAMILY, "g6"), req(SIZE, *sizes)])),
            K8sObject(pod),
        ]
    )
    findings, reasons = rule(report, "K005")
    assert reasons == []
    if fits:
        assert findings == []
    else:
        assert len(findings) == 1 and "none of the 2 instance type(s) it may launch" in findings[0]
        assert "g6.4xlarge" in findings[0] and "1 GPU(s) per node" in findings[0]


def test_the_karpenter_blueprint_gpu_nodepool_and_a_pod_selecting_t4() -> None:
    """aws-samples/karpenter-blueprints@f986fd61 blueprints/nvidia-gpu-workload: category g,
    manufacturer nvidia; the Pod's instance-gpu-name t4 selector narrows it to the T4 types."""
    blueprint = node_pool(
        "gpu",
        [
            req("karpenter.sh/capacity-type", "on-demand"),
            req("karpenter.k8s.aws/instance-category", "g"),
            req("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia"),
        ],
        limits={"cpu": 100, "memory": "100Gi", "nvidia.com/gpu": 5},
    )
    found = pools(node_class(), blueprint)["gpu"]
    # Every catalogued g-category type (a family added to instances.yaml joins), no p-type.
    families = {t.split(".")[0] for t in found.extra["instanceTypes"]}
    assert families >= {"g4dn", "g5", "g6", "g6e"} and all(f.startswith("g") for f in families)
    assert {"a10g", "l4", "l40s", "t4"} <= set(found.extra["gpuModels"])
    assert not {"a100-sxm-80gb", "h100-sxm-80gb"} & set(found.extra["gpuModels"])
    pod = deployment(
        "meta-llama/Llama-3.1-8B-Instruct",
        [],
        {"karpenter.k8s.aws/instance-gpu-name": "t4"},
    )
    report = evaluate([K8sObject(node_class()), K8sObject(blueprint), K8sObject(pod)])
    findings, _ = rule(report, "V003")  # 16 GB of bf16 weights on a 15 GiB T4
    assert len(findings) == 1 and "T4 Tensor Core GPU (pool gpu)" in findings[0]  # T4 only


def test_a_v1beta1_nodepool_alone_says_eks() -> None:
    """v1beta1's nodeClassRef names apiVersion/kind, not group: still Karpenter's AWS
    provider, so EKS's ExtendedResourceToleration admits the nvidia.com/gpu taint (K004)."""
    pool = node_pool("b", [req(FAMILY, "g6")], api="karpenter.sh/v1beta1")
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "name": "gpu",
    }
    pod = deployment("Qwen/Qwen2.5-1.5B-Instruct", [], {"karpenter.sh/nodepool": "b"})
    del pod["spec"]["template"]["spec"]["tolerations"]
    findings, reasons = rule(evaluate([K8sObject(pool), K8sObject(pod)]), "K004")
    assert findings == [] and reasons == []
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {"name": "gpu"}  # nothing says EKS
    findings, _ = rule(evaluate([K8sObject(pool), K8sObject(pod)]), "K004")
    assert len(findings) == 1


def _pinned(types: list[str]) -> dict[str, Any]:
    dep = deployment(
        "meta-llama/Llama-3.1-8B-Instruct",
        ["--max-model-len", "131072"],
        {"karpenter.sh/nodepool": "wide"},
    )
    dep["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [req("node.kubernetes.io/instance-type", *types)]}
                ]
            }
        }
    }
    return dep


def test_a_pod_pinned_to_catalogued_types_gets_their_gpu_despite_unknown_pool_types() -> None:
    """A NodePool that also allows a family the catalogue lacks (data-on-eks's `gpu` pool
    allows g7e) leaves the GPU unknown for a Pod that may land on it, but not for a Pod whose
    own affinity names only catalogued types (g6e: L40S): V004 judges it there."""
    wide = node_pool("wide", [req(FAMILY, "g6e", "x9e")], limits={"nvidia.com/gpu": 8})
    pinned = evaluate(
        [
            K8sObject(node_class()),
            K8sObject(wide),
            K8sObject(_pinned(["g6e.2xlarge", "g6e.4xlarge"])),
        ]
    )
    findings, reasons = rule(pinned, "V004")
    # Judged on the L40S, where 131,072 tokens of Llama 3.1 8B fit: no finding, no reason.
    assert (findings, reasons) == ([], [])
    # A Pod that may get an uncatalogued type stays not evaluated, naming the types.
    open_ = evaluate(
        [
            K8sObject(node_class()),
            K8sObject(wide),
            K8sObject(_pinned(["g6e.2xlarge", "x9e.huge"])),
        ]
    )
    _findings, reasons = rule(open_, "V004")
    assert any("does not know" in r and "x9e family" in r for r in reasons), reasons


def test_r006_bounds_a_nodepool_of_mixed_gpu_counts_by_its_gpu_limit() -> None:
    """A NodePool whose types carry 1 to 8 GPUs (g6e) has no one maxSize, but its
    `nvidia.com/gpu` limit bounds its GPUs: R006 judges the upgrade against it instead of
    saying the limits name no GPU (they do)."""
    import yaml

    from gpustrata_policies.rules import r006_upgrade_capacity

    folder = Path(r006_upgrade_capacity.__file__).parent
    docs = list(yaml.safe_load_all((folder / "bad-upgrade-exceeds-pool.yaml").read_text()))
    ray = next(d for d in docs if d["kind"] == "RayService")
    worker = ray["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["nodeSelector"] = {"karpenter.sh/nodepool": "mixed"}
    worker["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    worker["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [req("node.kubernetes.io/instance-type", "g6e.12xlarge")]}
                ]
            }
        }
    }

    def run(limit: int) -> tuple[list[str], list[str]]:
        mixed = node_pool("mixed", [req(FAMILY, "g6e")], limits={"nvidia.com/gpu": limit})
        return rule(evaluate([K8sObject(node_class()), K8sObject(mixed), K8sObject(ray)]), "R006")

    findings, reasons = run(8)  # 16 serving + 8 new GPUs against at most 8
    assert len(findings) == 1 and "mixed at most 8 GPUs (its nvidia.com/gpu limit)" in findings[0]
    assert not reasons
    assert run(64) == ([], [])  # 24 GPUs fit under the limit
