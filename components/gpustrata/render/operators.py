"""Pure renderers for the GPU Operator and KubeRay operator Helm values."""

from __future__ import annotations

from typing import Any

from gpustrata.core.contract import API_VERSION
from gpustrata.render.workload_args import TolerationArgs
from gpustrata.spec.cluster import GpuOperatorSpec

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
KUBERAY_REPO = "https://ray-project.github.io/kuberay-helm/"


def gpu_operator_values(
    spec: GpuOperatorSpec, tolerations: list[TolerationArgs], service_monitor: bool = False
) -> dict[str, Any]:
    """Values for the ``gpu-operator`` chart: pinned components, pool taints tolerated.

    Keys follow the chart's ``values.yaml`` (driver, toolkit, devicePlugin,
    dcgmExporter, mig, daemonsets, node-feature-discovery). *tolerations* (the pools'
    taints) apply unless the stack states ``gpu_operator.tolerations``.
    """
    if spec.tolerations is not None:  # stated in the stack: used as given
        tolerations = [
            TolerationArgs(key=t.key, operator=t.operator, value=t.value, effect=t.effect or "")
            for t in spec.tolerations
        ]
    tols = [{k: v for k, v in t.items() if v or k == "operator"} for t in tolerations]
    values: dict[str, Any] = {
        # EKS NVIDIA AMIs ship driver and toolkit; the operator must not install a second.
        "driver": {"enabled": spec.driver_enabled},
        "toolkit": {"enabled": spec.driver_enabled},
        "devicePlugin": {"enabled": True},
        "dcgmExporter": {
            "enabled": True,
            # The DCGM exporter's ServiceMonitor needs the Prometheus Operator CRDs.
            "serviceMonitor": {"enabled": service_monitor},
        },
        # ClusterPolicy mig.strategy accepts none, single, mixed (api/nvidia/v1).
        "mig": {"strategy": spec.mig_strategy},
        "daemonsets": {"tolerations": tols},
        "node-feature-discovery": {"worker": {"tolerations": tols}},
    }
    if spec.driver_enabled and spec.driver_version:
        values["driver"]["version"] = spec.driver_version
    for key, version in (
        ("toolkit", spec.toolkit_version),
        ("devicePlugin", spec.device_plugin_version),
        ("dcgmExporter", spec.dcgm_exporter_version),
    ):
        if version:
            values[key]["version"] = version
    if spec.sharing.strategy != "none":
        values["devicePlugin"]["config"] = {
            "name": "gpustrata-device-plugin-config",
            "default": "shared",
        }
    return values


GPU_OPERATOR_CHART = "gpu-operator"
_VALUE_KEYS = {
    "driver": "driver",
    "toolkit": "toolkit",
    "device_plugin": "devicePlugin",
    "dcgm_exporter": "dcgmExporter",
}


def gpu_operator_description(
    *, namespace: str, chart_version: str, values: dict[str, Any], declared_overrides: list[str]
) -> dict[str, Any]:
    """The ``GpuOperator`` object the rules read for this release (O001..O006).

    ``declared_overrides`` are stack component names (``device_plugin``), written in the
    chart's value keys (``devicePlugin``).
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "GpuOperator",
        "metadata": {"name": GPU_OPERATOR_CHART, "namespace": namespace},
        "spec": {
            "chart": GPU_OPERATOR_CHART,
            "version": chart_version,
            "releaseName": GPU_OPERATOR_CHART,
            "values": values,
            "declaredOverrides": [_VALUE_KEYS.get(c, c) for c in declared_overrides],
        },
    }


def device_plugin_sharing_config(spec: GpuOperatorSpec) -> dict[str, Any] | None:
    """The device-plugin config (time-slicing or MPS) the operator mounts, if sharing is on."""
    if spec.sharing.strategy == "none":
        return None
    key = "timeSlicing" if spec.sharing.strategy == "time-slicing" else "mps"
    config = {
        "version": "v1",
        "sharing": {
            key: {"resources": [{"name": "nvidia.com/gpu", "replicas": spec.sharing.replicas}]}
        },
    }
    return config


KUBERAY_IMAGE = "quay.io/kuberay/operator"


def kuberay_values(chart_version: str | None = None) -> dict[str, Any]:
    """Values for the ``kuberay-operator`` chart: the operator image pinned to the chart's
    release (the chart ships its CRDs in ``crds/``, which Helm installs first). Without a
    version the chart's own image tag (its release) is kept.

    Keys follow the chart's ``values.yaml`` (kuberay helm-chart/kuberay-operator@v1.7.0).
    """
    if not chart_version:
        return {}
    tag = chart_version if chart_version.startswith("v") else f"v{chart_version}"
    return {"image": {"repository": KUBERAY_IMAGE, "tag": tag}}
