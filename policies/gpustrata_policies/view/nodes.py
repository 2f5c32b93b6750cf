"""GPUs as the node-pool and GPU Operator rules (K003..K015, O001..O007) read them: the GPU
pools an object targets, the catalogue GPU of a pool or of a Pod's GPU selectors, and the
tolerations of a Pod."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from gpustrata.core.quantity import ZERO, parse_quantity
from gpustrata.core.unknown import TAINTED, UNKNOWN, UnknownInput, memoised
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.device_plugin import Sharing, cluster_sharing
from gpustrata_policies.view.dra import claimed_products
from gpustrata_policies.view.gpu_operator import (
    GpuOperatorView,
    NvidiaDriverView,
    nvidia_drivers_of,
    operator_view,
    operators_of,
)
from gpustrata_policies.view.helm_values import values_sources
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig, is_gpu_resource
from gpustrata_policies.view.pools import (
    DERIVED_FROM,
    GpuPool,
    launchable_types,
    pinned_types,
    pool_matches,
    pools_of,
)
from gpustrata_policies.view.profile import active_profile

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel

EKS_AMI_TYPES = "https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html"
GPU_OPERATOR_EKS = (
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/amazon-eks.html"
)
GPU_OPERATOR_PLATFORMS = (
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/platform-support.html"
)
GPU_OPERATOR_VALUES = (
    "https://github.com/NVIDIA/gpu-operator/blob/main/deployments/gpu-operator/values.yaml"
)
MIG_K8S = "https://docs.nvidia.com/datacenter/cloud-native/kubernetes/latest/index.html"
KUBE_RESERVED = "https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/"
GIB = 1024**3
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
MIG_DISABLED = "all-disabled"
OPERATOR_KINDS = frozenset(
    {"HelmRelease", "HelmValues", "Application", "ClusterPolicy", "GpuOperator"}
)


class GpuPools(list[GpuPool]):
    """The evaluation's described GPU pools (:func:`gpu_pools`) and, for each distinct pod
    selector, the pools it targets (:func:`targeted_pools`): matched once per selector
    and evaluation, held with the pools in the index, not on the pods."""

    __slots__ = ("matches",)

    def __init__(self, pools: Iterable[GpuPool] = ()) -> None:
        super().__init__(pools)
        self.matches: dict[str, Any] = {}
        """:func:`selector_key` -> the pools that selector targets."""


def gpu_pools(ctx: RuleContext) -> GpuPools:
    """Described GPU pools (node-group-derived duplicates dropped), once per evaluation."""
    pools: GpuPools = ctx.memo(
        "gpu_pools", lambda: GpuPools(p for p in pools_of(ctx.objects) if p.has_gpus)
    )
    return pools


def operators(ctx: RuleContext) -> list[GpuOperatorView]:
    """GPU Operator installations, once per evaluation."""
    found: list[GpuOperatorView] = ctx.memo("gpu_operators", lambda: operators_of(ctx.objects))
    return found


def operators_for(ctx: RuleContext, obj: K8sObject) -> list[GpuOperatorView]:
    """The GPU Operator installations *obj* is (raises UnknownInput when its chart or version
    is unknown during a preview, so the engine records "not evaluated")."""
    by_object: dict[int, list[GpuOperatorView]] = ctx.memo(
        "gpu_operators_by_object", lambda: _by_object(operators(ctx))
    )
    views = by_object.get(id(obj), [])
    if not views and obj.kind in OPERATOR_KINDS:
        # re-raises UnknownInput for an unreadable operator (its reason: which input)
        operator_view(obj, ctx.memo("values_sources", lambda: values_sources(ctx.objects)))
    return views


def _by_object(ops: Sequence[GpuOperatorView]) -> dict[int, list[GpuOperatorView]]:
    # Keyed by identity: the objects outlive the evaluation that holds this index.
    out: dict[int, list[GpuOperatorView]] = {}
    for op in ops:
        out.setdefault(id(op.obj), []).append(op)
    return out


def selector_key(pod: PodRef) -> str:
    """One string per distinct nodeSelector and required node affinity: Pods that select
    alike (a workload replicated over namespaces) share what depends only on these.
    ``repr`` keeps types apart (``1`` and ``'1'``) and names :data:`UNKNOWN` as itself."""
    return memoised(
        pod.memo,
        "selector_key",
        lambda: repr((pod.node_selector(), pod.required_affinity_terms())),
    )


def targeted_pools(pod: PodRef, pools: Sequence[GpuPool]) -> list[GpuPool]:
    """Pools whose node labels satisfy the pod's nodeSelector and required affinity.

    Matched once per distinct selector (:func:`selector_key`) and evaluation when *pools*
    is the evaluation's :func:`gpu_pools` (Pods that select alike, a workload replicated
    over namespaces, share the match); a copy is returned.
    """
    if type(pools) is GpuPools:
        return list(memoised(pools.matches, selector_key(pod), _match, pod, pools))
    return _match(pod, pools)


def _match(pod: PodRef, pools: Sequence[GpuPool]) -> list[GpuPool]:
    """The pools of *pools* *pod* selects."""
    selector, terms = pod.node_selector(), pod.required_affinity_terms()
    return [p for p in pools if pool_matches(selector, terms, p)]


def pool_label(pool: GpuPool) -> str:
    """``pool gpu-h100 (8 x NVIDIA-H100-80GB-HBM3)`` for messages."""
    models = pool.extra.get("gpuModels")
    several = "/".join(models) if isinstance(models, list) and models else None
    what = pool.gpu_product or pool.text("instanceType") or several or "GPUs"
    count = f"{pool.gpu_count} x " if pool.gpu_count else ""
    return f"pool {pool.name} ({count}{what})"


def gpu_requests(pod: PodRef, extra: Sequence[str] = ()) -> dict[str, Fraction]:
    """GPU resources of the pod's app containers by name (limits, requests as fallback).

    Read once per pod (``pod.memo``); a copy is returned.
    """
    return dict(memoised(pod.memo, ("gpu_requests", tuple(extra)), _gpu_requests, pod, extra))


def _gpu_requests(pod: PodRef, extra: Sequence[str]) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for c in pod.containers(init=False):
        limits, requests = c.resources("limits"), c.resources("requests")
        for name in {*limits, *requests}:
            if not is_gpu_resource(name, extra):
                continue
            raw = limits.get(name, requests.get(name))
            if raw is UNKNOWN:
                raise UnknownInput(f"{name} of {c.label}")
            value = parse_quantity(raw) or ZERO
            before = out.get(name)
            out[name] = value if before is None else before + value
    return {k: v for k, v in out.items() if v.numerator > 0}  # > 0: denominators are positive


def fmt_count(value: Fraction) -> str:
    """A whole number without a fraction part."""
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def gpu_model_of_pool(pool: GpuPool) -> GpuModel | None:
    """The catalogue GPU of a pool: its GFD product label, else its instance type, else
    the other GPU labels its nodes carry (:func:`gpu_model_of_labels`).

    Kept on the pool while the hardware catalogue is the one loaded (rules ask it for
    every pod x pool pair)."""
    catalog = catalogs.hardware()
    known = pool.memo.get("gpu_model_known")
    if known is not None and known[0] is catalog:
        found: GpuModel | None = known[1]  # read before without an unknown: the hot path
        return found
    cached = pool.memo.get("gpu_model")
    if cached is None or cached[0] is not catalog:
        cached = pool.memo["gpu_model"] = (catalog, {})
    entries: dict[str, Any] = cached[1]
    # memoised: a pool spec read during a preview may hold unknowns; each caller reads them
    model: GpuModel | None = memoised(entries, "found", lambda: _gpu_model_of_pool(pool))
    if type(entries["found"]) is not TAINTED:  # read without an unknown: kept bare
        pool.memo["gpu_model_known"] = (catalog, model)
    return model


def _gpu_model_of_pool(pool: GpuPool) -> GpuModel | None:
    if pool.gpu_product:
        found = catalogs.gpu_by_label(pool.gpu_product)
        if found is not None:
            return found
    name = pool.text("instanceType")
    if name:
        inst = catalogs.instance(name)
        if inst is not None:
            return catalogs.gpu_by_label(inst.gpu)
    return gpu_model_of_labels(pool.labels)[0]


def gpu_models_of_pool(pool: GpuPool, pod: PodRef | None = None) -> list[GpuModel] | str:
    """Every catalogue GPU a pool's nodes may carry (a Karpenter NodePool allowing several
    instance types may launch several models: a derived number must hold for each; *pod*'s
    selectors narrow them to the types it can get), or why none is known (the instance
    types it names that the catalogue lacks)."""
    unknown = pool.extra.get("unknownTypes")
    pinned = (
        pinned_types(pod.node_selector(), pod.required_affinity_terms())
        if pod is not None and unknown
        else None
    )
    # Types the catalogue lacks matter only where the Pod may get one: a Pod whose own
    # selectors name only catalogued types gets their GPUs, whatever else the pool launches.
    if unknown and not (pinned and all(catalogs.instance(t) is not None for t in pinned)):
        return (
            f"pool {pool.name} allows instance types the hardware catalogue does not know "
            f"({', '.join(unknown)})"
        )
    ids = pool.extra.get("gpuModels")
    if isinstance(ids, list) and ids:
        if pod is not None:
            types = launchable_types(pool, pod.node_selector(), pod.required_affinity_terms())
            insts = [catalogs.instance(t) for t in types]
            ids = sorted({i.gpu for i in insts if i is not None}) or ids
        found = [catalogs.gpu_by_label(i) for i in ids]
        return [g for g in found if g is not None]
    gpu = gpu_model_of_pool(pool)
    if gpu is None:
        what = pool.gpu_product or pool.text("instanceType")
        if pool.extra.get("source") == "NodePool" and not what:
            what = "its requirements match no catalogued AWS GPU instance type"
        near = catalogs.hardware().related_instances(what) if what else []
        hint = (
            f"; did you mean {' or '.join(near)}?"
            if near and what == pool.text("instanceType")
            else ""
        )
        return f"the GPU model of pool {pool.name} ({what}) is not in the hardware catalogue{hint}"
    return [gpu]


VKE_GPU_NAME = "machine.cluster.vke.volcengine.com/gpu-name"
"""Volcengine VKE's GPU-name node label (https://volcengine.com/docs/6460/1358690): the NVML
name with spaces as dashes (``NVIDIA-L20``, the GFD product form), the label AIBrix pins each
GPU type by (vllm-project/aibrix@c1610cd:docs/source/features/heterogeneous-gpu.rst).
A value that is no full product name (``Tesla-V100``: SXM2 or PCIe, 16 or 32 GB) resolves to
no one catalogue entry; the reason lists the variants it names (:func:`gpu_variants_named`)."""
# Node labels that name the GPU model (RULES.md "Where the inputs come from").
_GPU_NAME_LABELS = (
    "nvidia.com/gpu.product",
    "karpenter.k8s.aws/instance-gpu-name",
    "cloud.google.com/gke-accelerator",
    VKE_GPU_NAME,
)
GKE_GPUS = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#available_gpus"
# cloud.google.com/gke-accelerator values (the GPU names of GKE_GPUS) -> catalogue GPU.
_GKE_ACCELERATORS = {
    "nvidia-tesla-t4": "t4",
    "nvidia-tesla-v100": "v100-sxm-16gb",
    "nvidia-l4": "l4",
    "nvidia-tesla-a100": "a100-sxm-40gb",
    "nvidia-a100-80gb": "a100-sxm-80gb",
    "nvidia-h100-80gb": "h100-sxm-80gb",
    "nvidia-h100-mega-80gb": "h100-sxm-80gb",
    "nvidia-h200-141gb": "h200-sxm-141gb",
    "nvidia-b200": "b200",
}


def gpu_model_of_labels(labels: Mapping[str, Any]) -> tuple[GpuModel | None, str]:
    """The GPU model node labels name (GFD product, Karpenter GPU name, GKE accelerator,
    instance type), and the label that said so; ``(None, "")`` when none names one.

    The cluster profile's ``gpu_products`` come first: a site label it maps
    (``gpuspecs=A100_40GB``), or an instance type it names."""
    profile = active_profile()
    if profile is not None and profile.gpu_products:
        product = profile.gpu_of_labels(labels)
        inst_label = labels.get("node.kubernetes.io/instance-type")
        if product is None and isinstance(inst_label, str):
            product = profile.gpu_of_instance(inst_label)
        if product is not None:
            said = product.node_label or f"node.kubernetes.io/instance-type={inst_label}"
            return catalogs.gpu_by_label(product.gpu), f"{said} (cluster profile gpu_products)"
    for key in _GPU_NAME_LABELS:
        value = labels.get(key)
        if not isinstance(value, str):
            continue
        if key == "cloud.google.com/gke-accelerator":
            gpu_id = _GKE_ACCELERATORS.get(value)
            found = catalogs.gpu_by_label(gpu_id) if gpu_id else None
        else:
            found = catalogs.gpu_by_label(value)
        return found, f"{key}={value}"
    inst_name = labels.get("node.kubernetes.io/instance-type")
    if isinstance(inst_name, str):
        inst = catalogs.instance(inst_name)
        found = catalogs.gpu_by_label(inst.gpu) if inst is not None else None
        return found, f"node.kubernetes.io/instance-type={inst_name}"
    return None, ""


def gpu_variants_named(value: str) -> list[GpuModel]:
    """The catalogued GPUs a family value names (``Tesla-V100``: every GPU whose GFD product
    starts ``Tesla-V100-``, the SXM2/PCIe and 16/32 GB variants), by id; empty when it names
    none, is a full product name, or names no model (``NVIDIA``: any GPU, not a family)."""
    prefix = value.strip().lower() + "-"
    if not any(c.isdigit() for c in prefix):
        return []
    found = {
        g.id: g
        for g in catalogs.hardware().gpus.values()
        if any(p.lower().startswith(prefix) for p in g.gfd_products)
    }
    return [found[k] for k in sorted(found)]


def gpu_model_of_selectors(pod: PodRef) -> tuple[GpuModel | None, str]:
    """The GPU model a pod pins by node selector/affinity, and the label that said so.

    Returns ``(None, "")`` when the pod names no GPU model (no catalogue look-up then).
    Without such a label, a DRA claim's ``productName`` CEL selector names it.
    """
    gpu, where = gpu_model_of_labels(pod.selected_labels())
    if gpu is None and not where:
        product = next(iter(claimed_products(pod)), None)
        if product is not None:
            return catalogs.gpu_by_label(product), f"DRA claim selector productName={product}"
    return gpu, where


@dataclass(frozen=True, slots=True)
class Driver:
    """The NVIDIA driver on a pool's nodes and where that is stated."""

    version: str | None
    where: str
    """``preinstalled in the node image (AL2023_x86_64_NVIDIA)`` / ``installed by ...``."""


def operator_driver(op: GpuOperatorView) -> Driver:
    """The driver an operator installs: ``driver.version`` or the release's chart default."""
    stated = op.component_version("driver")
    if stated:
        return Driver(stated, f"installed by {op.label}, driver.version")
    release = catalogs.operator_release(op.version)
    if release is None:
        reason = (
            f"{op.label} is not in the compatibility catalogue"
            if op.version
            else "the GPU Operator's release is not stated"
        )
        return Driver(
            None, f"installed by the GPU Operator, whose chart default is unknown: {reason}"
        )
    return Driver(release.default_driver, f"installed by {op.label}, its chart default")


def pool_driver(
    pool: GpuPool | None,
    ops: Sequence[GpuOperatorView],
    drivers: Sequence[NvidiaDriverView] = (),
) -> Driver | None:
    """The driver on a pool's nodes (``None``: nothing states one).

    A node image that ships the driver keeps it (the operator's driver container does not
    replace a loaded host driver); otherwise an ``NVIDIADriver`` CR whose nodeSelector picks
    the pool's nodes, else the operator with ``driver.enabled``, installs its own.
    """
    if pool is not None and pool.from_nodes and pool.driver_version:
        read = pool.extra.get("driverSource")  # the node image's release, when no GFD label
        return Driver(
            pool.driver_version,
            f"preinstalled in the node image ({read})"
            if isinstance(read, str)
            else "GFD labels nvidia.com/cuda.driver.* on its Nodes",
        )
    if pool is not None and pool.extra.get("source") == "ClusterProfile" and pool.driver_version:
        return Driver(pool.driver_version, "stated in the cluster profile")
    if pool is not None and pool.driver_preinstalled:
        image = f" {pool.ami_type}" if pool.ami_type else ""
        read = pool.extra.get("driverSource")
        source = f" ({read})" if isinstance(read, str) else ""
        return Driver(pool.driver_version, f"preinstalled in the node image{image}{source}")
    labels = pool.labels if pool is not None else {}
    for cr in drivers:  # NVIDIADriver CRs: one driver per node selector
        if cr.driver_type == "gpu" and (cr.selects(labels) if pool else not cr.node_selector):
            if cr.version:
                return Driver(cr.version, cr.where)
            fallback = operator_driver(ops[0]) if ops else None
            return Driver(
                fallback.version if fallback else None,
                f"installed by {cr.obj.resource}, no spec.version: "
                + (fallback.where if fallback else "the operator's default, not stated"),
            )
    installing = [op for op in ops if op.enabled("driver")]
    if installing:
        return operator_driver(installing[0])
    if pool is not None and pool.driver_version:
        return Driver(pool.driver_version, f"stated for pool {pool.name}")
    return None


def driver_on(ctx: RuleContext, pool: GpuPool | None) -> Driver | None:
    """:func:`pool_driver` for *pool* with this evaluation's operators, once per pool."""
    return drivers_on(ctx)(pool)


def drivers_on(ctx: RuleContext) -> Callable[[GpuPool | None], Driver | None]:
    """:func:`driver_on` for many pools (a check that walks pods x pools): the
    evaluation's per-pool drivers fetched once."""
    drivers: dict[int, Driver | None] = ctx.memo("pool_drivers", dict)

    def on(pool: GpuPool | None) -> Driver | None:
        key = id(pool)
        if key not in drivers:
            crs: list[NvidiaDriverView] = ctx.memo(
                "nvidia_driver_crs", lambda: nvidia_drivers_of(ctx.objects)
            )
            drivers[key] = pool_driver(pool, operators(ctx), crs)
        return drivers[key]

    return on


def tolerations_of(pod: PodRef) -> list[Mapping[str, Any]]:
    """The pod's tolerations."""
    return [
        t for t in as_list(pod.spec.get("tolerations"), "tolerations") if isinstance(t, Mapping)
    ]


def mig_config(pool: GpuPool) -> str | None:
    """The pool's ``nvidia.com/mig.config`` label (``None``: MIG off, the operator's
    ``all-disabled`` default, controllers/nodelabeling_controller.go)."""
    value = pool.labels.get(MIG_CONFIG_LABEL)
    if not value or value == MIG_DISABLED:
        return None
    return value


def kubelet_of(pool: GpuPool) -> Mapping[str, Any] | None:
    """The pool's ``spec.kubelet`` mapping, or ``None`` when not described."""
    raw = pool.extra.get("kubelet")
    if raw is UNKNOWN:
        raise UnknownInput(f"spec.kubelet of {pool.obj.resource}")
    return as_map(raw, "kubelet") if isinstance(raw, Mapping) else None


def cluster_gpu_sharing(ctx: RuleContext) -> Sharing | None:
    """The device plugin's cluster-wide sharing of ``nvidia.com/gpu`` (time-slicing or MPS
    replicas), from the GPU Operator, the device plugin chart or a ConfigMap; once per
    evaluation (:mod:`gpustrata_policies.view.device_plugin`)."""
    found: Sharing | None = ctx.memo(
        "device_plugin_sharing", lambda: cluster_sharing(ctx.objects, operators(ctx))
    )
    return found


def config_map_time_slicing(ctx: RuleContext) -> tuple[int, str] | None:
    """Cluster-wide time-slicing of the device plugin: (replicas per GPU, where it is set)."""
    found = cluster_gpu_sharing(ctx)
    if found is None or found.strategy != "time-slicing":
        return None
    return found.replicas, found.where


def shared_gpus(ctx: RuleContext, pool: GpuPool) -> str | None:
    """Why the pool's nodes may advertise more ``nvidia.com/gpu`` than they hold (MIG
    slices, time-slicing or MPS replicas), or ``None`` when nothing in the input says so."""
    if mig_config(pool):
        return f"{MIG_CONFIG_LABEL}={mig_config(pool)}"
    for label in (STRATEGY_LABEL, REPLICAS_LABEL):
        if pool.labels.get(label) not in (None, "", "none", "1"):
            return f"{label}={pool.labels[label]}"
    for op in operators(ctx):
        name = op.value("devicePlugin", "config", "name")
        if name:
            return f"{op.label} mounts device-plugin config {name}"
    sharing = cluster_gpu_sharing(ctx)
    return sharing.where if sharing else None


# --------------------------------------------------------------------------- admission

EKS_ADMISSION = "https://docs.aws.amazon.com/eks/latest/userguide/platform-versions.html"
GKE_ADMISSION = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus"
AKS_ADMISSION = (
    "https://learn.microsoft.com/en-us/azure/aks/faq#what-kubernetes-admission-controllers-"
    "does-aks-support-can-admission-controllers-be-added-or-removed"
)
"""AKS lists ExtendedResourceToleration among its admission controllers, a list users cannot
change (MicrosoftDocs/azure-aks-docs@fb060abe articles/aks/faq.yml)."""
K8S_DEFAULT_ADMISSION = (
    "https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/"
    "#which-plugins-are-enabled-by-default"
)
EXTENDED_RESOURCE_TOLERATION = "https://github.com/kubernetes/kubernetes/pull/55839"
KUBEADM_SOCKET_ANNOTATION = "kubeadm.alpha.kubernetes.io/cri-socket"
"""The annotation kubeadm writes on every Node it joins."""


@dataclass(frozen=True, slots=True)
class Admission:
    """What the input says about the cluster's admission of GPU Pods.

    ``extended_resource_toleration``: the ExtendedResourceToleration admission plugin,
    which gives a Pod requesting extended resource R the toleration ``{key: R, operator:
    Exists, effect: NoSchedule}`` (kubernetes/kubernetes#55839), is on (``True``: EKS on
    every platform version, GKE, AKS), off (``False``: a self-managed control plane with the
    Kubernetes defaults, which leave it off), or not known (``None``).
    """

    flavour: str
    """``EKS``, ``GKE``, ``AKS``, ``kubeadm``, or ``""`` when nothing says."""
    evidence: str
    extended_resource_toleration: bool | None

    @property
    def known(self) -> bool:
        """The admission behaviour is known (on or off)."""
        return self.extended_resource_toleration is not None


UNKNOWN_ADMISSION = Admission("", "", None)

_DISTRIBUTIONS: Mapping[str, tuple[str, bool | None]] = {
    "eks": ("EKS", True),  # EKS_ADMISSION
    "gke": ("GKE", True),  # GKE_ADMISSION
    "aks": ("AKS", True),  # AKS_ADMISSION
    "kubeadm": ("kubeadm", False),  # K8S_DEFAULT_ADMISSION: not among the defaults
}
"""A cluster profile's ``distribution`` -> (flavour, ExtendedResourceToleration on?), for
the distributions whose default the pages above state; others are unknown unless the
profile states ``admission.extended_resource_toleration``."""


def _node_flavour(obj: K8sObject) -> Admission | None:
    labels = as_map(obj.labels, "metadata.labels")
    where = f"{obj.resource}"
    for key in labels:
        text = str(key)
        if text.startswith(("eks.amazonaws.com/", "karpenter.k8s.aws/")):
            return Admission("EKS", f"{where} label {text}", True)
        if text.startswith("cloud.google.com/gke-"):
            return Admission("GKE", f"{where} label {text}", True)
        if text.startswith("kubernetes.azure.com/"):
            return Admission("AKS", f"{where} label {text}", True)
    annotations = as_map(dig(obj.raw, "metadata", "annotations"), "metadata.annotations")
    if KUBEADM_SOCKET_ANNOTATION in annotations:
        return Admission("kubeadm", f"{where} annotation {KUBEADM_SOCKET_ANNOTATION}", False)
    return None


def object_distribution(obj: K8sObject) -> str | None:
    """The distribution an object shows (``eks``, ``gke``, ``aks``, ``kubeadm``: a Node's
    labels or annotation, Karpenter's AWS objects), for a cluster profile; ``None``."""
    found = _object_flavour(obj)
    return found.flavour.lower() if found is not None else None


def _object_flavour(obj: K8sObject) -> Admission | None:
    if obj.kind == "Node":
        return _node_flavour(obj)
    if obj.kind == "EC2NodeClass" and obj.api_version.startswith("karpenter.k8s.aws/"):
        return Admission("EKS", f"{obj.resource} (Karpenter's AWS provider)", True)
    if obj.kind == "NodePool" and obj.api_version.startswith("karpenter.sh/"):
        ref = as_map(dig(obj.raw, "spec", "template", "spec", "nodeClassRef"), "nodeClassRef")
        group = ref.get("group")  # v1; v1beta1 names apiVersion karpenter.k8s.aws/v1beta1
        version = ref.get("apiVersion")
        if group == "karpenter.k8s.aws" or ref.get("kind") == "EC2NodeClass":
            return Admission("EKS", f"{obj.resource} nodeClassRef {group or ref['kind']}", True)
        if isinstance(version, str) and version.startswith("karpenter.k8s.aws/"):
            return Admission("EKS", f"{obj.resource} nodeClassRef {version}", True)
    if obj.kind == "GpuNodePool":
        ami = dig(obj.raw, "spec", "amiType")
        if isinstance(ami, str) and ami:
            return Admission("EKS", f"{obj.resource} spec.amiType {ami}", True)
        source = dig(obj.raw, "metadata", "annotations", DERIVED_FROM)
        if isinstance(source, str) and source.startswith("aws:eks"):
            return Admission("EKS", f"{obj.resource} ({source})", True)
    return None


def cluster_admission(ctx: RuleContext, pod: PodRef | None = None) -> Admission:
    """The cluster's admission as the input shows it (EKS node labels, Karpenter's
    ``karpenter.k8s.aws`` objects, the stack's EKS pools, GKE/AKS labels, kubeadm's Node
    annotation), else the GKE or AKS labels *pod* selects; once per evaluation."""

    def build() -> Admission:
        profile = active_profile()
        if profile is not None:
            stated = profile.admission.extended_resource_toleration
            flavour, default = _DISTRIBUTIONS.get(profile.distribution, ("", None))
            if stated is not None:
                return Admission(
                    flavour or profile.distribution,
                    "cluster profile admission.extended_resource_toleration",
                    stated,
                )
            if default is not None:
                return Admission(
                    flavour, f"cluster profile distribution {profile.distribution}", default
                )
        for obj in ctx.objects:
            found = _object_flavour(obj)
            if found is not None:
                return found
        return UNKNOWN_ADMISSION

    found: Admission = ctx.memo("cluster_admission", build)
    if found.flavour or pod is None:
        return found
    for key in pod.selected_labels():  # gke-accelerator, gke-nodepool, compute-class, ...
        if str(key).startswith("cloud.google.com/"):
            return Admission("GKE", f"the pod selects {key}", True)
        if str(key).startswith("kubernetes.azure.com/"):  # AKS-reserved (agentpool, ...)
            return Admission("AKS", f"the pod selects {key}", True)
    return found


def admitted_tolerations(admission: Admission, resources: Iterable[str]) -> list[dict[str, str]]:
    """The tolerations the cluster's admission adds to a Pod requesting *resources*."""
    if not admission.extended_resource_toleration:
        return []
    return [{"key": r, "operator": "Exists", "effect": "NoSchedule"} for r in sorted(resources)]
