"""The deploy rehearsal (issue 29): on the stacks as they were before the cluster
foundation (tests/fixtures/rehearsal/before-*.json: what gpustrata 59537ef registered for
stacks/Pulumi.{dev,staging,prod}.yaml under Pulumi's mocks) it names the blockers of the
deploy review with their fix; on today's stacks it finds none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _stacks import STACKS, stack_doc

from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.inputs.pulumi import objects_from_pulumi
from gpustrata_policies.rehearsal import Rehearsal, Step, rehearse
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool, pools_of
from gpustrata_policies.view.scheduling import crds_installed, landing, pods_that_must_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rehearsal"


def _before(env: str) -> Rehearsal:
    data = json.loads((FIXTURES / f"before-{env}.json").read_text(encoding="utf-8"))
    records = [
        Registered(
            type=r["type"],
            name=r["name"],
            parent=r["parent"],
            custom=True,
            inputs=r["inputs"],
            depends_on=tuple(r["depends_on"]),
        )
        for r in data["resources"]
    ]
    return rehearse(records)


def _step(rehearsal: Rehearsal, resource: str) -> Step:
    found = [s for s in rehearsal.steps if s.resource == resource]
    assert found, f"no step for {resource}: {[s.resource for s in rehearsal.steps]}"
    return found[0]


def test_blocker_1_controllers_without_a_node() -> None:
    """The GPU Operator's controller tolerates only the control plane; every pool carried
    the GPU taint: its release waits 15 minutes and fails."""
    step = _step(_before("dev"), "gpustrata-gpu-operator-release")
    assert step.status == "would-hang"
    assert "taint nvidia.com/gpu=true:NoSchedule not tolerated" in step.message
    assert "gpu-operator" in step.message
    assert "nfd-master" in step.message  # every controller Pod that has no node is named
    assert "cleanup" not in step.message  # a pre-delete hook does not run at install
    assert "untainted node group" in step.fix
    assert "operator.nodeSelector" in step.fix


def test_blocker_1_coredns_without_a_node() -> None:
    """EKS installs CoreDNS itself when the stack does not manage it as an add-on; nothing
    awaits it, so `up` goes on with no DNS: the cluster step says so."""
    for env in ("dev", "staging", "prod"):
        step = _step(_before(env), "gpustrata-cluster-eks")
        assert step.status == "serves-nothing"
        assert step.message.startswith("CoreDNS, which EKS installs itself, has no node: pool")
        assert "not tolerated" in step.message and "no DNS" in step.message
        assert "untainted system node group" in step.fix


def test_blocker_1_kuberay_operator_without_a_node() -> None:
    step = _step(_before("prod"), "gpustrata-kuberay-release")
    assert step.status == "would-hang"
    assert "kuberay-operator" in step.message and "not tolerated" in step.message


def test_blocker_2_min_zero_pool_never_gets_a_node() -> None:
    step = _step(_before("dev"), "gpustrata-qwen-1-5b-deployment")
    assert step.status == "would-hang"
    assert "pool gpu-l4: min size 0 and nothing scales it up" in step.message
    assert "min_size >= 1" in step.fix


def test_blocker_3_custom_resources_without_their_crd() -> None:
    prod = _before("prod")
    for name, kind in (
        ("gpustrata-llama-8b-servicemonitor", "ServiceMonitor"),
        ("gpustrata-llama-8b-scaledobject", "ScaledObject"),
    ):
        step = _step(prod, name)
        assert step.status == "would-fail"
        assert f"no matches for kind {kind}" in step.message
        assert "install the chart that owns the CRD" in step.fix


def test_blocker_4_release_not_after_the_nodes_it_needs() -> None:
    """Karpenter tolerated the L4 pool's taint, but its release did not depend on that
    node group: its wait started before any node it could use existed."""
    step = _step(_before("staging"), "gpustrata-karpenter-release")
    assert step.status == "would-hang"
    assert "gpu-l4, which is not created before this step" in step.message
    assert step.fix == "make it depend on the node group(s) gpu-l4"


def test_blocker_7_ray_head_serves_nothing() -> None:
    step = _step(_before("prod"), "gpustrata-llama-70b-rayservice")
    assert step.status == "serves-nothing"
    assert "(head group)" in step.message or "head" in step.message
    assert "up` succeeds and the model serves nothing" in step.message


def test_first_blocker_is_reported_in_order() -> None:
    dev = _before("dev")
    first = dev.first_blocker
    assert first is not None
    assert first.index == min(s.index for s in dev.blockers)
    assert dev.as_dict()["first_blocker"]["resource"] == first.resource


@pytest.fixture(scope="module", params=STACKS)
def today(request: pytest.FixtureRequest) -> Rehearsal:
    env = str(request.param)
    return rehearse(run_program(stack_doc(env), stack=env))


def test_todays_stacks_come_up(today: Rehearsal) -> None:
    assert today.blockers == [], "\n".join(today.text())
    assert [s for s in today.steps if s.status == "not-evaluated"] == [], "\n".join(today.text())
    assert any(s.status == "ok" for s in today.steps)


# --- the shared view: where a Pod can land, which CRDs are installed ---------------------


def _pool(name: str, *, taint: bool = False, min_size: int = 1, gpus: int = 0) -> K8sObject:
    spec: dict[str, Any] = {
        "instanceType": "g6.xlarge" if gpus else "m7i.large",
        "labels": {"gpustrata.io/pool": name},
        "minSize": min_size,
        "maxSize": max(min_size, 2),
    }
    if gpus:
        spec |= {"gpuProduct": "NVIDIA-L4", "gpuCount": gpus}
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    return K8sObject(
        {
            "apiVersion": "gpustrata.io/v1alpha1",
            "kind": "GpuNodePool",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def _release(chart: str, version: str, values: dict[str, Any] | None = None) -> K8sObject:
    return K8sObject(
        {
            "apiVersion": "helm.sh/v3",
            "kind": "HelmRelease",
            "metadata": {"name": chart, "namespace": chart},
            "spec": {"chart": chart, "version": version, "values": values or {}},
        }
    )


def _deployment(gpus: int = 0, tolerate: bool = False) -> K8sObject:
    container: dict[str, Any] = {"name": "app", "image": "nginx:1.27"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict[str, Any] = {"containers": [container]}
    if tolerate:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    return K8sObject(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "default"},
            "spec": {"replicas": 1, "template": {"spec": spec}},
        }
    )


def _pools(*objs: K8sObject) -> list[GpuPool]:
    return pools_of(objs)


def test_landing_names_the_taint_and_the_empty_pool() -> None:
    [need], unread = pods_that_must_run([_deployment()])
    assert unread == []
    fits, why = landing(need, _pools(_pool("gpu", taint=True, gpus=1)))
    assert fits == [] and why == ["pool gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated"]
    fits, why = landing(need, _pools(_pool("system", min_size=0)))
    assert fits == [] and why == ["pool system: min size 0 and nothing scales it up"]
    fits, _ = landing(need, _pools(_pool("system", min_size=0)), scale_from_zero=True)
    assert [p.name for p in fits] == ["system"]


def test_a_gpu_pod_lands_only_on_a_gpu_pool() -> None:
    [need], _ = pods_that_must_run([_deployment(gpus=1, tolerate=True)])
    assert need.gpus
    pools = _pools(_pool("system"), _pool("gpu", taint=True, gpus=1))
    fits, why = landing(need, pools)
    assert [p.name for p in fits] == ["gpu"] and why == ["pool system: no GPUs"]


def test_chart_values_place_the_controller() -> None:
    """kuberay-operator 1.7.0 tolerates nothing by default; its nodeSelector value pins it."""
    pools = _pools(_pool("system"), _pool("gpu", taint=True, gpus=1))
    [need], _ = pods_that_must_run([_release("kuberay-operator", "1.7.0")])
    assert need.chart is not None and need.values_path == "nodeSelector"
    assert [p.name for p in landing(need, pools)[0]] == ["system"]
    pinned = _release("kuberay-operator", "1.7.0", {"nodeSelector": {"gpustrata.io/pool": "gpu"}})
    [need], _ = pods_that_must_run([pinned])
    fits, why = landing(need, pools)
    assert fits == [] and "pool system: its labels do not match" in why[0]


def test_an_uncatalogued_chart_is_not_evaluated() -> None:
    needs, unread = pods_that_must_run([_release("kuberay-operator", "0.1.0")])
    assert needs == []
    assert unread == [
        "HelmRelease/kuberay-operator/kuberay-operator: chart kuberay-operator 0.1.0 is not "
        "in the chart catalogue"
    ]


def test_crds_installed_by_charts_and_objects() -> None:
    crd = K8sObject(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
            "spec": {"group": "monitoring.coreos.com", "names": {"kind": "ServiceMonitor"}},
        }
    )
    assert "monitoring.coreos.com/ServiceMonitor" in crds_installed([crd])
    assert "ray.io/RayService" in crds_installed([_release("kuberay-operator", "1.7.0")])
    keda_off = _release("keda", "2.20.2", {"crds": {"install": False}})
    assert "keda.sh/ScaledObject" in crds_installed([_release("keda", "2.20.2")])
    assert "keda.sh/ScaledObject" not in crds_installed([keda_off])


# --- the rehearsal on small programs -------------------------------------------------------


def _rec(type_: str, name: str, inputs: dict[str, Any], *deps: str) -> Registered:
    return Registered(type_, name, None, True, inputs, tuple(deps))


_CLUSTER = _rec("aws:eks/cluster:Cluster", "eks", {"bootstrapSelfManagedAddons": False})


def _group(name: str, *, min_size: int, taint: bool = False) -> Registered:
    inputs: dict[str, Any] = {
        "nodeGroupName": name,
        "instanceTypes": ["m7i.large"],
        "labels": {"gpustrata.io/pool": name},
        "scalingConfig": {"minSize": min_size, "maxSize": 2, "desiredSize": min_size},
    }
    if taint:
        inputs["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    return _rec("aws:eks/nodeGroup:NodeGroup", name, inputs, "eks")


def _helm(name: str, chart: str, version: str, *deps: str) -> Registered:
    return _rec(
        "kubernetes:helm.sh/v3:Release",
        name,
        {"name": chart, "chart": chart, "version": version, "values": {}, "skipAwait": False},
        *deps,
    )


def test_a_release_after_its_nodes_is_ok() -> None:
    records = [
        _CLUSTER,
        _group("system", min_size=2),
        _helm("kuberay", "kuberay-operator", "1.7.0", "system"),
    ]
    out = rehearse(records)
    assert out.blockers == []
    assert _step(out, "kuberay").status == "ok"


def test_a_cluster_autoscaler_scales_a_group_from_zero() -> None:
    records = [_CLUSTER, _group("system", min_size=0)]
    app = _rec("kubernetes:apps/v1:Deployment", "app", dict(_deployment().raw), "system")
    assert _step(rehearse([*records, app]), "app").status == "would-hang"
    autoscaler = _rec(
        "kubernetes:apps/v1:Deployment",
        "cluster-autoscaler",
        {**dict(_deployment().raw), "metadata": {"name": "cluster-autoscaler"}},
    )
    app = _rec(
        "kubernetes:apps/v1:Deployment",
        "app",
        dict(_deployment().raw),
        "system",
        "cluster-autoscaler",
    )
    assert _step(rehearse([*records, autoscaler, app]), "app").status == "ok"


def test_destroy_needs_the_nodepool_to_depend_on_karpenter() -> None:
    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"template": {"spec": {"requirements": []}}},
    }
    records = [
        _CLUSTER,
        _group("system", min_size=2),
        _helm("karpenter", "karpenter", "1.14.1", "system"),
        _rec("kubernetes:karpenter.sh/v1:NodePool", "nodepool", nodepool, "karpenter"),
    ]
    assert rehearse(records).destroy == []
    records[-1] = _rec("kubernetes:karpenter.sh/v1:NodePool", "nodepool", nodepool, "system")
    [step] = rehearse(records).destroy
    assert step.status == "would-fail"
    assert step.fix == "make the NodePool depend on the Karpenter release"


# --- K017 / K018 on the pre-foundation stacks, through the Pulumi adapter ------------------


def _findings(env: str, rule: str) -> list[str]:
    data = json.loads((FIXTURES / f"before-{env}.json").read_text(encoding="utf-8"))
    objects = objects_from_pulumi((r["type"], r["name"], r["inputs"]) for r in data["resources"])
    found = find_rule(rule)
    assert found is not None
    report = evaluate(objects, environment=env, rules=[found])
    return [f"{f.resource}: {f.message}" for f in report.findings]


def test_k017_names_the_controllers_and_the_empty_pool() -> None:
    dev = _findings("dev", "K017")
    assert any(
        m.startswith(
            "HelmRelease/gpu-operator/gpu-operator: HelmRelease gpu-operator: gpu-operator, "
        )
        and "set gpu-operator values operator.nodeSelector" in m
        for m in dev
    )
    assert any("nfd-master" in m for m in dev)
    assert any(m.startswith("Deployment/inference/qwen-1-5b:") and "min size 0" in m for m in dev)
    prod = _findings("prod", "K017")
    assert any(m.startswith("HelmRelease/kuberay/kuberay-operator:") for m in prod)
    assert any(m.startswith("RayService/inference/llama-70b:") and "(head)" in m for m in prod)


def test_k018_names_the_missing_crds() -> None:
    prod = _findings("prod", "K018")
    assert [m.split(":", 1)[0] for m in prod] == [
        "ScaledObject/inference/llama-8b",
        "ServiceMonitor/inference/llama-8b",
    ]
    assert "install KEDA (the keda chart)" in prod[0]


def test_destroy_waits_for_the_gpu_operator_pre_delete_hook() -> None:
    """gpu-operator v26.7.0's cleanup Job is a pre-delete hook `helm uninstall` waits for:
    the release must depend on the nodes it runs on, or destroy may delete them first."""
    records = [
        _CLUSTER,
        _group("system", min_size=2),
        _helm("gpu-operator", "gpu-operator", "v26.7.0"),
    ]
    out = rehearse(records)
    assert _step(out, "gpu-operator").status == "would-hang"  # and at create, too
    [step] = out.destroy
    assert "pre-delete hook" in step.message
    assert step.fix == "make the release depend on the node group(s) system"
    records[-1] = _helm("gpu-operator", "gpu-operator", "v26.7.0", "system")
    assert rehearse(records).destroy == []


def test_karpenter_needs_a_node_per_replica() -> None:
    """karpenter 1.14.1 runs 2 replicas with a required anti-affinity on the hostname:
    a system group of minimum size 1 leaves one Pending and the release's wait fails."""
    records = [
        _CLUSTER,
        _group("system", min_size=1),
        _helm("karpenter", "karpenter", "1.14.1", "system"),
    ]
    step = _step(rehearse(records), "karpenter")
    assert step.status == "would-hang"
    assert "runs 2 replicas, each on its own node" in step.message
    assert step.fix == "give system a minimum size of 2"
    records[1] = _group("system", min_size=2)
    assert _step(rehearse(records), "karpenter").status == "ok"


def test_an_existing_cluster_may_have_the_crd() -> None:
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "m", "namespace": "inference"},
        "spec": {},
    }
    token = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
    created = rehearse([_CLUSTER, _rec(token, "monitor", monitor, "eks")])
    assert _step(created, "monitor").status == "would-fail"
    existing = rehearse([_rec(token, "monitor", monitor)])
    step = _step(existing, "monitor")
    assert step.status == "not-evaluated" and "existing cluster may have it" in step.message
