"""GpuNodePool and GpuOperator under Pulumi's mocks: what they register for EKS and for rules."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from _stacks import ROOT, stack_doc

from gpustrata.render.operators import gpu_operator_values
from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata.spec.cluster import GpuOperatorSpec


@pytest.fixture(scope="module")
def prod() -> list[Registered]:
    return run_program(stack_doc("prod"), stack="prod", program=ROOT / "__main__.py")


def _of(resources: list[Registered], typ: str) -> list[dict[str, Any]]:
    return [r.inputs for r in resources if r.type == typ]


def test_node_groups_use_the_nvidia_ami_and_follow_the_cluster_version(
    prod: list[Registered],
) -> None:
    groups = {g["nodeGroupName"]: g for g in _of(prod, "aws:eks/nodeGroup:NodeGroup")}
    assert groups.pop("system")["amiType"] == "AL2023_x86_64_STANDARD"  # no GPU driver needed
    assert set(groups) == {"gpu-h100", "gpu-l40s"}
    for group in groups.values():
        assert group["amiType"] == "AL2023_x86_64_NVIDIA"
        assert group["version"] == "1.34"
    assert groups["gpu-h100"]["labels"] == {
        "gpustrata.io/pool": "gpu-h100",
        "gpustrata.io/gpu": "h100-sxm-80gb",
        "gpustrata.io/gpu-count": "8",
    }


def test_node_role_carries_the_managed_policies_eks_requires(prod: list[Registered]) -> None:
    arns = {a["policyArn"] for a in _of(prod, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    } <= arns


def test_pool_description_tells_rules_the_node_image_and_versions(prod: list[Registered]) -> None:
    descriptions = {
        d["description"]["metadata"]["name"]: d["description"]["spec"]
        for d in _of(prod, "gpustrata:index:GpuNodePool")
    }
    h100 = descriptions["gpu-h100"]
    assert (h100["kubernetesVersion"], h100["amiType"], h100["driverVersion"]) == (
        "1.34",
        "AL2023_x86_64_NVIDIA",
        "580.173.02",
    )
    assert h100["diskSizeGiB"] == 1000


def test_gpu_operator_registers_its_description_and_values(prod: list[Registered]) -> None:
    (component,) = _of(prod, "gpustrata:index:GpuOperator")
    description = component["description"]
    assert (description["kind"], description["spec"]["version"]) == ("GpuOperator", "v26.7.0")
    (release,) = [
        r for r in _of(prod, "kubernetes:helm.sh/v3:Release") if r["chart"] == "gpu-operator"
    ]
    values = release["values"]
    assert description["spec"]["values"] == values
    # The EKS NVIDIA AMI ships driver and toolkit (O003); MIG off; DCGM metrics scraped.
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["mig"] == {"strategy": "none"}
    assert values["dcgmExporter"]["serviceMonitor"] == {"enabled": True}
    # Operands and NFD tolerate exactly the pools' taints.
    expected = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert values["daemonsets"]["tolerations"] == expected
    assert values["node-feature-discovery"]["worker"]["tolerations"] == expected


def test_existing_cluster_pools_are_described_not_created() -> None:
    doc = stack_doc("dev")
    doc["cluster"] = {
        "name": "existing",
        "mode": "existing",
        "kubernetes_version": "1.34",
        "context": "gpu",
    }
    resources = run_program(doc, stack="dev", program=ROOT / "__main__.py")
    assert not _of(resources, "aws:eks/nodeGroup:NodeGroup")
    (pool,) = _of(resources, "gpustrata:index:GpuNodePool")
    spec = pool["description"]["spec"]
    # The stack knows the cluster's version, not an existing node image.
    assert spec["kubernetesVersion"] == "1.34"
    assert "amiType" not in spec and "diskSizeGiB" not in spec


def test_stated_tolerations_replace_the_pool_taints_and_sharing_config() -> None:
    spec = GpuOperatorSpec.model_validate(
        {
            "chart_version": "v26.7.0",
            "mig_strategy": "single",
            "sharing": {"strategy": "time-slicing", "replicas": 4},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        }
    )
    pool_taint = [{"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}]
    values = gpu_operator_values(spec, pool_taint)  # type: ignore[arg-type]
    assert values["daemonsets"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert values["mig"] == {"strategy": "single"}
    assert values["devicePlugin"]["config"] == {
        "name": "gpustrata-device-plugin-config",
        "default": "shared",
    }


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"key": "a", "operator": "Exists", "value": "x"}, "operator Exists takes no value"),
        ({"operator": "Equal", "value": "x"}, "operator Equal needs a key"),
        ({"key": "a", "operator": "In"}, "operator"),
    ],
)
def test_bad_tolerations_are_rejected(toleration: dict[str, str], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        GpuOperatorSpec.model_validate({"chart_version": "v26.7.0", "tolerations": [toleration]})


def test_render_prints_pools_and_operator_for_check(capsys: pytest.CaptureFixture[str]) -> None:
    from gpustrata.cli.app import main

    assert main(["render", "--stack", "prod", "--project-dir", str(ROOT)]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [o["kind"] for o in objects]
    assert kinds.count("GpuNodePool") == 2 and kinds.count("GpuOperator") == 1
    pool = next(o for o in objects if o["kind"] == "GpuNodePool")
    assert pool["spec"]["kubernetesVersion"] == "1.34"
