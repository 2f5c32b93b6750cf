"""Components under Pulumi's mocks: types registered, parents set, user data parses."""

from __future__ import annotations

import base64
import email
from typing import Any

import pytest
import yaml
from _stacks import ROOT, STACKS, stack_doc

from gpustrata.render.nodes import kubelet_config, nodeadm_user_data
from gpustrata.runtime.mockrun import Registered, run_program


@pytest.fixture(scope="module")
def registered() -> dict[str, list[Registered]]:
    return {
        env: run_program(stack_doc(env), stack=env, program=ROOT / "__main__.py") for env in STACKS
    }


def _children(resources: list[Registered], component: str) -> dict[str, set[str]]:
    by_name = {r.name: r for r in resources}
    out: dict[str, set[str]] = {}
    for r in resources:
        if r.parent and by_name[r.parent].type == component:
            out.setdefault(r.parent, set()).add(r.type)
    return out


@pytest.mark.parametrize("env", STACKS)
def test_every_resource_has_a_parent(registered: dict[str, list[Registered]], env: str) -> None:
    for r in registered[env]:
        if r.type != "pulumi:pulumi:Stack":
            assert r.parent, f"{r.type} {r.name} has no parent"


@pytest.mark.parametrize(
    ("component", "expected"),
    [
        (
            "gpustrata:index:EksCluster",
            {
                "aws:eks/cluster:Cluster",
                "aws:iam/role:Role",
                "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                "pulumi:providers:kubernetes",
            },
        ),
        (
            "gpustrata:index:GpuNodePool",
            {"aws:ec2/launchTemplate:LaunchTemplate", "aws:eks/nodeGroup:NodeGroup"},
        ),
        (
            "gpustrata:index:GpuOperator",
            {"kubernetes:core/v1:Namespace", "kubernetes:helm.sh/v3:Release"},
        ),
        (
            "gpustrata:index:KubeRayOperator",
            {"kubernetes:core/v1:Namespace", "kubernetes:helm.sh/v3:Release"},
        ),
        ("gpustrata:index:RayLlmService", {"kubernetes:ray.io/v1:RayService"}),
        (
            "gpustrata:index:VllmDeployment",
            {
                "kubernetes:apps/v1:Deployment",
                "kubernetes:core/v1:Service",
                "kubernetes:policy/v1:PodDisruptionBudget",
                "kubernetes:keda.sh/v1alpha1:ScaledObject",
            },
        ),
    ],
)
def test_layer_components_register_their_resources(
    registered: dict[str, list[Registered]], component: str, expected: set[str]
) -> None:
    children = _children(registered["prod"], component)
    assert children, f"prod registers no {component}"
    for types in children.values():
        assert expected <= types


def _inputs(resources: list[Registered], typ: str) -> list[dict[str, Any]]:
    return [r.inputs for r in resources if r.type == typ]


def test_dev_deployment_is_wired_to_its_pool(registered: dict[str, list[Registered]]) -> None:
    (dep,) = _inputs(registered["dev"], "kubernetes:apps/v1:Deployment")
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][:3] == ["vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["nodeSelector"] == {"gpustrata.io/pool": "gpu-l4"}
    assert {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    (group,) = [
        g
        for g in _inputs(registered["dev"], "aws:eks/nodeGroup:NodeGroup")
        if g["nodeGroupName"] != "system"
    ]
    assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert group["amiType"] == "AL2023_x86_64_NVIDIA"


def test_prod_rayservice_numbers_agree(registered: dict[str, list[Registered]]) -> None:
    (rs,) = _inputs(registered["prod"], "kubernetes:ray.io/v1:RayService")
    cluster = rs["spec"]["rayClusterConfig"]
    (worker,) = cluster["workerGroupSpecs"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert worker["rayStartParams"]["num-gpus"] == limits["nvidia.com/gpu"] == "4"
    assert (worker["minReplicas"], worker["maxReplicas"]) == (2, 4)
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    (llm,) = serve["applications"][0]["args"]["llm_configs"]
    assert llm["engine_kwargs"]["tensor_parallel_size"] == 4
    assert llm["placement_group_config"] == {
        "bundles": [{"GPU": 1.0}] * 4,
        "strategy": "STRICT_PACK",
    }


def test_gpu_workloads_depend_on_the_gpu_operator(registered: dict[str, list[Registered]]) -> None:
    # Ordering is captured in the program; here: the operator exists in every stack.
    for env in STACKS:
        assert _inputs(registered[env], "kubernetes:helm.sh/v3:Release")


@pytest.mark.parametrize("env", STACKS)
def test_user_data_is_a_valid_nodeadm_nodeconfig(
    registered: dict[str, list[Registered]], env: str
) -> None:
    templates = _inputs(registered[env], "aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for lt in templates:
        raw = base64.b64decode(lt["userData"]).decode()
        message = email.message_from_string(raw)
        assert message.is_multipart()
        parts = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
        assert len(parts) == 1
        config = yaml.safe_load(str(parts[0].get_payload()))
        assert config["apiVersion"] == "node.eks.aws/v1alpha1"
        assert config["kind"] == "NodeConfig"
        kubelet = config["spec"]["kubelet"]["config"]
        assert set(kubelet) == {"maxPods", "systemReserved", "kubeReserved", "evictionHard"}
        assert set(kubelet["kubeReserved"]) <= {"cpu", "memory", "ephemeral-storage", "pid"}
        assert kubelet["kubeReserved"]["memory"].endswith("Mi")


def test_user_data_quotes_values() -> None:
    text = nodeadm_user_data(
        pool="p",
        instance_type="g6.xlarge",
        kubelet=kubelet_config(
            max_pods=58,
            system_reserved={"cpu": "500m"},
            kube_reserved={"memory": "893Mi"},
            eviction_hard={"memory.available": "<500Mi", "nodefs.available": "10%"},
        ),
    )
    payload = text.split("Content-Type: application/node.eks.aws", 1)[1].split("--//gpustrata//--")[
        0
    ]
    config = yaml.safe_load(payload.split("---", 1)[1])
    assert config["spec"]["kubelet"]["config"]["evictionHard"] == {
        "memory.available": "500Mi",
        "nodefs.available": "10%",
    }


def test_bad_stack_registers_nothing() -> None:
    from gpustrata.core.errors import StackError

    doc = stack_doc("prod")
    doc["models"][0]["engine"]["gpu_memory_utilization"] = 2
    with pytest.raises(StackError, match=r"gpu_memory_utilization: 2 is above 1\.0"):
        run_program(doc, stack="prod")
