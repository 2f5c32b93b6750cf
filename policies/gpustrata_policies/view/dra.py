"""GPUs allocated by Dynamic Resource Allocation (``resource.k8s.io``), as rules see them.

A Pod asks the NVIDIA DRA driver for GPUs through ``spec.resourceClaims`` (each names a
``ResourceClaimTemplate`` or a ``ResourceClaim``) and a container's ``resources.claims``.
The claim's device requests say how many devices of which DeviceClass:

* ``resource.k8s.io/v1``: ``spec.devices.requests[].exactly`` with ``deviceClassName``,
  ``allocationMode`` (``ExactCount``, the default, or ``All``) and ``count`` (default 1)
  (kubernetes@v1.34.0:staging/src/k8s.io/api/resource/v1/types.go, ExactDeviceRequest);
* ``v1beta1``: the same fields directly on the request.

Only requests on the ``gpu.nvidia.com`` DeviceClass the driver's chart creates
(k8s-dra-driver-gpu@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/templates/
deviceclass-gpu.yaml) count as GPUs. A CEL selector of the simple form
``device.attributes['gpu.nvidia.com'].productName == '<NVML name>'`` names the GPU model
(the driver publishes the NVML device name as ``productName``,
k8s-dra-driver-gpu@v25.12.0:cmd/gpu-kubelet-plugin/deviceinfo.go).

:func:`attach_claims` indexes an evaluation's claims once; :meth:`ContainerRef.resources`
then reports a container's claimed GPUs as ``nvidia.com/gpu``, so every rule that counts
GPUs (V001, K005, R001, R003, the capacity rules) counts them the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpustrata.core.contract import DRA_GPU_DEVICE_CLASS
from gpustrata.core.quantity import ZERO, exact_sum, parse_quantity
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.view.objects import (
    CLAIM_SOURCES,
    K8sObject,
    PodRef,
    as_list,
    as_map,
    dig,
)
from gpustrata_policies.view.pools import GpuPool, matches_selectors

__all__ = [
    "CLAIM_KINDS",
    "DRA_DRIVER_CHART",
    "DRA_DRIVER_CHARTS",
    "GPU_CLUSTER_KIND",
    "GPU_DEVICE_CLASS",
    "OPERATOR_DRA_LABEL",
    "ClaimedGpus",
    "DraDriverView",
    "attach_claims",
    "claim_gpus",
    "claimed_products",
    "dra_driver_view",
]

DRA_GROUP = "resource.k8s.io"
CLAIM_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim"})
GPU_DEVICE_CLASS = DRA_GPU_DEVICE_CLASS
DRA_DRIVER_CHART = "nvidia-dra-driver-gpu"
"""The NVIDIA DRA driver's Helm chart (k8s-dra-driver-gpu@v25.12.0: Chart.yaml name)."""
DRA_DRIVER_CHARTS = (DRA_DRIVER_CHART, "dra-driver-nvidia-gpu")
"""Both names of the driver's chart: NVIDIA's, and the one under kubernetes-sigs
(kubernetes-sigs/dra-driver-nvidia-gpu@v0.4.1:deployments/helm/dra-driver-nvidia-gpu/
Chart.yaml ``name: dra-driver-nvidia-gpu``, published to
``oci://registry.k8s.io/dra-driver-nvidia/charts`` and NGC: docs/install.md, docs/upgrade.md
there); its values keep the same keys (``resources.gpus.enabled``,
``gpuResourcesEnabledOverride``, ``kubeletPlugin``: values.yaml at that tag)."""
GPU_CLUSTER_KIND = "GPUCluster"
"""The GPU Operator's DRA enablement CR (nvidia.com/v1alpha1; NVIDIA/gpu-operator@v26.7.0:
api/nvidia/v1alpha1/gpucluster_types.go), rendered by its chart when
``gpuCluster.deployCR`` is true (deployments/gpu-operator/templates/gpucluster.yaml)."""
OPERATOR_DRA_LABEL = "nvidia.com/gpu.deploy.dra-driver"
"""The node label the GPU Operator's DRA kubelet plugin DaemonSet selects
(NVIDIA/gpu-operator@v26.7.0:manifests/state-dra-driver/0500_daemonset.yaml nodeSelector
``nvidia.com/gpu.deploy.dra-driver: "true"``, on GPU nodes by NFD's pci-10de label)."""

_PRODUCT = re.compile(
    r"""^\s*device\.attributes\[['"]gpu\.nvidia\.com['"]\]\.productName\s*==\s*['"]([^'"]+)['"]\s*$"""
)


@dataclass(frozen=True, slots=True)
class ClaimedGpus:
    """The GPUs one claim (or claim template) asks for, per device request."""

    requests: Mapping[str, Fraction]
    """Request name -> GPUs on the ``gpu.nvidia.com`` DeviceClass."""
    products: Mapping[str, str]
    """Request name -> the GPU product its CEL selector pins (GFD label spelling)."""

    def count(self, request: str | None = None) -> Fraction:
        """GPUs of one request (``None``: all of them)."""
        if request:
            return self.requests.get(request, ZERO)
        return exact_sum(self.requests.values())


def claim_gpus(obj: K8sObject) -> ClaimedGpus | None:
    """The GPUs a ResourceClaim / ResourceClaimTemplate asks for (``None``: not one).

    Raises :class:`UnknownInput` when its device requests are unknown (preview).
    """
    if obj.kind not in CLAIM_KINDS or not obj.api_version.startswith(f"{DRA_GROUP}/"):
        return None
    spec = dig(obj.raw, "spec", "spec") if obj.kind == "ResourceClaimTemplate" else None
    if obj.kind == "ResourceClaim":
        spec = dig(obj.raw, "spec")
    if spec is UNKNOWN:
        raise UnknownInput(f"spec of {obj.resource}")
    requests: dict[str, Fraction] = {}
    products: dict[str, str] = {}
    items = as_list(dig(spec, "devices", "requests"), f"devices.requests of {obj.resource}")
    for index, raw in enumerate(items):
        if raw is UNKNOWN:
            raise UnknownInput(f"devices.requests[{index}] of {obj.resource}")
        if not isinstance(raw, Mapping):
            continue
        exact = raw.get("exactly")
        if exact is None and raw.get("firstAvailable") is not None:
            # Alternatives the scheduler picks among: the count is whichever fits.
            alternatives = as_list(raw.get("firstAvailable"), "firstAvailable")
            if any(
                not isinstance(a, Mapping)
                or a.get("deviceClassName") in (GPU_DEVICE_CLASS, UNKNOWN)
                for a in alternatives
            ):
                raise UnknownInput(
                    f"devices.requests[{index}] of {obj.resource} (firstAvailable: the GPU "
                    "count is whichever alternative the scheduler allocates)"
                )
            continue
        req = as_map(exact, f"exactly of {obj.resource}") if exact is not None else raw
        device_class = as_map(req, "request").get("deviceClassName")
        if device_class is UNKNOWN or raw.get("name") is UNKNOWN:
            raise UnknownInput(f"devices.requests[{index}] of {obj.resource}")
        if device_class != GPU_DEVICE_CLASS:
            continue
        mode = req.get("allocationMode", "ExactCount")
        count = parse_quantity(req.get("count", 1)) if mode == "ExactCount" else None
        if mode is UNKNOWN or req.get("count") is UNKNOWN:
            raise UnknownInput(f"devices.requests[{index}].count of {obj.resource}")
        if count is None:  # allocationMode All: every matching GPU of the node, no count
            raise UnknownInput(
                f"devices.requests[{index}] of {obj.resource} (allocationMode {mode}: every "
                "matching GPU of the node, not a count)"
            )
        name = str(raw.get("name", index))
        requests[name] = Fraction(count)
        for sel in as_list(req.get("selectors"), "selectors"):
            match = _PRODUCT.match(str(dig(sel, "cel", "expression") or ""))
            if match:
                products[name] = match.group(1).replace(" ", "-")
    return ClaimedGpus(requests, products)


UNRESOLVED = ("*", "*", "*")
"""Index key present when some object may be a claim that cannot be named (preview)."""


def _unknown_identity(obj: K8sObject) -> bool:
    meta = obj.raw.get("metadata")
    if meta is UNKNOWN or obj.raw.get("apiVersion") is UNKNOWN:
        return True
    return isinstance(meta, Mapping) and any(
        meta.get(k) is UNKNOWN for k in ("name", "generateName", "namespace")
    )


def attach_claims(objects: Iterable[K8sObject]) -> None:
    """Index the evaluation's claims and claim templates on every object, so that a
    container reads the GPUs its ``resources.claims`` reference (once per evaluation)."""
    objects = list(objects)
    index: dict[tuple[str, str, str], Any] = {}
    for obj in objects:
        raw_kind = obj.raw.get("kind")
        if raw_kind is UNKNOWN or (raw_kind in CLAIM_KINDS and _unknown_identity(obj)):
            # It may be any claim: a reference the index cannot resolve stays unknown.
            index[UNRESOLVED] = UNKNOWN
            continue
        if obj.kind not in CLAIM_KINDS:
            continue
        try:
            found: Any = claim_gpus(obj)
        except UnknownInput:
            found = UNKNOWN
        if found is not None:
            index[(obj.kind, obj.namespace, obj.name)] = found
    if index:
        for obj in objects:
            obj.claims = index


def claimed_products(pod: PodRef) -> list[str]:
    """The GPU products (GFD label spelling) the pod's DRA claims pin by CEL selector."""
    out: list[str] = []
    for claim in as_list(pod.spec.get("resourceClaims"), f"resourceClaims of {pod.obj.resource}"):
        if not isinstance(claim, Mapping):
            continue
        for key, kind in CLAIM_SOURCES:
            name = claim.get(key)
            found = (
                pod.obj.claims.get((kind, pod.obj.namespace, name))
                if isinstance(name, str)
                else None
            )
            if isinstance(found, ClaimedGpus):
                out += [p for p in found.products.values() if p not in out]
    return out


DRA_DRIVER_VALUES = (
    "https://github.com/NVIDIA/k8s-dra-driver-gpu/blob/v25.12.0/deployments/helm/"
    "nvidia-dra-driver-gpu/values.yaml"
)
# Labels NFD and GFD put on every NVIDIA GPU node: the kubelet plugin's default affinity
# (values.yaml kubeletPlugin.affinity) selects nodes by them.
_GPU_NODE_LABELS = {
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA",
    "nvidia.com/gpu.present": "true",
}


@dataclass(frozen=True, slots=True)
class DraDriverView:
    """One installation of the NVIDIA DRA driver (its Helm release), in values spelling."""

    obj: K8sObject
    values: Mapping[str, Any]
    version: str | None
    operator: bool = False
    """Installed by the GPU Operator (its GPUCluster CR, ``draDriver`` values), not by the
    driver's own chart."""

    @property
    def label(self) -> str:
        """``NVIDIA DRA driver 25.12.0`` for messages."""
        if self.operator:
            named = f" {self.version}" if self.version else ""
            return f"the NVIDIA DRA driver{named} of the GPU Operator's GPUCluster"
        return f"NVIDIA DRA driver {self.version}" if self.version else "NVIDIA DRA driver"

    @property
    def default_placement(self) -> bool:
        """The kubelet plugin runs on every GPU node (no nodeSelector or required affinity
        of the user's; the GPU Operator's: unless a node is labelled
        ``nvidia.com/gpu.deploy.dra-driver=false``)."""
        if self.operator:
            return True
        plugin = as_map(self.values.get("kubeletPlugin"), f"kubeletPlugin of {self.obj.resource}")
        if plugin.get("nodeSelector") is UNKNOWN or plugin.get("affinity") is UNKNOWN:
            raise UnknownInput(f"kubeletPlugin placement of {self.obj.resource}")
        return not plugin.get("nodeSelector") and not plugin.get("affinity")

    @property
    def allocates_gpus(self) -> bool:
        """``resources.gpus.enabled`` (chart default true): the driver publishes the GPUs
        (the GPU Operator always deploys the gpus capability: values.yaml ``draDriver.gpus``
        at v26.7.0)."""
        if self.operator:
            return True
        value = dig(self.values, "resources", "gpus", "enabled")
        if value is UNKNOWN:
            raise UnknownInput(f"resources.gpus.enabled of {self.obj.resource}")
        return value is not False and str(value).lower() != "false"

    def runs_on(self, pool: GpuPool) -> bool:
        """Does the kubelet plugin DaemonSet land on the pool's nodes (its nodeSelector and
        required node affinity; the chart's default affinity selects every GPU node)?"""
        if self.operator:
            return str(pool.labels.get(OPERATOR_DRA_LABEL, "true")).lower() != "false"
        plugin = as_map(self.values.get("kubeletPlugin"), f"kubeletPlugin of {self.obj.resource}")
        selector = as_map(plugin.get("nodeSelector"), "kubeletPlugin.nodeSelector")
        terms = dig(
            plugin,
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        )
        if terms is UNKNOWN or any(v is UNKNOWN for v in selector.values()):
            raise UnknownInput(f"kubeletPlugin placement of {self.obj.resource}")
        exprs = [
            [
                e
                for e in as_list(dig(t, "matchExpressions"), "matchExpressions")
                if isinstance(e, Mapping)
            ]
            for t in as_list(terms, "nodeSelectorTerms")
        ]
        return matches_selectors(selector, exprs, {**_GPU_NODE_LABELS, **pool.labels})


def dra_driver_view(obj: K8sObject) -> DraDriverView | None:
    """*obj* as an NVIDIA DRA driver Helm release (Pulumi ``spec.chart`` or Flux
    ``spec.chart.spec.chart``, either chart name) or the GPU Operator's GPUCluster CR, or
    ``None``."""
    if obj.kind == GPU_CLUSTER_KIND and obj.api_version.startswith("nvidia.com/"):
        spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
        dra = as_map(spec.get("draDriver"), f"spec.draDriver of {obj.resource}")
        version = dra.get("version")
        return DraDriverView(obj, dra, version if isinstance(version, str) else None, True)
    if obj.kind != "HelmRelease":
        return None
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    chart = spec.get("chart")
    if chart is UNKNOWN:
        raise UnknownInput(f"spec.chart of {obj.resource}")
    version = spec.get("version")
    if isinstance(chart, Mapping):
        inner = as_map(chart.get("spec"), "spec.chart.spec")
        chart, version = inner.get("chart"), inner.get("version")
    if not isinstance(chart, str) or chart.rstrip("/").rsplit("/", 1)[-1] not in DRA_DRIVER_CHARTS:
        return None
    values = as_map(spec.get("values"), f"spec.values of {obj.resource}")
    return DraDriverView(obj, values, version if isinstance(version, str) else None)
