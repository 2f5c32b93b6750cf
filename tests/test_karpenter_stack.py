"""Karpenter-provisioned pools: the planner's numbers for every type a NodePool may launch,
and what the staging stack (its L40S pool on Karpenter) registers under Pulumi's mocks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _stacks import ROOT, stack_doc, stack_path

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.planning.build import build_plan
from gpustrata.planning.node_pools import kube_reserved_cpu_millicores, kube_reserved_memory_mib
from gpustrata.render.from_plan import karpenter_values
from gpustrata.render.karpenter import SERVICE_ACCOUNT
from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata_policies import evaluate, objects_from_pulumi

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def staging() -> list[Registered]:
    return run_program(stack_doc("staging"), stack="staging", program=ROOT / "__main__.py")


def _of(resources: list[Registered], typ: str) -> list[Registered]:
    return [r for r in resources if r.type == typ]


def _staging(**pool: Any) -> dict[str, Any]:
    doc = stack_doc("staging")
    doc["node_pools"][0].update(pool)
    return doc


def test_nodepool_carries_taints_limits_and_disruption(staging: list[Registered]) -> None:
    doc = stack_doc("staging")
    pool = doc["node_pools"][0]
    (node_pool,) = _of(staging, NODE_POOL)
    spec = node_pool.inputs["spec"]
    template = spec["template"]["spec"]
    assert template["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    ]
    types = next(
        r for r in template["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
    )
    assert types["values"] == [pool["instance_type"], *pool["karpenter"]["instance_types"]]
    gpus = load_hardware_catalog().instance(pool["instance_type"]).gpu_count  # type: ignore[union-attr]
    assert spec["limits"] == {"nvidia.com/gpu": str(pool["max_size"] * gpus)}
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert template["expireAfter"] == "Never"
    assert template["nodeClassRef"]["name"] == node_pool.inputs["metadata"]["name"] == pool["name"]
    # Models' Pods select the pool by the label the NodePool puts on its nodes.
    assert spec["template"]["metadata"]["labels"]["gpustrata.io/pool"] == pool["name"]


def test_nodeclass_kubelet_is_the_planners_like_a_node_group(staging: list[Registered]) -> None:
    plan = build_plan(stack_doc("staging"))
    pool = plan.pools["gpu-l40s"]
    (node_class,) = _of(staging, NODE_CLASS)
    kubelet = node_class.inputs["spec"]["kubelet"]
    assert kubelet == {
        "maxPods": pool.max_pods,
        "systemReserved": pool.system_reserved,
        "kubeReserved": pool.kube_reserved,
        "evictionHard": pool.eviction_hard,
    }
    description = next(
        r.inputs["description"]
        for r in _of(staging, "gpustrata:index:GpuNodePool")
        if r.inputs["description"]["metadata"]["name"] == "gpu-l40s"
    )
    assert description["spec"]["kubelet"] == kubelet  # what the rules read
    assert description["spec"]["provisioner"] == "karpenter"
    volume = node_class.inputs["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert volume == f"{stack_doc('staging')['node_pools'][0]['disk_size_gib']}Gi"
    # No managed node group for a Karpenter pool; the L4 pool and the system pool keep theirs.
    groups = [r.inputs["nodeGroupName"] for r in _of(staging, "aws:eks/nodeGroup:NodeGroup")]
    assert sorted(groups) == ["gpu-l4", "system"]


def test_controller_chart_is_pinned_with_its_aws_side(staging: list[Registered]) -> None:
    release = next(r for r in _of(staging, RELEASE) if r.inputs["name"] == "karpenter")
    pinned = load_compat_catalog().karpenter_releases()[0]
    assert (release.inputs["chart"], release.inputs["version"]) == (pinned.chart, pinned.version)
    (queue,) = _of(staging, "aws:sqs/queue:Queue")
    assert release.inputs["values"]["settings"]["interruptionQueue"] == queue.inputs["name"]
    rules = [
        json.loads(r.inputs["eventPattern"])
        for r in _of(staging, "aws:cloudwatch/eventRule:EventRule")
    ]
    assert {"EC2 Spot Instance Interruption Warning"} <= {
        d for r in rules for d in r["detail-type"]
    }
    assert len(_of(staging, "aws:cloudwatch/eventTarget:EventTarget")) == len(rules)
    (identity,) = [
        r
        for r in _of(staging, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs["serviceAccount"] == SERVICE_ACCOUNT
    ]
    assert identity.inputs["serviceAccount"] == SERVICE_ACCOUNT
    assert identity.inputs["namespace"] == release.inputs["namespace"]
    (profile,) = _of(staging, "aws:iam/instanceProfile:InstanceProfile")
    (node_class,) = _of(staging, NODE_CLASS)
    assert node_class.inputs["spec"]["instanceProfile"] == profile.inputs["name"]
    # The NodePool and EC2NodeClass wait for the chart that installs their CRDs.
    (node_pool,) = _of(staging, NODE_POOL)
    assert release.name in node_pool.depends_on and release.name in node_class.depends_on


def test_staging_plan_is_clean_under_the_rules(staging: list[Registered]) -> None:
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in staging)
    report = evaluate(objects, environment="staging")
    assert [f.rule_id for f in report.findings] == []


def test_render_of_staging_checks_clean(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    assert main(["render", "--file", str(stack_path("staging"))]) == 0
    rendered = tmp_path / "staging.yaml"
    rendered.write_text(capsys.readouterr().out, encoding="utf-8")
    assert "kind: NodePool" in rendered.read_text(encoding="utf-8")
    assert main(["check", str(rendered)]) == 0
    out = capsys.readouterr().out
    assert "0 mandatory, 0 advisory finding(s)" in out
    # The rendered KubeRay release names its version, as plan's does: the one record not
    # evaluated is the same one plan reports (no minimum Ray version catalogued for it).
    assert "1 not evaluated" in out and "R004 RayService/inference/llama-70b-fp8" in out


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_managed_node_group_stacks_register_no_karpenter(env: str) -> None:
    resources = run_program(stack_doc(env), stack=env, program=ROOT / "__main__.py")
    assert not [r for r in resources if "karpenter" in r.type.lower() or "karpenter" in r.name]


def test_reservations_hold_for_every_type_the_nodepool_may_launch() -> None:
    plan = build_plan(stack_doc("staging"))
    pool = plan.pools["gpu-l40s"]
    hardware = load_hardware_catalog()
    types = [hardware.instance(t) for t in pool.instance_types]
    assert len(types) == 2
    assert pool.max_pods == min(t.max_pods for t in types)  # type: ignore[union-attr,type-var]
    widest = max(t.vcpu for t in types)  # type: ignore[union-attr]
    assert pool.kube_reserved["cpu"] == f"{kube_reserved_cpu_millicores(widest)}m"
    assert pool.kube_reserved["memory"] == f"{kube_reserved_memory_mib(pool.max_pods)}Mi"
    assumed = {d.key: d for d in plan.derived}["pools.gpu-l40s.assumedInstanceType"]
    assert assumed.value == pool.instance.name == "g6e.12xlarge"
    assert "g6e.24xlarge" in assumed.why


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        (
            _staging(karpenter={"instance_types": ["g6.12xlarge"]}),
            "node_pools[0].karpenter.instance_types[0]",
            "'g6.12xlarge' has 4 x l4, 'g6e.12xlarge' 4 x l40s",
        ),
        (
            _staging(instance_type="g6e.24xlarge", karpenter={"instance_types": ["g6e.12xlarge"]}),
            "node_pools[0].karpenter.instance_types[0]",
            "is smaller than instance_type 'g6e.24xlarge'",
        ),
        (
            _staging(kubelet={"eviction_hard": {"containerfs.available": "10%"}}),
            "node_pools[0].kubelet.eviction_hard",
            "'containerfs.available' is not an eviction signal Karpenter",
        ),
        (
            {**stack_doc("staging"), "karpenter": {"chart_version": "0.37.0"}},
            "karpenter.chart_version",
            "'0.37.0' is not a catalogued Karpenter release",
        ),
    ],
)
def test_pools_karpenter_cannot_serve_are_refused(
    doc: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(StackError) as err:
        build_plan(doc, "stacks/Pulumi.staging.yaml")
    text = str(err.value)
    assert f"gpustrata:stack.{path}" in text and message in text


def test_karpenter_pools_need_a_cluster_gpustrata_creates() -> None:
    doc = stack_doc("staging")
    doc["cluster"] = {"name": "shared", "mode": "existing", "kubernetes_version": "1.34"}
    with pytest.raises(StackError) as err:
        build_plan(doc)
    assert "gpustrata:stack.node_pools[0].provisioner" in str(err.value)
    assert "karpenter pools are created with the EKS cluster" in str(err.value)


def test_the_controller_runs_on_the_system_pool() -> None:
    """The controller never runs on its own nodes nor on a (spot) GPU node: its replicas
    follow the system pool's standing nodes, whatever the GPU pools' minimum."""
    doc = stack_doc("staging")
    doc["node_pools"][1]["min_size"] = 0
    doc["cluster"]["system_pool"] = {"min_size": 1}
    plan = build_plan(doc)
    assert plan.karpenter is not None and plan.karpenter.replicas == 1
    values = karpenter_values(plan)
    assert values["tolerations"] == []
    assert values["nodeSelector"] == {"gpustrata.io/pool": "system"}
    doc["cluster"]["system_pool"] = {"min_size": 0}
    with pytest.raises(StackError, match=r"system_pool\.min_size"):
        build_plan(doc)


def test_karpenter_settings_need_the_karpenter_provisioner() -> None:
    doc = _staging(provisioner="managed-node-group")
    with pytest.raises(StackError, match="karpenter settings need provisioner: karpenter"):
        build_plan(doc)


def test_the_node_role_gets_no_second_access_entry(staging: list[Registered]) -> None:
    # The managed node group (which the controller needs) shares the node role, and EKS
    # creates that role's EC2_LINUX entry itself: a second one fails on a real `up`.
    assert _of(staging, "aws:eks/accessEntry:AccessEntry") == []


def test_karpenter_cannot_provision_for_dra_claims() -> None:
    with pytest.raises(StackError) as err:
        build_plan(_staging(gpu_allocation="dra"))
    assert "node_pools[0]" in str(err.value) and "karpenter#2384" in str(err.value)


def test_bottlerocket_nodes_keep_the_operators_device_plugin_off() -> None:
    # Bottlerocket's NVIDIA variants run the device plugin on the host.
    plan = build_plan(_staging(karpenter={"ami_alias": "bottlerocket@latest"}))
    assert plan.pools["gpu-l40s"].labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert (
        "nvidia.com/gpu.deploy.device-plugin" not in build_plan(_staging()).pools["gpu-l40s"].labels
    )


def test_existing_dra_nodes_are_not_assumed_to_carry_the_device_plugin_label() -> None:
    doc = stack_doc("prod")
    doc["cluster"] = {"name": "shared", "mode": "existing", "kubernetes_version": "1.34"}
    plan = build_plan(doc)
    assert "nvidia.com/gpu.deploy.device-plugin" not in plan.pools["gpu-l40s"].labels
    create = build_plan(stack_doc("prod"))
    assert create.pools["gpu-l40s"].labels["nvidia.com/gpu.deploy.device-plugin"] == "false"


def test_a_standing_node_count_is_refused_on_a_karpenter_pool() -> None:
    with pytest.raises(StackError) as err:
        build_plan(_staging(min_size=1))
    assert "node_pools[0]" in str(err.value) and "keeps no standing nodes" in str(err.value)
