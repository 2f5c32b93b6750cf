"""Helm values files read as objects: which chart a kindless document is the values of
(the GPU Operator's or the device plugin's, by their top-level keys) and the ``HelmValues``
object the view reads for it (``check --values CHART=FILE`` or found in a folder)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path as FsPath
from typing import Any

from gpustrata.core.contract import API_VERSION
from gpustrata_policies.view.objects import K8sObject

__all__ = ["VALUES_CHARTS", "VALUES_KIND", "values_chart", "values_object"]

Path = tuple[str | int, ...]
"""A path into a document, as the loader's line tables key it."""

VALUES_CHARTS = ("gpu-operator", "nvidia-device-plugin")
"""Charts whose Helm values file ``check`` reads (``--values CHART=FILE``)."""
VALUES_KIND = "HelmValues"
"""Kind of the object a values file becomes: ``spec.chart`` and ``spec.values``."""

# Top-level keys of NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (v26.7.0):
# a kindless document with two of them, one specific to the chart, is its values file.
_OPERATOR_KEYS = frozenset(
    {
        "driver",
        "toolkit",
        "devicePlugin",
        "dcgm",
        "dcgmExporter",
        "gfd",
        "mig",
        "migManager",
        "nfd",
        "node-feature-discovery",
        "operator",
        "validator",
        "daemonsets",
        "vgpuManager",
        "sandboxWorkloads",
        "ccManager",
    }
)
_OPERATOR_ONLY_KEYS = frozenset(
    {
        "toolkit",
        "devicePlugin",
        "dcgmExporter",
        "gfd",
        "migManager",
        "node-feature-discovery",
        "vgpuManager",
        "sandboxWorkloads",
        "ccManager",
    }
)


# Top-level keys only NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/
# values.yaml has (1b826acc): with its `config` key, a kindless document is its values file.
_DEVICE_PLUGIN_KEYS = frozenset(
    {
        "migStrategy",
        "failOnInitError",
        "deviceListStrategy",
        "deviceIDStrategy",
        "nvidiaDriverRoot",
        "compatWithCPUManager",
        "deviceDiscoveryStrategy",
    }
)


def values_chart(data: Mapping[str, Any], name: str) -> str | None:
    """The chart a kindless document is the values of (by its keys, or one key and a
    path naming the chart), else ``None``."""
    plugin = {k for k in data if isinstance(k, str)} & _DEVICE_PLUGIN_KEYS
    if data.get("version") == "v1" and isinstance(data.get("sharing"), Mapping):
        return "nvidia-device-plugin"  # the plugin's own config file (its README's grammar)
    if isinstance(data.get("config"), Mapping) and (
        plugin or "device-plugin" in name.replace("\\", "/").lower()
    ):
        return "nvidia-device-plugin"
    keys = {k for k in data if isinstance(k, str)} & _OPERATOR_KEYS
    if len(keys) >= 2 and keys & _OPERATOR_ONLY_KEYS:
        return "gpu-operator"
    if keys and "gpu-operator" in name.replace("\\", "/").lower():
        return "gpu-operator"
    return None


def values_object(
    data: Mapping[str, Any],
    chart: str,
    name: str,
    line: int | None,
    lines: Mapping[Path, int] | None,
) -> K8sObject:
    """A values file as the object the view reads: ``spec.values`` is the file."""
    stem = FsPath(name).name or name
    raw = {
        "apiVersion": API_VERSION,
        "kind": VALUES_KIND,
        "metadata": {"name": stem},
        "spec": {"chart": chart, "values": data},
    }
    moved = {("spec", "values", *p): v for p, v in (lines or {}).items()}
    return K8sObject(raw, name, line, moved)
