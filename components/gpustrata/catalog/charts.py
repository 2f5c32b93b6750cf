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
from dataclasses import dataclass, field
from typing import Any

from gpustrata.catalog.packaged import packaged_document

__all__ = [
    "ChartPod",
    "ChartRelease",
    "PodPlacement",
    "chart_release",
    "chart_releases",
    "crd_owner",
    "dra_node_labels",
    "gpu_cluster_values",
    "newest_chart_release",
    "placement_values",
    "pod_placement",
    "prometheus_url",
    "values_at",
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
    replicas: int | None = None
    """Default replica count of a Deployment/StatefulSet (``None``: a DaemonSet, a Job, or
    not read)."""
    values_replicas: str | None = None
    """Dotted values path of the replica count."""
    anti_affinity: tuple[Mapping[str, Any], ...] = ()
    """Default ``podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`` terms
    (``{topologyKey: kubernetes.io/hostname}``: every replica on a distinct node)."""
    spread: tuple[Mapping[str, Any], ...] = ()
    """Default ``topologySpreadConstraints`` (``whenUnsatisfiable: DoNotSchedule`` ones
    are hard)."""
    values_spread: str | None = None
    """Dotted values path that replaces :attr:`spread`."""
    hook: str | None = None
    """Helm hook the Pod runs as (``pre-install``, ``pre-upgrade``, ``post-delete``...);
    ``None``: an ordinary release object. Helm always waits for hook Jobs."""
    also_enabled: tuple[str, ...] = ()
    """Further dotted values paths that must all be true for the Pod to run (a subchart's
    own switch under its condition); a path not set counts as true."""
    values_fallbacks: Mapping[str, str] = field(default_factory=dict)
    """Values path -> the path the template falls back to when the first is empty
    (``operator.nodeSelector | default .Values.nodeSelector`` in KEDA's templates)."""
    affinity_is_placement: bool = False
    """Whether the default required node affinity chooses *where* the Pod runs (the DRA
    driver controller's control-plane affinity), so pinning the Pod to a pool must replace
    it; ``False``: it is a guard to keep (Karpenter's ``karpenter.sh/nodepool
    DoesNotExist``, a kubelet plugin's GPU-node terms)."""


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
    crds_in_chart_dir: bool = False
    """Whether the CRDs ship in the chart's ``crds/`` directory: Helm installs them before
    any template (never upgrades them) and only ``--skip-crds`` (Pulumi ``skip_crds``)
    leaves them out."""
    crds_when: Mapping[str, str] = field(default_factory=dict)
    """``group/Kind`` -> dotted values path that must be true for that CRD to be installed
    (a subchart's ``condition``, e.g. ``nfd.enabled``)."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """Further cited facts by name, read through the typed accessors of this module."""


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
        replicas=None if entry.get("replicas") is None else int(entry["replicas"]),
        values_replicas=entry.get("values", {}).get("replicas"),
        anti_affinity=tuple(entry.get("anti_affinity") or ()),
        spread=tuple(entry.get("spread") or ()),
        values_spread=entry.get("values", {}).get("spread"),
        hook=entry.get("hook"),
        also_enabled=tuple(str(p) for p in entry.get("values", {}).get("also_enabled") or ()),
        values_fallbacks={
            str(k): str(v) for k, v in (entry.get("values", {}).get("fallbacks") or {}).items()
        },
        affinity_is_placement=bool(entry.get("affinity_is_placement", False)),
    )


@functools.cache
def chart_releases() -> tuple[ChartRelease, ...]:
    """Every catalogued chart release and EKS add-on."""
    doc: Any = packaged_document("data/charts.yaml")
    return tuple(
        ChartRelease(
            chart=str(e["chart"]),
            version=str(e["version"]),
            kind=str(e.get("kind", "helm")),
            pods=tuple(_pod(p) for p in e.get("pods") or ()),
            crds=tuple(str(c) for c in e.get("crds") or ()),
            crds_value=e.get("crds_value"),
            sources=tuple(str(s) for s in e.get("sources") or ()),
            crds_in_chart_dir=bool(e.get("crds_in_chart_dir", False)),
            crds_when={str(k): str(v) for k, v in (e.get("crds_when") or {}).items()},
            facts=dict(e.get("facts") or {}),
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
    replicas: int | None = None
    """Replica count with the values applied (``None``: not a counted workload)."""
    anti_affinity: tuple[Mapping[str, Any], ...] = ()
    """Required pod anti-affinity terms with the values applied."""
    spread: tuple[Mapping[str, Any], ...] = ()
    """Topology spread constraints with the values applied."""


def _lookup(pod: ChartPod, values: Mapping[str, Any], path: str | None) -> tuple[bool, Any]:
    """(found, value) at *path*, or at its fallback path when *path* is unset or empty
    (Helm's ``default`` treats an empty map or list as unset)."""
    found, value = _at(values, path)
    if path and path in pod.values_fallbacks and (not found or value in ({}, [], None, "")):
        other_found, other = _at(values, pod.values_fallbacks[path])
        if other_found:
            return other_found, other
    return found, value


def _enabled(pod: ChartPod, values: Mapping[str, Any]) -> bool:
    found, enabled = _at(values, pod.values_enabled)
    on = bool(enabled) if found and isinstance(enabled, bool) else pod.enabled_by_default
    for path in pod.also_enabled:
        found, also = _at(values, path)
        if found and isinstance(also, bool) and not also:
            on = False
    return on


def _terms_override(
    affinity: Mapping[str, Any], path: str, current: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The required terms at *path* of a values ``affinity`` (a list, or none when set to
    anything else), ``()`` when its top key (``nodeAffinity``) is set to null, else the
    chart default *current*."""
    found, terms = _at(affinity, path)
    if found:
        return tuple(terms) if isinstance(terms, list) else ()
    top = path.split(".", 1)[0]
    if top in affinity and affinity[top] is None:
        return ()
    return current


def pod_placement(pod: ChartPod, values: Mapping[str, Any]) -> PodPlacement:
    """*pod* with the release's *values* applied as Helm coalesces them: a list set in
    the values replaces the chart default, a map is merged into it key by key, and a key
    set to ``null`` removes the default (the whole ``affinity``, one ``nodeSelector``
    label)."""
    found, tols = _lookup(pod, values, pod.values_tolerations)
    tolerations = tuple(tols) if found and isinstance(tols, list) else pod.tolerations
    if found and tols is None:
        tolerations = ()
    found, sel = _lookup(pod, values, pod.values_node_selector)
    selector = dict(pod.node_selector)
    if found and sel is None:
        selector = {}
    elif found and isinstance(sel, Mapping):
        for key, value in sel.items():
            if value is None:
                selector.pop(str(key), None)
            else:
                selector[str(key)] = str(value)
    found, aff = _lookup(pod, values, pod.values_affinity)
    required = pod.required_affinity
    anti = pod.anti_affinity
    if found and aff is None:
        required, anti = (), ()
    elif found and isinstance(aff, Mapping):
        required = _terms_override(
            aff,
            "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            required,
        )
        anti = _terms_override(
            aff, "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", anti
        )
    found, spr = _at(values, pod.values_spread)
    spread = pod.spread
    if found:
        spread = tuple(spr) if isinstance(spr, list) else ()
    found, reps = _at(values, pod.values_replicas)
    replicas = pod.replicas
    if found and isinstance(reps, int) and not isinstance(reps, bool):
        replicas = reps
    return PodPlacement(
        pod, _enabled(pod, values), tolerations, selector, required, replicas, anti, spread
    )


def _set(out: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = out
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def values_at(paths: Mapping[str, Any]) -> dict[str, Any]:
    """Nested chart values from ``{dotted path: value}`` (the paths a catalogue entry
    names, e.g. ``inferencePool.modelServers.matchLabels``)."""
    out: dict[str, Any] = {}
    for path, value in paths.items():
        _set(out, path, value)
    return out


def placement_values(
    release: ChartRelease,
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The nested values that pin every controller Pod of *release* (each Pod that is
    not a DaemonSet: node agents stay on their nodes) to the nodes *node_selector*
    selects, through the chart's own values keys as catalogued: its node selector, its
    tolerations when *tolerations* is not empty (else the chart's default stays), and,
    where the chart's default required node affinity is itself the placement
    (:attr:`ChartPod.affinity_is_placement`) or the chart has no node selector key, a
    required node affinity of the same labels. Pods whose values key is not known are left
    as they are."""
    out: dict[str, Any] = {}
    selector = {str(k): str(v) for k, v in node_selector.items()}
    for pod in release.pods:
        if pod.workload == "DaemonSet":
            continue
        if pod.values_node_selector:
            _set(out, pod.values_node_selector, dict(selector))
        if tolerations and pod.values_tolerations:
            _set(out, pod.values_tolerations, [dict(t) for t in tolerations])
        # A required node affinity of the same labels replaces a default one that is the
        # placement, and pins a Pod whose chart has no nodeSelector key (GAIE's picker).
        by_affinity = pod.affinity_is_placement and pod.required_affinity
        if pod.values_affinity and (by_affinity or not pod.values_node_selector):
            expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in selector.items()]
            if expressions:
                _set(
                    out,
                    f"{pod.values_affinity}.nodeAffinity."
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    {"nodeSelectorTerms": [{"matchExpressions": expressions}]},
                )
    return out


def crd_owner(group_kind: str) -> list[ChartRelease]:
    """Every catalogued release that installs the CRD *group_kind* (``ray.io/RayService``),
    newest catalogue order kept."""
    return [r for r in chart_releases() if group_kind in r.crds]


def newest_chart_release(chart: str) -> ChartRelease | None:
    """The newest catalogued release of *chart*, or ``None`` when it is not catalogued."""
    same = [r for r in chart_releases() if r.chart == chart]
    return max(same, key=lambda r: _version_key(r.version)) if same else None


def _newest(chart: str, version: str | None) -> ChartRelease | None:
    return chart_release(chart, version) if version else newest_chart_release(chart)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.lstrip("v").split("-")[0].split(".") if p.isdigit())


def prometheus_url(
    release_name: str, namespace: str, version: str | None = None, *, fullname_override: str = ""
) -> str | None:
    """In-cluster URL of the Prometheus a kube-prometheus-stack release creates (Service
    ``<fullname>-prometheus`` on the catalogued port), or ``None`` when that chart version
    is not catalogued. *version* ``None``: the newest catalogued release."""
    release = _newest("kube-prometheus-stack", version)
    fact = release.facts.get("prometheus") if release is not None else None
    if not isinstance(fact, Mapping):
        return None
    limit = int(fact["fullname_max"])
    chart = str(fact["chart_name"])
    if fullname_override:
        full = fullname_override[:limit].rstrip("-")
    elif chart in release_name:
        full = release_name[:limit].rstrip("-")
    else:
        full = f"{release_name}-{chart}"[:limit].rstrip("-")
    return f"http://{full}{fact['service_suffix']}.{namespace}.svc:{int(fact['port'])}"


def dra_node_labels(version: str | None = None) -> dict[str, str]:
    """Node labels that keep the GPU Operator's device-plugin validator and device plugin
    off a node whose GPUs are published through DRA (the validator otherwise waits for
    ``nvidia.com/gpu`` capacity that never comes); empty when that operator version is not
    catalogued."""
    release = _newest("gpu-operator", version)
    fact = release.facts.get("dra_node") if release is not None else None
    if not isinstance(fact, Mapping):
        return {}
    return {str(k): str(v) for k, v in (fact.get("labels") or {}).items()}


def gpu_cluster_values(version: str) -> dict[str, Any] | None:
    """GPU Operator chart values that deploy its own DRA stack (a GPUCluster, no
    ClusterPolicy), compute domains off; ``None`` when that operator version has none (the
    cited ``gpu_cluster`` fact: v26.7.0 and later)."""
    release = chart_release("gpu-operator", version)
    fact = release.facts.get("gpu_cluster") if release is not None else None
    if not isinstance(fact, Mapping):
        return None
    out: dict[str, Any] = {}
    flat = {**(fact.get("values") or {}), str(fact["compute_domains_value"]): False}
    for path, value in flat.items():
        node = out
        *parents, leaf = str(path).split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
