"""Where each Pod that must run can land, and which CRDs are installed: the one reader
behind rules K017 / K018 and the deploy rehearsal.

*Pods that must run* are the pod templates of workloads (Deployment, StatefulSet, Job,
ReplicaSet, Pod, LeaderWorkerSet), the head and worker groups of KubeRay objects, and the
controller Pods of every Helm release and EKS add-on whose chart the chart catalogue
knows at that version (:mod:`gpustrata.catalog.charts`, each fact cited): their default
tolerations, node selector and required affinity with the release's values applied.
DaemonSets run where they can and are never Pending for want of a node, so they are not
read. A chart or version the catalogue does not know is *not evaluated*, never guessed.

A Pod can land on a pool whose hard taints it tolerates, whose labels its node selector
and required node affinity match, and that has or can get nodes (a minimum of one, a
Karpenter NodePool, or Nodes that exist).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpustrata.core.unknown import UnknownInput
from gpustrata_policies.view.kinds import RAY_KINDS
from gpustrata_policies.view.nodes import tolerations_of
from gpustrata_policies.view.objects import K8sObject, PodRef, as_map, dig
from gpustrata_policies.view.pools import GpuPool, pool_matches, tolerates

if TYPE_CHECKING:  # the chart catalogue is read once a chart's object is (issue 35)
    from gpustrata.catalog.charts import ChartRelease

__all__ = [
    "ADDON_KIND",
    "PodNeed",
    "builtin_group",
    "chart_name",
    "chart_of",
    "cluster_autoscaler",
    "crds_installed",
    "custom_kind",
    "landing",
    "pods_that_must_run",
    "room",
]

ADDON_KIND = "EksAddon"
"""Kind of an ``aws:eks/addon:Addon`` as the Pulumi adapter converts it."""

_POD_KINDS = frozenset({"Deployment", "StatefulSet", "Job", "ReplicaSet", "Pod", "CronJob"})
_POD_KINDS_EXTRA = frozenset({"LeaderWorkerSet"})

# API groups the API server serves without a CRD (Kubernetes 1.30-1.36 built-ins, and
# gpustrata's own description kinds, which are never applied to a cluster).
_BUILTIN_GROUPS = frozenset(
    {
        "",
        "v1",
        "apps",
        "batch",
        "autoscaling",
        "policy",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "node.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
        "certificates.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "resource.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "apiregistration.k8s.io",
        "gpustrata.io",
        "helm.sh",
    }
)


@dataclass(frozen=True)
class PodNeed:
    """A Pod (template) that must be scheduled for its owner to become ready."""

    name: str
    """How messages name it (``Deployment/inference/qwen``, ``HelmRelease x: nfd-master``)."""
    owner: K8sObject
    tolerations: tuple[Mapping[str, Any], ...]
    node_selector: Mapping[str, Any]
    terms: list[list[Mapping[str, Any]]]
    """Required node affinity: OR-ed terms of AND-ed expressions."""
    awaited: bool = True
    """Whether its owner's readiness (a Helm release's wait, a Deployment's rollout)
    waits for it."""
    chart: ChartRelease | None = None
    """The catalogued chart it comes from (its values keys are the fix), if any."""
    values_path: str | None = None
    """The chart values key that places it (``operator.nodeSelector``)."""
    sources: tuple[str, ...] = field(default_factory=tuple)
    gpus: bool = False
    """It requests GPUs (``nvidia.com/gpu``): only a GPU pool takes it."""
    hook: str | None = None
    """The Helm hook(s) it runs as (``pre-install``, ``pre-delete``, comma-separated);
    ``None``: an ordinary release object."""
    distinct_nodes: int = 1
    """Nodes its replicas need: the replica count when a required pod anti-affinity on
    ``kubernetes.io/hostname`` puts each replica on its own node (Karpenter's chart)."""

    @property
    def at_install(self) -> bool:
        """Does it run when the release is first installed (not only on delete/upgrade)?"""
        return self.hook is None or "install" in self.hook


def builtin_group(api_version: str) -> bool:
    """Is *api_version*'s group served by Kubernetes itself (no CRD needed)?"""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    if group in _SIG_CRD_GROUPS:
        return False
    return group in _BUILTIN_GROUPS or group.endswith(".k8s.io")


_SIG_CRD_GROUPS = frozenset(
    {
        # Kubernetes SIG projects whose API groups end in .k8s.io but are served by CRDs
        # that must be installed: Gateway API (kubernetes-sigs/gateway-api
        # config/crd/standard/), the Inference Extension's v1 InferencePool
        # (kubernetes-sigs/gateway-api-inference-extension config/crd/bases/), CSI
        # volume snapshots (kubernetes-csi/external-snapshotter client/config/crd/).
        "gateway.networking.k8s.io",
        "inference.networking.k8s.io",
        "snapshot.storage.k8s.io",
    }
)


def custom_kind(obj: K8sObject) -> str | None:
    """``group/Kind`` of a custom resource (its CRD must exist), ``None`` otherwise."""
    api = obj.raw.get("apiVersion")
    if not isinstance(api, str) or "/" not in api or builtin_group(api):
        return None
    return f"{api.rsplit('/', 1)[0]}/{obj.kind}"


def chart_of(obj: K8sObject) -> tuple[ChartRelease | None, str]:
    """The catalogued chart of a HelmRelease or EKS add-on object, or (None, why)."""
    from gpustrata.catalog.charts import chart_release, chart_releases

    spec = as_map(obj.raw.get("spec"), "spec")
    if obj.kind == ADDON_KIND:
        name, version = spec.get("addonName"), spec.get("kubernetesVersion")
        if not isinstance(name, str):
            return None, "the add-on's name is not known"
        known = [r for r in chart_releases() if r.chart == name and r.kind == "eks-addon"]
        if not known:
            return None, f"EKS add-on {name} is not in the chart catalogue"
        match = [r for r in known if isinstance(version, str) and r.version == version]
        return (match or known)[0], ""
    chart, version = chart_name(obj), spec.get("version")
    flux = dig(spec, "chart", "spec")
    if isinstance(flux, Mapping):  # a Flux HelmRelease: spec.chart.spec.{chart, version}
        version = flux.get("version")
    if chart is None or not isinstance(version, str):
        return None, "its chart or version is not stated"
    found = chart_release(chart, version)
    if found is None:
        return None, f"chart {chart} {version} is not in the chart catalogue"
    return found, ""


def chart_name(obj: K8sObject) -> str | None:
    """The chart a HelmRelease installs (a repository or OCI reference stripped; a Flux
    HelmRelease's ``spec.chart.spec.chart``), or ``None``."""
    chart = dig(obj.raw, "spec", "chart")
    if isinstance(chart, Mapping):
        chart = dig(chart, "spec", "chart")
    return chart.rsplit("/", 1)[-1] if isinstance(chart, str) and chart else None


def _values(obj: K8sObject) -> Mapping[str, Any]:
    if obj.kind == ADDON_KIND:
        return as_map(dig(obj.raw, "spec", "configurationValues"), "configurationValues")
    return as_map(dig(obj.raw, "spec", "values"), "values")


def _terms(required: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    out: list[list[Mapping[str, Any]]] = []
    for term in required:
        exprs = term.get("matchExpressions") if isinstance(term, Mapping) else None
        out.append([e for e in exprs or () if isinstance(e, Mapping)])
    return out


def _distinct_nodes(replicas: int | None, anti: Iterable[Mapping[str, Any]]) -> int:
    per_host = any(
        isinstance(t, Mapping) and t.get("topologyKey") == "kubernetes.io/hostname" for t in anti
    )
    return replicas if per_host and isinstance(replicas, int) and replicas > 1 else 1


def _chart_pods(obj: K8sObject, release: ChartRelease) -> list[PodNeed]:
    from gpustrata.catalog.charts import pod_placement

    values = _values(obj)
    out = []
    for pod in release.pods:
        if pod.workload == "DaemonSet":
            continue
        placed = pod_placement(pod, values)
        if not placed.enabled:
            continue
        out.append(
            PodNeed(
                f"{obj.kind} {obj.name}: {pod.component}",
                obj,
                tuple(placed.tolerations),
                dict(placed.node_selector),
                _terms(placed.required_affinity),
                pod.awaited,
                release,
                pod.values_node_selector,
                pod.sources or release.sources,
                hook=pod.hook,
                distinct_nodes=_distinct_nodes(placed.replicas, placed.anti_affinity),
            )
        )
    return out


def _requests_gpus(pod: PodRef) -> bool:
    try:
        return pod.gpu_count() > 0
    except UnknownInput:  # known only at deploy time: not assumed to need a GPU node
        return False


def _replicas_zero(obj: K8sObject, spec: Mapping[str, Any]) -> bool:
    return obj.kind in {"Deployment", "StatefulSet", "ReplicaSet"} and spec.get("replicas") == 0


def pods_that_must_run(objects: Iterable[K8sObject]) -> tuple[list[PodNeed], list[str]]:
    """Every Pod that must run, and why some owners could not be read (not evaluated)."""
    needs: list[PodNeed] = []
    unread: list[str] = []
    for obj in objects:
        kind = obj.kind
        if kind in {"HelmRelease", ADDON_KIND}:
            release, why = chart_of(obj)
            if release is None:
                unread.append(f"{obj.resource}: {why}")
            else:
                needs += _chart_pods(obj, release)
            continue
        if kind not in _POD_KINDS and kind not in _POD_KINDS_EXTRA and kind not in RAY_KINDS:
            continue
        spec = as_map(obj.raw.get("spec"), "spec")
        if _replicas_zero(obj, spec):
            continue
        for pod in obj.pods():
            if pod.is_ray and pod.replicas == 0:
                continue
            needs.append(
                PodNeed(
                    f"{obj.resource}{pod.where}",
                    obj,
                    tuple(tolerations_of(pod)),
                    pod.node_selector(),
                    pod.required_affinity_terms(),
                    # KubeRay's custom resources are not awaited by Pulumi: nothing waits.
                    awaited=kind not in RAY_KINDS,
                    gpus=_requests_gpus(pod),
                )
            )
    return needs, unread


_AUTOSCALER = "cluster-autoscaler"


def cluster_autoscaler(objects: Iterable[K8sObject]) -> str | None:
    """The Cluster Autoscaler the objects install (its chart release or its Deployment),
    which scales a node group up from zero for a pending Pod; ``None`` if none."""
    for obj in objects:
        if obj.kind == "HelmRelease":
            if chart_name(obj) == _AUTOSCALER:
                return obj.resource
        elif obj.kind == "Deployment" and _AUTOSCALER in obj.name:
            return obj.resource
    return None


def _has_nodes(pool: GpuPool, scale_from_zero: bool = False) -> bool:
    """Can the pool have a node? A minimum of one, Nodes read from the cluster, a Karpenter
    NodePool, a minimum not stated (not assumed to be zero), or *scale_from_zero* (an
    autoscaler that scales the pool up from zero)."""
    if pool.from_nodes or pool.extra.get("provisioner") == "karpenter" or scale_from_zero:
        return True
    if pool.obj.kind == "NodePool":
        return True
    minimum = pool.extra.get("minSize")
    if isinstance(minimum, bool) or not isinstance(minimum, int | str):
        return True
    try:
        return int(minimum) >= 1
    except ValueError:
        return True


def landing(
    need: PodNeed, pools: Sequence[GpuPool], *, scale_from_zero: bool = False
) -> tuple[list[GpuPool], list[str]]:
    """The pools *need* can land on, and for each other pool why not (*scale_from_zero*: a
    pool of minimum size 0 can get a node, an autoscaler scales it)."""
    fits: list[GpuPool] = []
    why: list[str] = []
    for pool in pools:
        untolerated = [t for t in pool.hard_taints if not tolerates(need.tolerations, t)]
        if untolerated:
            taint = untolerated[0]
            why.append(
                f"pool {pool.name}: taint {taint['key']}={taint['value']}:{taint['effect']} "
                "not tolerated"
            )
            continue
        if need.gpus and not pool.has_gpus:
            why.append(f"pool {pool.name}: no GPUs")
            continue
        if not pool_matches(need.node_selector, need.terms, pool):
            why.append(f"pool {pool.name}: its labels do not match the node selector/affinity")
            continue
        if not _has_nodes(pool, scale_from_zero):
            why.append(f"pool {pool.name}: min size 0 and nothing scales it up")
            continue
        fits.append(pool)
    return fits, why


def room(need: PodNeed, fits: Sequence[GpuPool], *, scale_from_zero: bool = False) -> str:
    """Why the pools *need* lands on have too few nodes for its replicas (each on its own
    node), or ``""`` when they have enough (or can get them: Karpenter, an autoscaler)."""
    if need.distinct_nodes <= 1:
        return ""
    nodes = 0
    for pool in fits:
        if pool.from_nodes or pool.obj.kind == "NodePool":
            return ""
        if pool.extra.get("provisioner") == "karpenter":
            return ""
        limit = pool.max_size if scale_from_zero else pool.extra.get("minSize")
        if isinstance(limit, bool) or not isinstance(limit, int):
            return ""  # not stated: not assumed too small
        nodes += limit
    if nodes >= need.distinct_nodes:
        return ""
    names = ", ".join(p.name for p in fits)
    return (
        f"{need.name} runs {need.distinct_nodes} replicas, each on its own node (required pod "
        f"anti-affinity on kubernetes.io/hostname), but {names} "
        f"{'has' if len(fits) == 1 else 'have'} {nodes} node(s) at minimum size"
    )


def crds_installed(objects: Iterable[K8sObject]) -> dict[str, str]:
    """``group/Kind`` -> what installs it: CustomResourceDefinition objects and the CRDs
    of every catalogued chart release (unless its values turn CRD installation off)."""
    out: dict[str, str] = {}
    for obj in objects:
        if obj.kind == "CustomResourceDefinition":
            group, kind = dig(obj.raw, "spec", "group"), dig(obj.raw, "spec", "names", "kind")
            if isinstance(group, str) and isinstance(kind, str):
                out[f"{group}/{kind}"] = obj.resource
        elif obj.kind == "HelmRelease":
            release, _ = chart_of(obj)
            if release is None:
                continue
            if release.crds_value:
                node: Any = _values(obj)
                for part in release.crds_value.split("."):
                    node = node.get(part) if isinstance(node, Mapping) else None
                if node is False:
                    continue
            for crd in release.crds:
                out.setdefault(crd, f"{obj.resource} ({release.chart} {release.version})")
    return out
