"""The cluster foundation each reference stack registers under Pulumi's mocks (issue 29).

Each test names the finding of the deploy review it guards; on the code before the fix
(no system node group, no add-ons, default VPC, charts and Ray head with no place to run,
ServiceMonitors without their CRDs, s3 weights without an identity, an endpoint on the
container's port) each of them fails.
"""

from __future__ import annotations

import copy
import json
import zlib
from typing import Any

import pytest
from _stacks import STACKS, closure, stack_doc

from gpustrata.catalog.aws import pod_identity_trust_policy
from gpustrata.core.contract import POOL_LABEL
from gpustrata.core.errors import StackError
from gpustrata.render.foundation import s3_read_policy, subnet_layout
from gpustrata.runtime.mockrun import Registered, run_program

HELM = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[str, dict[str, Registered]]:
    env = str(request.param)
    return env, {r.name: r for r in run_program(stack_doc(env), stack=env)}


def _system_group(res: dict[str, Registered]) -> Registered:
    groups = [
        r
        for r in res.values()
        if r.type == NODE_GROUP and (r.inputs.get("labels") or {}).get(POOL_LABEL) == "system"
    ]
    assert len(groups) == 1, "one system node group"
    return groups[0]


def test_system_pool_untainted_with_standing_nodes(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    """Finding 1: every pool carried the GPU taint; controllers had no node."""
    _, res = stack
    group = _system_group(res)
    assert not group.inputs.get("taints")
    assert group.inputs["scalingConfig"]["minSize"] >= 1
    assert group.inputs["amiType"].startswith("AL2023_")


def test_addons_managed_and_coredns_after_nodes(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 1 (CoreDNS on an all-tainted cluster) and the add-ons the stack relies on."""
    _, res = stack
    addons = {r.inputs["addonName"]: r for r in res.values() if r.type == "aws:eks/addon:Addon"}
    assert {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"} <= set(addons)
    system = _system_group(res).name
    assert system in closure(res, addons["coredns"].name)
    assert system not in closure(res, addons["vpc-cni"].name)


def test_every_release_waits_for_system_nodes_and_lands_there(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    """Findings 1 and 4: releases waited 15 minutes before any node they could use existed,
    and their controllers tolerated only the control plane."""
    _, res = stack
    system = _system_group(res).name
    releases = [r for r in res.values() if r.type == HELM]
    assert releases
    for release in releases:
        assert system in closure(res, release.name), release.inputs["chart"]
        text = json.dumps(release.inputs.get("values") or {})
        assert f'"{POOL_LABEL}": "system"' in text, release.inputs["chart"]


def test_ray_head_on_system_pool(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 7: the Ray head had no toleration or selector on an all-tainted cluster."""
    env, res = stack
    services = [r for r in res.values() if r.inputs.get("kind") == "RayService"]
    if env == "dev":
        assert not services
        return
    for svc in services:
        head = svc.inputs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
        assert head["nodeSelector"] == {POOL_LABEL: "system"}
        assert not head.get("tolerations")


def test_created_vpc_private_subnets_tagged(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 6: the default VPC's public subnets in every AZ were assumed."""
    _, res = stack
    subnets = [r for r in res.values() if r.type == "aws:ec2/subnet:Subnet"]
    private = [s for s in subnets if "kubernetes.io/role/internal-elb" in s.inputs["tags"]]
    public = [s for s in subnets if "kubernetes.io/role/elb" in s.inputs["tags"]]
    assert len(private) >= 2 and len(public) == len(private)
    assert all("karpenter.sh/discovery" in s.inputs["tags"] for s in private)
    assert not any(s.inputs.get("mapPublicIpOnLaunch") for s in private)
    groups = [r for r in res.values() if r.type == NODE_GROUP]
    # The mock gives each subnet an id derived from its name (runtime/mockrun.py).
    ids = {f"subnet-{zlib.crc32(s.name.encode()):08x}" for s in private}
    for group in groups:
        assert set(group.inputs["subnetIds"]) <= ids, group.name
    assert any(r.type == "aws:ec2/natGateway:NatGateway" for r in res.values())


def test_custom_resources_have_their_chart(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 3: ServiceMonitor and ScaledObject with no CRD (no matches for kind)."""
    _, res = stack
    charts = {r.inputs["chart"]: r.name for r in res.values() if r.type == HELM}
    needs = {"ServiceMonitor": "kube-prometheus-stack", "ScaledObject": "keda"}
    for r in res.values():
        kind = r.inputs.get("kind")
        if kind in needs:
            assert needs[kind] in charts, f"{kind} {r.name} without {needs[kind]}"
            assert charts[needs[kind]] in closure(res, r.name)


def test_pod_identity_roles_trust_the_catalogued_policy(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    """Every role EKS Pod Identity hands to Pods (the EBS CSI and Karpenter controllers',
    each s3:// model's weights reader) trusts the catalogue's principal and actions."""
    _, res = stack
    associations = [
        r for r in res.values() if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    ]
    trusts = [
        json.loads(r.inputs["assumeRolePolicy"])
        for r in res.values()
        if r.type == "aws:iam/role:Role"
        and "pods.eks.amazonaws.com" in r.inputs["assumeRolePolicy"]
    ]
    assert len(trusts) == len(associations)  # none on a stack that creates no cluster
    assert all(trust == pod_identity_trust_policy() for trust in trusts)


def test_object_store_weights_have_pod_identity(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 8: s3:// weights read with the node role's credentials (AccessDenied)."""
    env, res = stack
    doc = stack_doc(env)
    s3_models = [m for m in doc["models"] if (m.get("weights") or {}).get("source") == "s3"]
    assoc = [
        r
        for r in res.values()
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
        and r.inputs["serviceAccount"].endswith("-weights")
    ]
    assert len(assoc) == len(s3_models)
    for model in s3_models:
        account = f"{model['name']}-weights"
        found = [a for a in assoc if a.inputs["serviceAccount"] == account]
        assert found and found[0].inputs["namespace"] == model.get("namespace", "inference")
        pods = json.dumps([r.inputs for r in res.values() if r.type.startswith("kubernetes:")])
        assert f'"serviceAccountName": "{account}"' in pods


def test_endpoint_is_the_service_port(stack: tuple[str, dict[str, Registered]]) -> None:
    """Finding 9: the exported endpoint said 8000 while the Service listened on 80."""
    _, res = stack
    for svc in (r for r in res.values() if r.type == "kubernetes:core/v1:Service"):
        port = svc.inputs["spec"]["ports"][0]["port"]
        name, ns = svc.inputs["metadata"]["name"], svc.inputs["metadata"]["namespace"]
        endpoints = [
            r.inputs["description"]["spec"]["url"]
            for r in res.values()
            if r.type == "gpustrata:index:VllmDeployment"
            and r.inputs["description"]["spec"]["service"] == name
        ]
        assert endpoints == [f"http://{name}.{ns}.svc.cluster.local:{port}/v1"]


def test_kubeconfig_names_region() -> None:
    """Finding 13: `aws eks get-token` without --region."""
    from gpustrata.components.cluster import _kubeconfig

    config = json.loads(_kubeconfig("c", "https://x", "", region="eu-west-1", profile="ops"))
    args = config["users"][0]["user"]["exec"]["args"]
    assert args[-4:] == ["--region", "eu-west-1", "--profile", "ops"]


def test_hf_token_reference_without_token_is_a_plan_error() -> None:
    """Finding 10: a Secret nobody creates; the model waited in CreateContainerConfigError."""
    doc = copy.deepcopy(stack_doc("staging"))
    for model in doc["models"]:
        if "hf_token" in model:
            model["hf_token"].pop("existing", None)
    with pytest.raises(StackError) as err:
        run_program(doc, stack="staging")
    text = str(err.value)
    assert "pulumi config set --secret gpustrata:hfToken" in text
    assert "existing: true" in text


def test_read_write_once_cache_for_many_replicas_refused() -> None:
    """Finding 11: a ReadWriteOnce volume for 2 replicas spread by hostname (Multi-Attach)."""
    doc = copy.deepcopy(stack_doc("prod"))
    model = doc["models"][1]
    model["weights"] = {"source": "pvc", "pvc_name": "cache", "cache_size_gib": 100}
    with pytest.raises(StackError, match="Multi-Attach"):
        run_program(doc, stack="prod")


def test_service_monitor_without_monitoring_refused() -> None:
    """Finding 3: ServiceMonitors were created by default with no CRDs installed."""
    doc = copy.deepcopy(stack_doc("dev"))
    doc["models"][0]["service_monitor"] = True
    with pytest.raises(StackError, match=r"monitoring\.mode: install"):
        run_program(doc, stack="dev")


def test_keda_without_keda_refused() -> None:
    """Finding 3: a KEDA ScaledObject with neither KEDA nor Prometheus installed."""
    doc: dict[str, Any] = copy.deepcopy(stack_doc("prod"))
    doc.pop("keda")
    doc.pop("monitoring")
    with pytest.raises(StackError) as err:
        run_program(doc, stack="prod")
    assert "keda.enabled: true" in str(err.value)
    assert "monitoring.mode: install" in str(err.value)


def test_subnet_layout_disjoint() -> None:
    """Private and public blocks of every zone are distinct /20s of a /16."""
    layout = subnet_layout("10.0.0.0/16", 3)
    cidrs = [c for block in layout for c in (block.public_cidr, block.private_cidr)]
    assert len(set(cidrs)) == 6
    assert layout[0].private_cidr == "10.0.0.0/20"
    assert layout[2].public_cidr == "10.0.160.0/20"


def test_s3_policy_reads_only_its_prefix() -> None:
    policy = s3_read_policy("s3://bucket/models/llama/")
    get = policy["Statement"][1]
    assert get["Resource"] == ["arn:aws:s3:::bucket/models/llama/*"]
    assert policy["Statement"][0]["Condition"]["StringLike"]["s3:prefix"] == ["models/llama/*"]
    assert all("Put" not in a for s in policy["Statement"] for a in s["Action"])


def test_single_replica_cache_volume_created_with_its_driver() -> None:
    """Finding 11: a PVC nothing created, and no CSI driver to provision it."""
    doc = copy.deepcopy(stack_doc("dev"))
    doc["models"][0]["weights"] = {
        "source": "pvc",
        "pvc_name": "qwen-cache",
        "cache_size_gib": 50,
    }
    res = {r.name: r for r in run_program(doc, stack="dev")}
    claims = [r for r in res.values() if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert len(claims) == 1
    claim = claims[0].inputs
    assert claim["metadata"]["name"] == "qwen-cache"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    addon = next(
        r
        for r in res.values()
        if r.type == "aws:eks/addon:Addon" and r.inputs["addonName"] == "aws-ebs-csi-driver"
    )
    assert addon.inputs["podIdentityAssociations"][0]["serviceAccount"] == "ebs-csi-controller-sa"
    assert addon.name in closure(res, claims[0].name)
    classes = [r for r in res.values() if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    assert classes and classes[0].inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert claim["spec"]["storageClassName"] == classes[0].inputs["metadata"]["name"]
    deployment = next(r for r in res.values() if r.type == "kubernetes:apps/v1:Deployment")
    assert claims[0].name in closure(res, deployment.name)


def test_plan_reports_the_vcpu_quotas_each_stack_needs() -> None:
    """Finding 5: p5.48xlarge on demand with min 1 is far above a new account's P quota,
    and nothing said so before `up` failed."""
    from gpustrata.planning.build import build_plan

    derived = {d.key: d for d in build_plan(stack_doc("prod")).derived}
    p = derived["quotas.L-417A185B"]
    assert p.value == "192..576 vCPU"
    assert "--quota-code L-417A185B --desired-value 576 --region us-west-2" in p.why
    standard = derived["quotas.L-1216C47A"]
    assert standard.value == "12..16 vCPU" and "m7i.xlarge" in standard.why
    dev = {d.key: d for d in build_plan(stack_doc("dev")).derived}
    assert dev["quotas.L-3819A6DF"].value == "4..4 vCPU"  # the spot L4 node


def test_dra_pool_nodes_keep_the_operator_validator_off() -> None:
    """Finding 12: on a DRA pool the GPU Operator's validator waited forever for
    nvidia.com/gpu capacity; its deploy label now keeps it (and the device plugin) off."""
    res = {r.name: r for r in run_program(stack_doc("prod"), stack="prod")}
    group = next(
        r
        for r in res.values()
        if r.type == NODE_GROUP and r.inputs.get("nodeGroupName") == "gpu-l40s"
    )
    labels = group.inputs["labels"]
    assert labels["nvidia.com/gpu.deploy.operator-validator"] == "false"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
