"""What each chart gpustrata installs runs and installs, at its pinned version
(``data/charts.yaml``, every fact cited as ``repo@tag:path``).

The deploy rehearsal and rules K017/K018 read these facts: which Pods a chart's release
must schedule before Helm (``skip_await: false``) calls it ready, the tolerations,
node selector and required node affinity those Pods carry by default, the values keys
that override them, and the CustomResourceDefinitions the chart installs. EKS add-ons
(CoreDNS, ...) are catalogued the same way (``kind: eks-addon``).

A chart or version that is not catalogued is ``None``: callers say "not evaluated"
rather than guessing its defaults.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpustrata.core.yamlio import safe_load

__all__ = [
    "ChartPod",
    "ChartRelease",
    "PodPlacement",
    "chart_release",
    "chart_releases",
    "crd_owner",
    "placement_values",
    "pod_placement",
]


@dataclass(frozen=True, slots=True)
class ChartPod:
    """One Pod template a chart (or add-on) runs."""

    component: str
    """What it is, e.g. ``gpu-operator``, ``nfd-master``, ``kuberay-operator``, ``coredns``."""
    workload: str
    """``Deployment``, ``StatefulSet``, ``DaemonSet`` or ``Job``."""
    tolerations: tuple[Mapping[str, Any], ...]
    """Default tolerations (as in a Pod spec)."""
    node_selector: Mapping[str, str]
    """Default ``nodeSelector``."""
    required_affinity: tuple[Mapping[str, Any], ...]
    """Default ``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`` (ORed
    terms, each a ``{matchExpressions: [...]}``); empty when none."""
    values_tolerations: str | None
    """Dotted values path that replaces :attr:`tolerations` (``operator.tolerations``)."""
    values_node_selector: str | None
    """Dotted values path that replaces :attr:`node_selector`."""
    values_affinity: str | None
    """Dotted values path that replaces the affinity (whole ``affinity`` object)."""
    values_enabled: str | None
    """Dotted values path that turns the Pod off (``None``: always on)."""
    enabled_by_default: bool
    """Whether it runs with the chart's default values."""
    awaited: bool
    """Whether the release's readiness waits for it (a Deployment's ready replicas; a
    DaemonSet with no eligible node is ready at 0)."""
    sources: tuple[str, ...]
    """``repo@tag:path`` of the templates and values read."""


@dataclass(frozen=True, slots=True)
class ChartRelease:
    """One chart (or EKS add-on) at one version."""

    chart: str
    """Chart name (``gpu-operator``) or EKS add-on name (``coredns``)."""
    version: str
    """Chart version as pinned (``v26.7.0``, ``1.7.0``)."""
    kind: str
    """``helm`` or ``eks-addon``."""
    pods: tuple[ChartPod, ...]
    crds: tuple[str, ...]
    """CRDs it installs, as ``group/Kind`` (``ray.io/RayService``)."""
    crds_value: str | None
    """Dotted values path that turns CRD installation off (``None``: always installed or
    none)."""
    sources: tuple[str, ...]


def _pod(entry: Mapping[str, Any]) -> ChartPod:
    return ChartPod(
        component=str(entry["component"]),
        workload=str(entry["workload"]),
        tolerations=tuple(entry.get("tolerations") or ()),
        node_selector={str(k): str(v) for k, v in (entry.get("node_selector") or {}).items()},
        required_affinity=tuple(entry.get("required_affinity") or ()),
        values_tolerations=entry.get("values", {}).get("tolerations"),
        values_node_selector=entry.get("values", {}).get("node_selector"),
        values_affinity=entry.get("values", {}).get("affinity"),
        values_enabled=entry.get("values", {}).get("enabled"),
        enabled_by_default=bool(entry.get("enabled_by_default", True)),
        awaited=bool(entry.get("awaited", entry["workload"] != "DaemonSet")),
        sources=tuple(str(s) for s in entry.get("sources") or ()),
    )


@functools.cache
def chart_releases() -> tuple[ChartRelease, ...]:
    """Every catalogued chart release and EKS add-on."""
    text = resources.files("gpustrata.catalog").joinpath("data/charts.yaml").read_text("utf-8")
    doc: Any = safe_load(text)
    return tuple(
        ChartRelease(
            chart=str(e["chart"]),
            version=str(e["version"]),
            kind=str(e.get("kind", "helm")),
            pods=tuple(_pod(p) for p in e.get("pods") or ()),
            crds=tuple(str(c) for c in e.get("crds") or ()),
            crds_value=e.get("crds_value"),
            sources=tuple(str(s) for s in e.get("sources") or ()),
        )
        for e in doc["charts"]
    )


def chart_release(chart: str, version: str) -> ChartRelease | None:
    """The catalogued release of *chart* at *version* (a leading ``v`` is ignored), or
    ``None``."""
    want = version.removeprefix("v")
    for release in chart_releases():
        if release.chart == chart and release.version.removeprefix("v") == want:
            return release
    return None


def _at(values: Mapping[str, Any], path: str | None) -> tuple[bool, Any]:
    """(found, value) at a dotted *path* of *values*."""
    if not path:
        return False, None
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where a chart Pod may land once the release's values are applied."""

    pod: ChartPod
    enabled: bool
    tolerations: tuple[Mapping[str, Any], ...]
    node_selector: Mapping[str, str]
    required_affinity: tuple[Mapping[str, Any], ...]
    """``nodeSelectorTerms`` of the required node affinity (ORed)."""


def pod_placement(pod: ChartPod, values: Mapping[str, Any]) -> PodPlacement:
    """*pod* with the release's *values* applied (a values key, when set, replaces the
    chart default as Helm's merge does for lists and is merged for maps)."""
    found, enabled = _at(values, pod.values_enabled)
    on = bool(enabled) if found and isinstance(enabled, bool) else pod.enabled_by_default
    found, tols = _at(values, pod.values_tolerations)
    tolerations = tuple(tols) if found and isinstance(tols, list) else pod.tolerations
    found, sel = _at(values, pod.values_node_selector)
    selector = dict(pod.node_selector)
    if found and isinstance(sel, Mapping):
        selector.update({str(k): str(v) for k, v in sel.items()})
    found, aff = _at(values, pod.values_affinity)
    required = pod.required_affinity
    if found and isinstance(aff, Mapping):
        node_aff = aff.get("nodeAffinity")
        req = (
            node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
            if isinstance(node_aff, Mapping)
            else None
        )
        terms = req.get("nodeSelectorTerms") if isinstance(req, Mapping) else None
        required = tuple(terms) if isinstance(terms, list) else ()
    return PodPlacement(pod, on, tolerations, selector, required)


def _put(out: dict[str, Any], path: str, value: Any) -> None:
    node = out
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def placement_values(
    release: ChartRelease,
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Chart values that place every controller Pod of *release* (not its DaemonSets,
    which must run on every node they serve) with *node_selector*, and *tolerations*
    when given, through the chart's own values keys."""
    out: dict[str, Any] = {}
    for pod in release.pods:
        if pod.workload == "DaemonSet":
            continue
        if pod.values_node_selector:
            _put(out, pod.values_node_selector, dict(node_selector))
        if tolerations and pod.values_tolerations:
            _put(out, pod.values_tolerations, [dict(t) for t in tolerations])
    return out


def crd_owner(group_kind: str) -> list[ChartRelease]:
    """The catalogued releases whose chart installs the CRD *group_kind*."""
    return [r for r in chart_releases() if group_kind in r.crds]
