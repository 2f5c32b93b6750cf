"""Tests for the chart catalogue (gpustrata.catalog.charts): every entry loads and cites its
sources, and placement follows the recorded chart defaults and values keys."""

from __future__ import annotations

import re

import pytest

from gpustrata.catalog.charts import (
    ChartPod,
    ChartRelease,
    chart_release,
    chart_releases,
    crd_owner,
    dra_node_labels,
    placement_values,
    pod_placement,
    prometheus_url,
)

CITE = re.compile(r"^[\w.-]+/[\w.-]+@[\w.+-]+:[\w./+-]+$")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
SYSTEM = {"gpustrata.io/pool": "system"}


def _tolerates(tolerations: tuple[object, ...], taint: dict[str, str]) -> bool:
    for tol in tolerations:
        assert isinstance(tol, dict)
        if tol.get("effect") not in (None, "", taint["effect"]):
            continue
        if tol.get("operator") == "Exists" and tol.get("key") in (None, taint["key"]):
            return True
        if tol.get("key") == taint["key"] and tol.get("value", "") == taint["value"]:
            return True
    return False


def _pod(release: ChartRelease, component: str) -> ChartPod:
    return next(p for p in release.pods if p.component == component)


def _release(chart: str, version: str) -> ChartRelease:
    found = chart_release(chart, version)
    assert found is not None, f"{chart} {version} not catalogued"
    return found


def test_pinned_charts_are_catalogued() -> None:
    for chart, version in [
        ("gpu-operator", "v26.7.0"),
        ("kuberay-operator", "1.7.0"),
        ("karpenter", "1.14.1"),
        ("nvidia-dra-driver-gpu", "25.12.0"),
        ("keda", "2.20.2"),
        ("kube-prometheus-stack", "88.5.3"),
    ]:
        _release(chart, version)


@pytest.mark.parametrize("release", chart_releases(), ids=lambda r: f"{r.chart}-{r.version}")
def test_every_entry_is_cited_and_well_formed(release: ChartRelease) -> None:
    assert release.kind in {"helm", "eks-addon"}
    assert release.sources and all(CITE.match(s) for s in release.sources), release.sources
    assert release.pods or release.crds  # a CRD-only chart (Istio's base) runs no Pod
    for crd in release.crds:
        group, _, kind = crd.rpartition("/")
        assert "." in group and kind[:1].isupper(), crd
    for pod in release.pods:
        assert pod.workload in {"Deployment", "StatefulSet", "DaemonSet", "Job"}
        assert pod.sources and all(CITE.match(s) for s in pod.sources), pod.component
        if pod.workload != "DaemonSet":  # every controller can be pinned through a key
            assert pod.values_node_selector or pod.values_affinity, pod.component
        if pod.workload == "Deployment":
            assert pod.replicas is not None and pod.replicas >= 1
        if pod.workload == "DaemonSet":
            assert not pod.awaited
        for term in pod.required_affinity:
            assert term.get("matchExpressions"), pod.component


def test_gpu_operator_controllers_do_not_tolerate_the_gpu_taint() -> None:
    release = _release("gpu-operator", "26.7.0")
    for name in ("gpu-operator", "nfd-master", "nfd-gc"):
        placed = pod_placement(_pod(release, name), {})
        assert placed.enabled
        assert not _tolerates(placed.tolerations, GPU_TAINT), name
    worker = pod_placement(_pod(release, "nfd-worker"), {})
    assert _tolerates(worker.tolerations, GPU_TAINT)
    assert _pod(release, "gpu-operator").node_selector == {"kubernetes.io/os": "linux"}


def test_nfd_pods_follow_the_subchart_condition_and_their_own_switch() -> None:
    master = _pod(_release("gpu-operator", "v26.7.0"), "nfd-master")
    assert not pod_placement(master, {"nfd": {"enabled": False}}).enabled
    off = {"node-feature-discovery": {"master": {"enable": False}}}
    assert not pod_placement(master, off).enabled
    assert pod_placement(master, {"nfd": {"enabled": True}}).enabled


def test_kuberay_operator_lands_where_its_node_selector_says() -> None:
    pod = _release("kuberay-operator", "1.7.0").pods[0]
    assert pod.tolerations == () and dict(pod.node_selector) == {}
    placed = pod_placement(pod, {"nodeSelector": SYSTEM})
    assert dict(placed.node_selector) == SYSTEM
    assert not _tolerates(placed.tolerations, GPU_TAINT)
    tolerated = pod_placement(
        pod, {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    )
    assert _tolerates(tolerated.tolerations, GPU_TAINT)


def test_karpenter_spreads_two_replicas_and_keeps_its_guard() -> None:
    pod = _release("karpenter", "1.14.1").pods[0]
    assert pod.replicas == 2
    assert pod.anti_affinity == ({"topologyKey": "kubernetes.io/hostname"},)
    assert pod.spread[0]["whenUnsatisfiable"] == "DoNotSchedule"
    expr = pod.required_affinity[0]["matchExpressions"][0]
    assert (expr["key"], expr["operator"]) == ("karpenter.sh/nodepool", "DoesNotExist")
    values = placement_values(_release("karpenter", "1.14.1"), SYSTEM, ())
    assert values == {"nodeSelector": SYSTEM}
    placed = pod_placement(pod, {**values, "replicas": 1})
    # Helm merges maps: the chart's kubernetes.io/os selector stays next to ours.
    assert dict(placed.node_selector) == {"kubernetes.io/os": "linux", **SYSTEM}
    assert placed.required_affinity == pod.required_affinity
    assert placed.replicas == 1
    # Setting only podAntiAffinity keeps the default node affinity (maps merge).
    anti_off = pod_placement(pod, {"affinity": {"podAntiAffinity": None}})
    assert anti_off.anti_affinity == () and anti_off.required_affinity == pod.required_affinity


def test_dra_controller_is_moved_off_control_plane_nodes_when_pinned() -> None:
    release = _release("nvidia-dra-driver-gpu", "25.12.0")
    controller = _pod(release, "compute-domain-controller")
    keys = [e["key"] for t in controller.required_affinity for e in t["matchExpressions"]]
    assert keys == ["node-role.kubernetes.io/control-plane"]
    placed = pod_placement(controller, placement_values(release, SYSTEM, ()))
    exprs = [e for t in placed.required_affinity for e in t["matchExpressions"]]
    assert exprs == [{"key": "gpustrata.io/pool", "operator": "In", "values": ["system"]}]
    assert dict(placed.node_selector) == SYSTEM
    # The kubelet plugin is a node agent: pinning controllers leaves it alone.
    assert "kubeletPlugin" not in placement_values(release, SYSTEM, ())


def test_placement_values_pin_every_controller_and_no_daemonset() -> None:
    toleration = {"key": "CriticalAddonsOnly", "operator": "Exists"}
    for release in chart_releases():
        values = placement_values(release, SYSTEM, [toleration])
        for pod in release.pods:
            placed = pod_placement(pod, values)
            if pod.workload == "DaemonSet":
                assert not SYSTEM.items() <= dict(placed.node_selector).items(), pod.component
                continue
            if pod.values_node_selector:
                assert SYSTEM.items() <= dict(placed.node_selector).items(), pod.component
            else:  # no nodeSelector key (GAIE's picker): a required node affinity pins it
                exprs = [e for t in placed.required_affinity for e in t["matchExpressions"]]
                assert exprs == [
                    {"key": k, "operator": "In", "values": [v]} for k, v in SYSTEM.items()
                ], pod.component
            if pod.values_tolerations:
                assert list(placed.tolerations) == [toleration], pod.component
        # Without tolerations the chart defaults stay.
        for pod in release.pods:
            plain = pod_placement(pod, placement_values(release, SYSTEM, ()))
            assert plain.tolerations == pod.tolerations


def test_keda_global_keys_are_the_fallback() -> None:
    operator = _pod(_release("keda", "2.20.2"), "keda-operator")
    assert dict(pod_placement(operator, {"nodeSelector": {"a": "b"}}).node_selector) == {
        "kubernetes.io/os": "linux",
        "a": "b",
    }
    both = {"nodeSelector": {"a": "b"}, "operator": {"nodeSelector": {"c": "d"}}}
    assert dict(pod_placement(operator, both).node_selector) == {
        "kubernetes.io/os": "linux",
        "c": "d",
    }


def test_crd_owner_and_switches() -> None:
    assert [r.chart for r in crd_owner("ray.io/RayService")] == ["kuberay-operator"]
    assert [r.chart for r in crd_owner("keda.sh/ScaledObject")] == ["keda"]
    owners = {r.chart for r in crd_owner("monitoring.coreos.com/ServiceMonitor")}
    assert owners == {"kube-prometheus-stack"}
    assert {r.chart for r in crd_owner("karpenter.sh/NodePool")} == {"karpenter"}
    assert {r.chart for r in crd_owner("resource.nvidia.com/ComputeDomain")} == {
        "gpu-operator",
        "nvidia-dra-driver-gpu",
        "dra-driver-nvidia-gpu",
    }
    assert crd_owner("example.com/Nothing") == []
    assert _release("keda", "2.20.2").crds_value == "crds.install"
    assert _release("kube-prometheus-stack", "88.5.3").crds_value == "crds.enabled"
    assert _release("gpu-operator", "v26.7.0").crds_when["nfd.k8s-sigs.io/NodeFeature"] == (
        "nfd.enabled"
    )


def test_kube_prometheus_stack_pre_install_hook_must_schedule() -> None:
    release = _release("kube-prometheus-stack", "88.5.3")
    create = _pod(release, "admission-create")
    assert create.hook is not None and "pre-install" in create.hook
    assert pod_placement(create, {}).enabled
    off = {"prometheusOperator": {"admissionWebhooks": {"enabled": False}}}
    assert not pod_placement(create, off).enabled
    grafana = _pod(release, "grafana")
    assert grafana.values_enabled == "grafana.enabled"
    assert not pod_placement(grafana, {"grafana": {"enabled": False}}).enabled


def test_prometheus_url_follows_the_chart_fullname() -> None:
    assert prometheus_url("monitoring", "monitoring") == (
        "http://monitoring-kube-prometheus-prometheus.monitoring.svc:9090"
    )
    assert prometheus_url("kube-prometheus-stack", "obs") == (
        "http://kube-prometheus-stack-prometheus.obs.svc:9090"
    )
    assert prometheus_url("x", "y", "0.0.1") is None
    facts = _release("kube-prometheus-stack", "88.5.3").facts["prometheus"]
    key = "prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues"
    assert facts["select_all_service_monitors"] == {key: False}


def test_dra_node_labels_stop_the_validator() -> None:
    labels = dra_node_labels("v26.7.0")
    assert labels["nvidia.com/gpu.deploy.operator-validator"] == "false"
    assert dra_node_labels("1.0.0") == {}


def test_unknown_release_is_none() -> None:
    assert chart_release("gpu-operator", "v0.0.1") is None
    assert chart_release("no-such-chart", "1.0.0") is None


def test_coredns_addon_tolerates_no_gpu_taint() -> None:
    # EKS user guide: two replicas; tolerations CriticalAddonsOnly and the control plane only.
    release = _release("coredns", "1.34")
    assert release.kind == "eks-addon"
    coredns = _pod(release, "coredns")
    default = pod_placement(coredns, {})
    assert default.replicas == 2
    assert not _tolerates(default.tolerations, GPU_TAINT)
    critical = {"key": "CriticalAddonsOnly", "value": "", "effect": "NoSchedule"}
    assert _tolerates(default.tolerations, critical)
    assert default.node_selector == {}
    # The schema's default affinity only asks for a Linux amd64/arm64 node.
    exprs = {e["key"]: e["values"] for e in default.required_affinity[0]["matchExpressions"]}
    assert exprs == {"kubernetes.io/os": ["linux"], "kubernetes.io/arch": ["amd64", "arm64"]}
    # configurationValues: replicaCount and tolerations replace the defaults.
    gpu_tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    placed = pod_placement(coredns, {"replicaCount": 3, "tolerations": [gpu_tol]})
    assert placed.replicas == 3 and _tolerates(placed.tolerations, GPU_TAINT)
    # configurationValues keys, flat: {"nodeSelector": ..., "tolerations": [...]}.
    assert placement_values(release, SYSTEM, ()) == {"nodeSelector": SYSTEM}
    assert placement_values(release, SYSTEM, [gpu_tol]) == {
        "nodeSelector": SYSTEM,
        "tolerations": [gpu_tol],
    }


def test_gpu_operator_uninstall_waits_for_its_gpucluster_cleanup_job() -> None:
    release = _release("gpu-operator", "v26.7.0")
    cleanup = _pod(release, "gpu-operator-cleanup-gpucluster")
    assert cleanup.workload == "Job" and cleanup.hook == "pre-delete" and cleanup.awaited
    # Unconditional in the chart: no values switch, on whatever operator.cleanupCRD says.
    assert pod_placement(cleanup, {"operator": {"cleanupCRD": False}}).enabled
    assert not _tolerates(pod_placement(cleanup, {}).tolerations, GPU_TAINT)
    # It shares the operator's keys, so pinning the operator pins it too.
    values = placement_values(release, SYSTEM, ())
    assert pod_placement(cleanup, values).node_selector == {"kubernetes.io/os": "linux", **SYSTEM}


def test_daemonset_addons_have_no_controller_to_place() -> None:
    for name in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent"):
        release = _release(name, "1.34")
        assert release.kind == "eks-addon"
        assert [p.workload for p in release.pods] == ["DaemonSet"]
        assert not release.pods[0].awaited
        assert placement_values(release, SYSTEM, ()) == {}


def test_placement_values_exact_nested_shapes() -> None:
    # The dicts the renderer merges into the releases' values, key for key.
    kuberay = _release("kuberay-operator", "1.7.0")
    assert placement_values(kuberay, SYSTEM, ()) == {"nodeSelector": SYSTEM}
    gpu_operator = placement_values(_release("gpu-operator", "v26.7.0"), SYSTEM, ())
    assert gpu_operator == {
        "operator": {"nodeSelector": SYSTEM},
        "node-feature-discovery": {
            "master": {"nodeSelector": SYSTEM},
            "gc": {"nodeSelector": SYSTEM},
        },
    }
