"""Pure renderers for the GPU Operator and KubeRay operator Helm values."""

from __future__ import annotations

from typing import Any

from gpustrata.render.args import TolerationArgs
from gpustrata.spec.models import GpuOperatorSpec

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
KUBERAY_REPO = "https://ray-project.github.io/kuberay-helm/"


def gpu_operator_values(spec: GpuOperatorSpec, tolerations: list[TolerationArgs]) -> dict[str, Any]:
    """Values for the ``gpu-operator`` chart: pinned components, pool taints tolerated.

    Keys follow the chart's ``values.yaml`` (driver, toolkit, devicePlugin,
    dcgmExporter, mig, daemonsets, node-feature-discovery).
    """
    tols = [{k: v for k, v in t.items() if v or k == "operator"} for t in tolerations]
    values: dict[str, Any] = {
        # EKS NVIDIA AMIs ship driver and toolkit; the operator must not install a second.
        "driver": {"enabled": spec.driver_enabled},
        "toolkit": {"enabled": spec.driver_enabled},
        "devicePlugin": {"enabled": True},
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": {"enabled": spec.service_monitor},
        },
        "mig": {"strategy": "single" if spec.mig_strategy == "none" else spec.mig_strategy},
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


def kuberay_values() -> dict[str, Any]:
    """Values for the ``kuberay-operator`` chart (defaults are fine; CRDs come with it)."""
    return {"crds": {"install": True}}
