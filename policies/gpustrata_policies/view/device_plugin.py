"""GPU sharing as the NVIDIA device plugin configures it, whatever the object that carries
its configuration.

One grammar, the device plugin's config file (``version: v1``, ``flags``, ``sharing``;
NVIDIA/k8s-device-plugin@1b826acc README.md "Shared Access to GPUs", api/config/v1)::

    version: v1
    sharing:
      timeSlicing:                 # or mps:
        renameByDefault: false     # true: advertised as nvidia.com/gpu.shared
        failRequestsGreaterThanOne: false
        resources: [{name: nvidia.com/gpu, replicas: 4}]

read by :func:`parse_config`, is found in three carriers, one reader each:

* a ``ConfigMap`` whose data values are such files (:func:`config_map_configs`);
* the ``nvidia-device-plugin`` chart's values, ``config.map`` (name -> file) with
  ``config.default`` naming the default (:func:`chart_values_configs`); a kindless config
  file itself is read by the input reader as values of that chart;
* the GPU Operator's ``devicePlugin.config`` (``name`` of a ConfigMap, ``default`` key, or
  ``create: true`` with ``data``): resolved by :func:`cluster_sharing`.

Each GPU advertised under a shared resource counts ``replicas`` times in the node's
allocatable ``nvidia.com/gpu`` (renameByDefault false) and a container asking for more
than one replica gets the same GPUs, not more: with ``failRequestsGreaterThanOne`` (the
default under MPS, api/config/v1/config.go) the plugin fails such a Pod with
``UnexpectedAdmissionError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from gpustrata.core.yamlio import safe_load
from gpustrata_policies.view.helm_values import values_flag
from gpustrata_policies.view.objects import K8sObject, as_map, dig

if TYPE_CHECKING:
    from gpustrata_policies.view.gpu_operator import GpuOperatorView

__all__ = [
    "DEVICE_PLUGIN_CHART",
    "SHARING_DOCS",
    "Sharing",
    "chart_values_configs",
    "cluster_sharing",
    "config_map_configs",
    "parse_config",
]

DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
SHARING_DOCS = "https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus"
_STRATEGIES = (("timeSlicing", "time-slicing"), ("mps", "mps"))


@dataclass(frozen=True, slots=True)
class Sharing:
    """One device-plugin sharing configuration for ``nvidia.com/gpu``."""

    strategy: str
    """``time-slicing`` or ``mps``."""
    replicas: int
    """Shared accesses per physical GPU."""
    resource: str
    """What Pods request the shared GPU as: ``nvidia.com/gpu``, or ``nvidia.com/gpu.shared``
    under ``renameByDefault`` (or the resource's own ``rename``)."""
    fail_requests_greater_than_one: bool
    where: str
    """``time-slicing x4 in ConfigMap/kube-system/dp-config:any``."""


def parse_config(data: Any, where: str) -> Sharing | None:
    """The ``nvidia.com/gpu`` sharing of one device-plugin config file (mapping or YAML
    text), or ``None`` when it shares nothing (or is not such a file)."""
    if isinstance(data, str):
        if "sharing" not in data and "\\" not in data:
            return None  # no `sharing` key, not even one spelled with escapes
        try:
            data = safe_load(data)
        except yaml.YAMLError:
            return None
    if not isinstance(data, Mapping):
        return None
    for key, strategy in _STRATEGIES:
        section = dig(data, "sharing", key)
        if not isinstance(section, Mapping):
            continue
        resources = section.get("resources")
        for res in resources if isinstance(resources, list) else []:
            if not isinstance(res, Mapping) or res.get("name") != "nvidia.com/gpu":
                continue
            replicas = res.get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
                continue
            rename = res.get("rename")
            if isinstance(rename, str) and rename:
                resource = rename
            elif values_flag(section.get("renameByDefault"), False):
                resource = "nvidia.com/gpu.shared"
            else:
                resource = "nvidia.com/gpu"
            return Sharing(
                strategy,
                replicas,
                resource,
                values_flag(section.get("failRequestsGreaterThanOne"), strategy == "mps"),
                f"{strategy} x{replicas} in {where}",
            )
    return None


def config_map_configs(obj: K8sObject) -> dict[str, Sharing]:
    """A ConfigMap's data keys that are sharing device-plugin configs."""
    if obj.kind != "ConfigMap":
        return {}
    data = obj.raw.get("data")
    if not isinstance(data, Mapping):
        return {}
    out: dict[str, Sharing] = {}
    for key, text in data.items():
        found = parse_config(text, f"{obj.resource}:{key}") if isinstance(text, str) else None
        if found is not None:
            out[str(key)] = found
    return out


def _default_of(names: Iterable[str], default: Any) -> str | None:
    """The config the plugin applies to unlabelled nodes (README: ``config.default``, else
    a config named ``default``, else the only one)."""
    names = list(names)
    if isinstance(default, str) and default:
        return default
    if "default" in names:
        return "default"
    return names[0] if len(names) == 1 else None


def chart_values_configs(values: Mapping[str, Any], where: str) -> Sharing | None:
    """The default sharing config of ``nvidia-device-plugin`` chart values (``config.map``
    with ``config.default``)."""
    config = as_map(values.get("config"), "config")
    files = config.get("map")
    if not isinstance(files, Mapping):
        return None
    name = _default_of([str(k) for k in files], config.get("default"))
    if name is None or name not in files:
        return None
    return parse_config(files[name], f"{where} config.map.{name}")


def _operator_config(
    objects: list[K8sObject], values: Mapping[str, Any], label: str
) -> Sharing | None:
    """The GPU Operator's ``devicePlugin.config``: its own ``data`` (``create: true``) or
    the ConfigMap it names, at its ``default`` key."""
    config = dig(values, "devicePlugin", "config")
    if not isinstance(config, Mapping):
        return None
    default = config.get("default")
    data = config.get("data")
    if values_flag(config.get("create"), False) and isinstance(data, Mapping):
        name = _default_of([str(k) for k in data], default)
        if name in data:
            return parse_config(data[name], f"{label} devicePlugin.config.data.{name}")
    wanted = config.get("name")
    for obj in objects:
        if obj.kind == "ConfigMap" and obj.name == wanted:
            found = _default_config(obj, default)
            if found is not None:
                return found
    return None


def _default_config(obj: K8sObject, default: Any) -> Sharing | None:
    """The sharing config of ConfigMap *obj* at the key the plugin applies to unlabelled
    nodes (*default*, else ``default``, else the only key); None when there is none."""
    configs = config_map_configs(obj)
    raw = obj.raw.get("data")
    name = _default_of([str(k) for k in raw] if isinstance(raw, Mapping) else [], default)
    return configs.get(name) if name is not None else None


def cluster_sharing(
    objects: Iterable[K8sObject], operators: Sequence[GpuOperatorView] | None = None
) -> Sharing | None:
    """The cluster-wide sharing of ``nvidia.com/gpu`` the input states: the GPU Operator's
    device-plugin config, the device plugin chart's values, else any ConfigMap holding a
    sharing config (how ``kubectl get cm -A -o yaml`` shows a plugin's config).
    *operators* are the GPU Operator installations among *objects* where the caller has
    them (:func:`~gpustrata_policies.view.nodes.operators`), else they are found here."""
    from gpustrata_policies.view.gpu_operator import operators_of

    objects = list(objects)
    if operators is None:
        operators = operators_of(objects)
    for op in operators:
        found = _operator_config(objects, op.values, f"{op.label} ({op.obj.resource})")
        if found is not None:
            return found
    for obj in objects:
        values = _device_plugin_values(obj)
        if values is not None:
            found = chart_values_configs(values, obj.resource)
            if found is None and "sharing" in values:  # a config file given as values
                found = parse_config(values, obj.resource)
            if found is not None:
                return found
    # A ConfigMap an operator or chart names was judged above at its default key; any other
    # counts only at the key the plugin would apply to unlabelled nodes (per-node-label keys
    # such as `a100-40gb` share only the nodes labelled for them).
    named = {str(dig(op.values, "devicePlugin", "config", "name")) for op in operators}
    for obj in objects:
        if obj.kind != "ConfigMap" or obj.name in named:
            continue  # only a ConfigMap holds a config (config_map_configs)
        found = _default_config(obj, None)
        if found is not None:
            return found
    return None


def _device_plugin_values(obj: K8sObject) -> Mapping[str, Any] | None:
    """Values of the device plugin chart: a values file (``HelmValues``) or a Helm release
    (Pulumi, Flux) of the chart."""
    if obj.kind not in {"HelmValues", "HelmRelease"}:
        return None
    spec = obj.raw.get("spec")
    if not isinstance(spec, Mapping):
        return None
    chart = spec.get("chart")
    if isinstance(chart, Mapping):  # Flux: spec.chart.spec.chart
        chart = dig(chart, "spec", "chart")
    if not isinstance(chart, str):
        return None
    if chart.rstrip("/").rsplit("/", 1)[-1] != DEVICE_PLUGIN_CHART:
        return None
    values = spec.get("values")
    return values if isinstance(values, Mapping) else None
