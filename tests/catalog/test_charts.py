"""The chart catalogue: cited facts, values applied as Helm would, controllers pinned."""

from __future__ import annotations

from gpustrata.catalog.charts import (
    chart_release,
    chart_releases,
    crd_owner,
    placement_values,
    pod_placement,
)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
SYSTEM = {"gpustrata.io/pool": "system"}


def test_every_entry_cites_its_sources() -> None:
    for release in chart_releases():
        assert release.sources, release.chart
        for pod in release.pods:
            assert pod.sources or release.sources, (release.chart, pod.component)


def test_gpu_operator_controller_tolerates_only_the_control_plane() -> None:
    release = chart_release("gpu-operator", "26.7.0")  # a leading v is optional
    assert release is not None
    operator = next(p for p in release.pods if p.component == "gpu-operator")
    keys = {t["key"] for t in pod_placement(operator, {}).tolerations}
    assert keys == {"node-role.kubernetes.io/control-plane"}
    assert GPU_TAINT["key"] not in keys


def test_placement_values_pin_controllers_not_daemonsets() -> None:
    release = chart_release("gpu-operator", "v26.7.0")
    assert release is not None
    values = placement_values(release, SYSTEM, ())
    assert values["operator"]["nodeSelector"] == SYSTEM
    nfd = values["node-feature-discovery"]
    assert nfd["master"]["nodeSelector"] == SYSTEM and nfd["gc"]["nodeSelector"] == SYSTEM
    assert "worker" not in nfd  # the NFD worker DaemonSet runs on the GPU nodes
    kuberay = chart_release("kuberay-operator", "1.7.0")
    assert kuberay is not None
    assert placement_values(kuberay, SYSTEM, ()) == {"nodeSelector": SYSTEM}


def test_values_replace_defaults_and_switch_pods_off() -> None:
    release = chart_release("karpenter", "1.14.1")
    assert release is not None
    pod = release.pods[0]
    default = pod_placement(pod, {})
    assert default.node_selector == {"kubernetes.io/os": "linux"}
    assert default.required_affinity  # never on the nodes it launches
    placed = pod_placement(pod, {"nodeSelector": SYSTEM, "tolerations": []})
    assert placed.node_selector == {"kubernetes.io/os": "linux", **SYSTEM}
    assert placed.tolerations == ()
    dra = chart_release("nvidia-dra-driver-gpu", "25.12.0")
    assert dra is not None
    controller = dra.pods[0]
    assert pod_placement(controller, {}).enabled
    off = {"resources": {"computeDomains": {"enabled": False}}}
    assert not pod_placement(controller, off).enabled


def test_crd_owner() -> None:
    assert [r.chart for r in crd_owner("ray.io/RayService")] == ["kuberay-operator"]
    assert [r.chart for r in crd_owner("monitoring.coreos.com/ServiceMonitor")] == [
        "kube-prometheus-stack"
    ]
    assert crd_owner("example.com/Nothing") == []
    assert chart_release("kuberay-operator", "0.0.1") is None
