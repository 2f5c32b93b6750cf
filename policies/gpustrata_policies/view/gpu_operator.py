"""The NVIDIA GPU Operator as rules see it, whatever the manifest that installs it.

Read from these shapes, all normalised to the chart's ``values.yaml`` spelling:

* a Helm release of the ``gpu-operator`` chart: Pulumi's ``kubernetes:helm.sh/v3:Release``
  (``spec.chart``, ``spec.version``, ``spec.values``) or a Flux ``HelmRelease``
  (``spec.chart.spec.chart``/``version``; ``spec.valuesFrom`` ConfigMaps and Secrets
  among the inputs merged under ``spec.values``, :mod:`.helm_values`);
* an Argo CD ``Application`` (``argoproj.io/v1alpha1``) whose ``spec.source`` (or one of
  ``spec.sources``) is the chart: ``targetRevision`` is the release, ``helm.valuesObject``
  or the YAML text of ``helm.values`` the values;
* a values file (``values.yaml``, a document without ``kind``): recognised by its keys or
  given with ``check --values gpu-operator=FILE``; the input reader makes it a
  ``HelmValues`` object with ``spec.chart`` and ``spec.values``;
* the operator's ``ClusterPolicy`` custom resource (``nvidia.com/v1``), whose ``spec``
  uses the same keys; its release comes from the ``helm.sh/chart`` label the chart sets;
* the ``NVIDIADriver`` CR (``nvidia.com/v1alpha1``), one driver per node selector, read
  apart by :func:`nvidia_drivers_of` (it is no installation of the operator);
* a ``GpuOperator`` description (``gpustrata.io/v1alpha1``; what the gpustrata
  ``GpuOperator`` component registers), which also carries ``declaredOverrides``::

      apiVersion: gpustrata.io/v1alpha1
      kind: GpuOperator
      metadata: {name: gpu-operator, namespace: gpu-operator}
      spec:
        chart: gpu-operator
        version: v26.7.0
        values: {driver: {enabled: false}, mig: {strategy: single}}
        declaredOverrides: [toolkit]   # component versions changed on purpose (O004)

When a description and a Helm release name the same release (namespace and name), the
description is the one read. Values the manifest leaves unset take the chart defaults
below, identical in ``deployments/gpu-operator/values.yaml`` of NVIDIA/gpu-operator at
every catalogued release (v24.9.0 .. v26.7.0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpustrata.core.contract import DECLARED_OVERRIDES_ANNOTATION
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.yamlio import safe_load
from gpustrata_policies.view.helm_values import (
    ValuesLayer,
    ValuesSources,
    release_values,
    values_flag,
    values_sources,
)
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig

__all__ = [
    "CHART_DEFAULTS_SOURCE",
    "DECLARED_OVERRIDES_ANNOTATION",
    "GpuOperatorView",
    "NvidiaDriverView",
    "nvidia_drivers_of",
    "operator_view",
    "operators_of",
]

CHART_DEFAULTS_SOURCE = (
    "https://github.com/NVIDIA/gpu-operator/blob/v26.7.0/deployments/gpu-operator/values.yaml"
)
"""Annotation listing components whose version differs from the tested set on purpose."""

CHART = "gpu-operator"
# Chart defaults (values.yaml, same at v24.9.0 .. v26.7.0).
DEFAULT_MIG_STRATEGY = "single"
DEFAULT_DAEMONSET_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
ASSET_TOLERATIONS_URL = (
    "https://github.com/NVIDIA/gpu-operator/blob/v26.7.0/assets/state-device-plugin/"
    "0500_daemonset.yaml"
)
"""Where a ClusterPolicy that states no ``daemonsets.tolerations`` gets its operands'
tolerations: the operator's own DaemonSet assets (the same toleration in every
``assets/state-*/`` DaemonSet and ``assets/gpu-feature-discovery/``), which tolerate what
the chart default does (:data:`DEFAULT_DAEMONSET_TOLERATIONS`);
``controllers/object_controls.go`` replaces them only with a non-empty list."""
DEFAULT_NFD_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Equal",
        "value": "",
        "effect": "NoSchedule",
    },
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
COMPONENTS = ("driver", "toolkit", "devicePlugin", "dcgmExporter")
"""Value keys of the components whose versions O004 checks."""

_CHART_LABEL = re.compile(r"^gpu-operator-(v?\d+\.\d+\.\d+.*)$")
_EXACT = re.compile(r"^v?\d+\.\d+\.\d+([-+.][0-9A-Za-z.-]+)?$")


@dataclass(frozen=True, slots=True)
class GpuOperatorView:
    """One installation of the GPU Operator, in chart-values spelling."""

    obj: K8sObject
    source: str
    """``HelmRelease``, ``ClusterPolicy`` or ``GpuOperator``."""
    values: Mapping[str, Any]
    values_path: tuple[str, ...]
    """Where ``values`` sit inside ``obj`` (for line numbers)."""
    version: str | None
    """Release (chart) version, e.g. ``v26.7.0``; ``None`` when not stated."""
    version_path: tuple[str, ...] | None = None
    declared_overrides: frozenset[str] = field(default_factory=frozenset)
    layers: tuple[ValuesLayer, ...] = ()
    """A Flux release's values files (``spec.valuesFrom`` items, then ``spec.values``);
    empty when ``values`` are read from one place, ``values_path``."""

    @property
    def pinned(self) -> bool:
        """The release is one exact version (``v26.7.0``), not a range or a floating tag."""
        return self.version is not None and bool(_EXACT.match(self.version))

    @property
    def is_helm(self) -> bool:
        """Installed from the chart (chart defaults apply to unset values, NFD included)."""
        return self.source != "ClusterPolicy"

    @property
    def label(self) -> str:
        """``GPU Operator v26.7.0`` / ``GPU Operator (release not stated)``."""
        return f"GPU Operator {self.version}" if self.version else "GPU Operator"

    def value(self, *path: str) -> Any:
        """A value by path (``None`` when unset); raises UnknownInput when unknown."""
        found = dig(self.values, *path)
        if found is UNKNOWN:
            raise UnknownInput(f"{'.'.join(path)} of {self.obj.resource}")
        return found

    def path(self, *path: str) -> tuple[str | int, ...]:
        """Path of a value inside the object: for a Flux release whose values come from
        ``spec.valuesFrom``, the last layer that sets it (the reference naming a ConfigMap
        when that is where the value is)."""
        for layer in reversed(self.layers):
            if dig(layer.values, *path) is not None:
                return (*layer.path, *path) if layer.path[-1] == "values" else layer.path
        return (*self.values_path, *path)

    def origin(self, *path: str) -> str:
        """``, from ConfigMap/ns/name key values.yaml`` where a value of a Flux release
        comes from a ``spec.valuesFrom`` referent; empty otherwise."""
        for layer in reversed(self.layers):
            if dig(layer.values, *path) is not None:
                return "" if layer.path[-1] == "values" else f", from {layer.source}"
        return ""

    def enabled(self, component: str) -> bool:
        """``<component>.enabled`` (driver and toolkit default to true in the chart)."""
        return values_flag(self.value(component, "enabled"), True)

    @property
    def mig_strategy(self) -> str:
        """``mig.strategy``: chart default ``single``; an unset ClusterPolicy means ``none``
        (the device plugin's default, controllers/object_controls.go applyMIGConfiguration)."""
        value = self.value("mig", "strategy")
        if isinstance(value, str) and value:
            return value
        return DEFAULT_MIG_STRATEGY if self.is_helm else "none"

    def tolerations(self, which: str) -> tuple[list[Mapping[str, Any]], bool]:
        """Tolerations of the operands (``daemonsets``) or the NFD worker (``nfd``), and
        whether they are the chart default (not stated)."""
        if which == "daemonsets":
            raw, default = self.value("daemonsets", "tolerations"), DEFAULT_DAEMONSET_TOLERATIONS
        else:
            raw = self.value("node-feature-discovery", "worker", "tolerations")
            default = DEFAULT_NFD_TOLERATIONS
        if raw is None and self.is_helm:
            return [dict(t) for t in default], True
        items = as_list(raw, f"{which} tolerations of {self.obj.resource}")
        stated = [t for t in items if isinstance(t, Mapping)]
        if which == "daemonsets" and not stated and not self.is_helm:
            # A ClusterPolicy with `daemonsets: {}` (or an empty list): the operator keeps
            # its assets' own tolerations (ASSET_TOLERATIONS_URL).
            return [dict(t) for t in DEFAULT_DAEMONSET_TOLERATIONS], True
        return stated, False

    @property
    def deploys_nfd(self) -> bool:
        """The chart deploys node-feature-discovery (``nfd.enabled``, default true)."""
        if not self.is_helm:
            return False
        value = self.value("nfd", "enabled")
        return value is not False and str(value).lower() != "false"

    def component_version(self, component: str) -> str | None:
        """``<component>.version`` as stated (``None`` when the chart default applies)."""
        value = self.value(component, "version")
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
        return None


def _declared(obj: K8sObject, spec_value: Any) -> frozenset[str]:
    names: list[str] = []
    text = dig(obj.raw, "metadata", "annotations", DECLARED_OVERRIDES_ANNOTATION)
    if isinstance(text, str):
        names += [n.strip() for n in text.split(",") if n.strip()]
    if isinstance(spec_value, list):
        names += [str(n) for n in spec_value]
    return frozenset(names)


def _is_chart(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    base = name.rstrip("/").rsplit("/", 1)[-1]
    return base == CHART or bool(re.fullmatch(r"gpu-operator-v?\d+\.\d+\.\d+\.tgz", base))


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def operator_view(obj: K8sObject, sources: ValuesSources | None = None) -> GpuOperatorView | None:
    """*obj* as a GPU Operator installation, or ``None`` if it is not one.

    *sources* are the ConfigMaps and Secrets a Flux release's ``spec.valuesFrom`` may name
    (:func:`~.helm_values.values_sources` of the inputs). Raises :class:`UnknownInput` when
    the chart or its version is unknown (preview), or when ``spec.valuesFrom`` names a
    referent that is not among *sources* (the reason says which).
    """
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    if obj.kind == "GpuOperator":
        values = as_map(spec.get("values"), f"spec.values of {obj.resource}")
        return GpuOperatorView(
            obj,
            "GpuOperator",
            values,
            ("spec", "values"),
            _text(spec.get("version")),
            ("spec", "version"),
            _declared(obj, spec.get("declaredOverrides")),
        )
    if obj.kind == "ClusterPolicy" and obj.api_version.startswith("nvidia.com/"):
        label = dig(obj.raw, "metadata", "labels", "helm.sh/chart")
        match = _CHART_LABEL.match(label) if isinstance(label, str) else None
        version = match.group(1) if match else None
        return GpuOperatorView(
            obj,
            "ClusterPolicy",
            spec,
            ("spec",),
            version,
            ("metadata", "labels", "helm.sh/chart") if version else None,
            _declared(obj, None),
        )
    if obj.kind == "HelmValues":
        if spec.get("chart") != CHART:
            return None
        values = as_map(spec.get("values"), f"values of {obj.file}")
        return GpuOperatorView(obj, "HelmValues", values, ("spec", "values"), None)
    if obj.kind == "Application" and obj.api_version.startswith("argoproj.io/"):
        return _argo_view(obj, spec)
    if obj.kind != "HelmRelease":
        return None
    chart = spec.get("chart")
    if chart is UNKNOWN:
        raise UnknownInput(f"spec.chart of {obj.resource}")
    version_path: tuple[str, ...]
    if isinstance(chart, Mapping):  # Flux: spec.chart.spec.{chart,version}
        inner = as_map(chart.get("spec"), "spec.chart.spec")
        if not _is_chart(inner.get("chart")):
            return None
        version, version_path = inner.get("version"), ("spec", "chart", "spec", "version")
    else:
        if not _is_chart(chart):
            return None
        version, version_path = spec.get("version"), ("spec", "version")
    if version is UNKNOWN:
        raise UnknownInput(f"chart version of {obj.resource}")
    layers: tuple[ValuesLayer, ...] = ()
    if isinstance(chart, Mapping) and spec.get("valuesFrom"):
        values, layers = release_values(obj, sources or {})
    else:
        values = as_map(spec.get("values"), f"spec.values of {obj.resource}")
    return GpuOperatorView(
        obj,
        "HelmRelease",
        values,
        ("spec", "values"),
        _text(version),
        version_path,
        _declared(obj, None),
        layers,
    )


def _argo_view(obj: K8sObject, spec: Mapping[str, Any]) -> GpuOperatorView | None:
    """An Argo CD Application that installs the chart (``spec.source`` or ``spec.sources``)."""
    sources: list[tuple[tuple[str | int, ...], Any]] = [(("spec", "source"), spec.get("source"))]
    for index, item in enumerate(as_list(spec.get("sources"), f"spec.sources of {obj.resource}")):
        sources.append((("spec", "sources", index), item))
    for base, source in sources:
        if source is UNKNOWN:
            raise UnknownInput(f"{'.'.join(map(str, base))} of {obj.resource}")
        if not isinstance(source, Mapping) or not _is_chart(source.get("chart")):
            continue
        version = source.get("targetRevision")
        if version is UNKNOWN:
            raise UnknownInput(f"targetRevision of {obj.resource}")
        helm = as_map(source.get("helm"), "helm")
        path: tuple[str, ...] = (*map(str, base), "helm", "valuesObject")
        values = helm.get("valuesObject")
        if values is None and isinstance(helm.get("values"), str):
            try:
                values = safe_load(helm["values"])
            except yaml.YAMLError:  # a syntax error or a guard (alias bomb, ...)
                raise UnknownInput(f"helm.values of {obj.resource} (not readable YAML)") from None
            path = (*map(str, base), "helm", "values")
        return GpuOperatorView(
            obj,
            "HelmRelease",
            as_map(values, f"helm values of {obj.resource}"),
            path,
            _text(version),
            (*map(str, base), "targetRevision"),
            _declared(obj, None),
        )
    return None


def _release_key(view: GpuOperatorView) -> tuple[str, str]:
    if view.source == "GpuOperator":
        release = as_map(view.obj.raw.get("spec"), "spec").get("releaseName")
        return view.obj.namespace, release if isinstance(release, str) else view.obj.name
    return view.obj.namespace, view.obj.name


def operators_of(objects: Iterable[K8sObject]) -> list[GpuOperatorView]:
    """Every GPU Operator installation among *objects* (a description replaces the Helm
    release it describes). Objects whose chart or version is unknown are skipped."""
    objects = list(objects)
    sources = values_sources(objects)
    views: list[GpuOperatorView] = []
    for obj in objects:
        try:
            view = operator_view(obj, sources)
        except UnknownInput:
            continue
        if view is not None:
            views.append(view)
    described = {_release_key(v) for v in views if v.source == "GpuOperator"}
    return [v for v in views if v.source != "HelmRelease" or _release_key(v) not in described]


@dataclass(frozen=True, slots=True)
class NvidiaDriverView:
    """One ``NVIDIADriver`` custom resource (``nvidia.com/v1alpha1``): the driver the GPU
    Operator installs on the nodes its ``nodeSelector`` picks, when the ClusterPolicy sets
    ``driver.useNvidiaDriverCRD`` (NVIDIA/gpu-operator@a22dbf67
    api/nvidia/v1alpha1/nvidiadriver_types.go, config/samples/nvidia_v1alpha1_nvidiadriver.yaml)."""

    obj: K8sObject
    version: str | None
    """``spec.version`` (``None``: the operator's default driver image)."""
    driver_type: str
    """``spec.driverType``: ``gpu`` (default), ``vgpu`` or ``vgpu-host-manager``."""
    node_selector: Mapping[str, str]
    """``spec.nodeSelector``; empty: every GPU node."""

    @property
    def where(self) -> str:
        """``installed by NVIDIADriver/default (spec.version)``."""
        return f"installed by {self.obj.resource} (spec.version)"

    def selects(self, labels: Mapping[str, Any]) -> bool:
        """The CR's nodeSelector picks nodes with *labels*."""
        return all(labels.get(k) == v for k, v in self.node_selector.items())


def nvidia_drivers_of(objects: Iterable[K8sObject]) -> list[NvidiaDriverView]:
    """Every ``NVIDIADriver`` among *objects* (unknown fields: skipped, as for operators)."""
    found: list[NvidiaDriverView] = []
    for obj in objects:
        if obj.kind != "NVIDIADriver" or not obj.api_version.startswith("nvidia.com/"):
            continue
        spec = obj.raw.get("spec")
        if not isinstance(spec, Mapping):
            continue
        selector = spec.get("nodeSelector")
        if selector is UNKNOWN or spec.get("version") is UNKNOWN:
            continue
        found.append(
            NvidiaDriverView(
                obj,
                _text(spec.get("version")),
                str(spec.get("driverType") or "gpu"),
                {str(k): str(v) for k, v in selector.items()}
                if isinstance(selector, Mapping)
                else {},
            )
        )
    return found
