"""GPU node pools as rules see them, plus taint/toleration/selector matching.

Users describe pools in manifests as::

    apiVersion: gpustrata.io/v1alpha1
    kind: GpuNodePool
    metadata: {name: h100}
    spec:
      instanceType: p5.48xlarge
      gpuProduct: NVIDIA-H100-80GB-HBM3      # GPU Feature Discovery label value
      gpuCount: 8
      cpu: 192                                # vCPUs
      memoryMiB: 2097152
      labels: {workload: llm}
      taints: [{key: nvidia.com/gpu, value: "true", effect: NO_SCHEDULE}]
      kubelet: {systemReserved: {}, kubeReserved: {}, evictionHard: {}, maxPods: 100}
      minSize: 0
      maxSize: 4
      kubernetesVersion: "1.34"                # kubelet minor of the nodes
      amiType: AL2023_x86_64_NVIDIA            # EKS node image (ships the NVIDIA driver)
      driverPreinstalled: true                 # default: from amiType
      driverVersion: "580.173.02"              # the node image's driver
      diskSizeGiB: 200                         # root volume (container layers, downloads)

A pool converted from an ``aws:eks/nodeGroup:NodeGroup`` carries the annotation
``gpustrata.io/derived-from``; a described pool of the same name replaces it.

``Node`` objects (``kubectl get nodes -o yaml``) are pools too: Nodes group by their pool
label (:data:`NODE_POOL_LABELS`: EKS node group, Karpenter NodePool, GKE node pool, AKS
agent pool), else by identical GPU shape, and a group reads what its Nodes show:
:func:`node_pools`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpustrata.core.contract import DERIVED_FROM_ANNOTATION as DERIVED_FROM
from gpustrata.core.quantity import parse_number
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig

__all__ = [
    "DERIVED_FROM",
    "NODE_POOL_LABELS",
    "GpuPool",
    "ami_ships_driver",
    "launchable_types",
    "matches_selectors",
    "node_pools",
    "normalise_effect",
    "pool_label_sets",
    "pool_matches",
    "pools_of",
    "tolerates",
]

"""Annotation on pool objects converted from a cloud node group (a description wins)."""

# EKS amiType values (API_Nodegroup amiType): which node images ship the NVIDIA driver.
_AMI_WITH_NVIDIA_DRIVER = frozenset(
    {
        "AL2_x86_64_GPU",
        "AL2023_x86_64_NVIDIA",
        "AL2023_ARM_64_NVIDIA",
        "BOTTLEROCKET_x86_64_NVIDIA",
        "BOTTLEROCKET_ARM_64_NVIDIA",
    }
)
_AMI_WITHOUT_NVIDIA_DRIVER = frozenset(
    {
        "AL2_x86_64",
        "AL2_ARM_64",
        "AL2023_x86_64_STANDARD",
        "AL2023_ARM_64_STANDARD",
        "AL2023_x86_64_NEURON",
        "BOTTLEROCKET_x86_64",
        "BOTTLEROCKET_ARM_64",
        "BOTTLEROCKET_x86_64_FIPS",
        "BOTTLEROCKET_ARM_64_FIPS",
    }
)


def ami_ships_driver(ami_type: object) -> bool | None:
    """Does an EKS node image (``amiType``) ship the NVIDIA driver? ``None``: unknown/custom."""
    if not isinstance(ami_type, str):
        return None
    if ami_type in _AMI_WITH_NVIDIA_DRIVER:
        return True
    if ami_type in _AMI_WITHOUT_NVIDIA_DRIVER:
        return False
    return None


_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}
# Labels every node has whatever its pool; a pool description need not list them.
_UBIQUITOUS = frozenset(
    {
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def normalise_effect(effect: object) -> str:
    """EKS ``NO_SCHEDULE`` -> Kubernetes ``NoSchedule``; others unchanged."""
    text = str(effect or "")
    return _EFFECTS.get(text, text)


@dataclass(frozen=True, slots=True)
class GpuPool:
    """A node pool with the labels its nodes carry and its taints."""

    obj: K8sObject
    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    gpu_count: int | None
    gpu_product: str | None
    max_size: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """What the view derived from this pool, read once (its catalogue GPU); not copied by
    :func:`dataclasses.replace`."""

    @property
    def hard_taints(self) -> list[dict[str, str]]:
        """Taints that keep pods off (NoSchedule, NoExecute)."""
        return [t for t in self.taints if t["effect"] in {"NoSchedule", "NoExecute"}]

    @property
    def has_gpus(self) -> bool:
        """A GPU pool: declares GPUs or a GPU product (a Karpenter NodePool: its requirements,
        taint or limits name GPUs)."""
        return bool(self.gpu_count) or bool(self.gpu_product) or bool(self.extra.get("gpuSigns"))

    def text(self, key: str) -> str | None:
        """A string field of the pool's spec (numbers as text), else ``None``."""
        value = self.extra.get(key)
        if isinstance(value, bool) or value is None:
            return None
        return str(value) if isinstance(value, str | int | float) else None

    @property
    def kubernetes_version(self) -> str | None:
        """Kubernetes minor of the pool's nodes (``spec.kubernetesVersion``)."""
        return self.text("kubernetesVersion")

    @property
    def ami_type(self) -> str | None:
        """EKS ``amiType`` of the node image (``spec.amiType``)."""
        return self.text("amiType")

    @property
    def driver_preinstalled(self) -> bool | None:
        """Does the node image ship the NVIDIA driver? Stated, else from ``amiType``."""
        stated = self.extra.get("driverPreinstalled")
        if isinstance(stated, bool):
            return stated
        return ami_ships_driver(self.ami_type)

    @property
    def driver_version(self) -> str | None:
        """Version of the driver in the node image (``spec.driverVersion``)."""
        return self.text("driverVersion")

    @property
    def from_nodes(self) -> bool:
        """Read from ``Node`` objects (:func:`node_pools`), not described."""
        return self.extra.get("source") == "Node"

    @property
    def derived(self) -> bool:
        """Converted from a cloud node group rather than described."""
        annotations = self.obj.raw.get("metadata", {})
        annotations = annotations.get("annotations") if isinstance(annotations, Mapping) else None
        return isinstance(annotations, Mapping) and DERIVED_FROM in annotations


_MAX_COUNT = 1_000_000
"""The largest node or GPU count read: more is no cluster (``maxSize: 1e308``)."""


def _int(value: object) -> int | None:
    """A count (``4``, ``"4"``, ``4.0`` as CrossGuard sends numbers): a whole number from 0
    to :data:`_MAX_COUNT`, else ``None`` (unstated), the same from a manifest and from the
    pack (``-1e308`` was an OverflowError over gRPC and "no maxSize" in ``check``)."""
    number = parse_number(value) if isinstance(value, int | float | str) else None
    if number is None or number.denominator != 1 or not 0 <= number <= _MAX_COUNT:
        return None
    return int(number)


def _catalogued_gpus(
    instance_type: str, count: int | None, product: object
) -> tuple[int | None, object]:
    """A described pool's GPU count and GFD product, the unstated ones from the hardware
    catalogue's entry for its instance type (a pool described by ``instanceType`` alone is
    a GPU pool when the catalogue says the type has GPUs)."""
    instance = catalogs.instance(instance_type)
    if instance is None or not instance.gpu_count:
        return count, product
    if count is None:
        count = instance.gpu_count
    if not isinstance(product, str):
        gpu = catalogs.hardware().gpu(instance.gpu)
        product = gpu.gfd_products[0] if gpu is not None and gpu.gfd_products else product
    return count, product


def pools_of(objects: Iterable[K8sObject]) -> list[GpuPool]:
    """Every ``GpuNodePool`` object, normalised, the Karpenter NodePools
    (:func:`~gpustrata_policies.view.karpenter.karpenter_pools`) and the pools of the
    ``Node`` objects (:func:`node_pools`); a pool derived from a node group, or read from
    Nodes, is dropped when a described pool has the same name (``gpustrata plan`` registers
    both)."""
    objects = list(objects)
    pools = []
    for obj in objects:
        if obj.kind != "GpuNodePool":
            continue
        spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
        labels = {str(k): str(v) for k, v in as_map(spec.get("labels"), "labels").items()}
        product = spec.get("gpuProduct")
        count = _int(spec.get("gpuCount"))
        if isinstance(spec.get("instanceType"), str):
            labels.setdefault("node.kubernetes.io/instance-type", spec["instanceType"])
            if count is None or not isinstance(product, str):
                count, product = _catalogued_gpus(spec["instanceType"], count, product)
        if isinstance(product, str):
            labels.setdefault("nvidia.com/gpu.product", product)
        if count is not None:
            labels.setdefault("nvidia.com/gpu.count", str(count))
        if spec.get("provisioner") == "karpenter":  # Karpenter labels every node it launches
            labels.setdefault("karpenter.sh/nodepool", obj.name)
        taints = []
        for taint in as_list(spec.get("taints"), f"taints of {obj.resource}"):
            if isinstance(taint, Mapping):
                taints.append(
                    {
                        "key": str(taint.get("key") or ""),
                        "value": str(taint.get("value") or ""),
                        "effect": normalise_effect(taint.get("effect")),
                    }
                )
        pools.append(
            GpuPool(
                obj,
                obj.name,
                labels,
                taints,
                count,
                product if isinstance(product, str) else None,
                _int(spec.get("maxSize")),
                spec,
            )
        )
    described = {p.name for p in pools if not p.derived}
    kept = [p for p in pools if not (p.derived and p.name in described)]
    # A described pool also wins over the Nodes of the same name (a GpuNodePool for the
    # node group `gpu-l4` and the dump of its Nodes are one pool, not two), and over a
    # Karpenter NodePool of that name; a NodePool wins over the Nodes it launched.
    # view.karpenter builds its pools as GpuPool: imported here, not above.
    from gpustrata_policies.view.karpenter import karpenter_pools

    karpenter = [p for p in karpenter_pools(objects) if p.name not in described]
    taken = described | {p.name for p in karpenter}
    return kept + karpenter + [p for p in node_pools(objects) if p.name not in taken]


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Kubernetes toleration semantics (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
    for tol in tolerations:
        effect = normalise_effect(tol.get("effect"))
        if effect and effect != taint["effect"]:
            continue
        key = str(tol.get("key") or "")
        operator = tol.get("operator") or "Equal"
        if operator == "Exists":
            if not key or key == taint["key"]:
                return True
        elif key == taint["key"] and str(tol.get("value") or "") == taint["value"]:
            return True
    return False


def _expr_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expr.get("key"))
    if key in _UBIQUITOUS and key not in labels:
        return True
    op = expr.get("operator")
    raw = expr.get("values")
    values = [str(v) for v in raw] if isinstance(raw, list) else []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:  # a tuple: op may be any YAML value
        left, right = _int(labels[key]), _int(values[0])
        if left is None or right is None:
            return False
        return left > right if op == "Gt" else left < right
    return False


def matches_selectors(
    node_selector: Mapping[str, Any],
    affinity_terms: list[list[Mapping[str, Any]]],
    labels: Mapping[str, str],
) -> bool:
    """Would a node with *labels* satisfy the nodeSelector and required affinity?"""
    for key, value in node_selector.items():
        if key in _UBIQUITOUS and key not in labels:
            continue
        if labels.get(key) != str(value):
            return False
    if affinity_terms:
        return any(all(_expr_matches(e, labels) for e in term) for term in affinity_terms)
    return True


# --------------------------------------------------------------------------- Node objects

NODE_POOL_LABELS = (
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
)
"""Node labels naming the pool a Node belongs to (EKS managed node group, Karpenter
NodePool, GKE node pool, AKS agent pool), in the order they are tried."""

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GKE_ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.driver"
"""``pre-installed`` when the GPU Operator's driver container found a host driver and
disabled itself (NVIDIA/cloud-native-docs gpu-operator/release-notes.rst, 1.11.1)."""

# Taints the node lifecycle controllers, the cluster autoscaler and Karpenter set for a
# while on one Node: not the pool's own (Kubernetes "Taint based evictions",
# cluster-autoscaler FAQ, Karpenter disruption docs).
_TRANSIENT_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
_TRANSIENT_TAINT_KEYS = frozenset(
    {
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
        "karpenter.sh/disrupted",
        "karpenter.sh/disruption",
    }
)


def _node_labels(obj: K8sObject) -> dict[str, str]:
    return {
        str(k): str(v)
        for k, v in as_map(obj.labels, f"metadata.labels of {obj.resource}").items()
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    }


def _node_taints(obj: K8sObject) -> list[dict[str, str]]:
    out = []
    for taint in as_list(dig(obj.raw, "spec", "taints"), f"spec.taints of {obj.resource}"):
        if not isinstance(taint, Mapping):
            continue
        key = str(taint.get("key") or "")
        if key.startswith(_TRANSIENT_TAINTS) or key in _TRANSIENT_TAINT_KEYS:
            continue
        out.append(
            {
                "key": key,
                "value": str(taint.get("value") or ""),
                "effect": normalise_effect(taint.get("effect")),
            }
        )
    return out


def node_gpu_count(obj: K8sObject, labels: Mapping[str, str]) -> int | None:
    """Physical GPUs of a Node: GFD ``nvidia.com/gpu.count``, else GKE's
    ``gke-accelerator-count``, Karpenter's ``instance-gpu-count``, else its
    ``nvidia.com/gpu`` capacity divided by the time-slicing replicas label."""
    for key in (GFD_COUNT, GKE_ACCELERATOR_COUNT, KARPENTER_GPU_COUNT):
        count = _int(labels.get(key))
        if count is not None:
            return count
    for section in ("capacity", "allocatable"):
        advertised = _int(dig(obj.raw, "status", section, "nvidia.com/gpu"))
        if advertised:
            replicas = _int(labels.get("nvidia.com/gpu.replicas")) or 1
            return max(advertised // replicas, 1)
    return None


def _driver_version(labels: Mapping[str, str]) -> str | None:
    """The running driver from GFD labels (``cuda.driver.major/minor/rev``, as
    NVIDIA/k8s-device-plugin internal/lm/nvml.go writes them)."""
    major = labels.get("nvidia.com/cuda.driver.major")
    minor = labels.get("nvidia.com/cuda.driver.minor")
    rev = labels.get("nvidia.com/cuda.driver.rev")
    if not major:
        return None
    return ".".join(p for p in (major, minor, rev) if p)


def _kubelet_minor(obj: K8sObject) -> str | None:
    """``v1.31.4-eks-1234`` -> ``1.31`` (``status.nodeInfo.kubeletVersion``)."""
    text = dig(obj.raw, "status", "nodeInfo", "kubeletVersion")
    if not isinstance(text, str):
        return None
    parts = text.lstrip("v").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and parts[0].isdigit() else None


def _aks_image_driver(labels: Mapping[str, str], vm_size: str | None) -> tuple[str, str] | None:
    """(driver, where it was read) of an AKS Ubuntu node image release (the label
    ``kubernetes.azure.com/node-image-version``) on the Node's VM size: the driver AKS
    installs there by default (:mod:`gpustrata.catalog.aks_image`); ``None`` otherwise."""
    from gpustrata.catalog.aks_image import AKS_IMAGE_LABEL, aks_image_driver, aks_image_table

    image = labels.get(AKS_IMAGE_LABEL)
    driver = aks_image_driver(image, vm_size) if image else None
    if driver is None:
        return None
    return driver, (
        f"label {AKS_IMAGE_LABEL}={image}: the driver that release installs on {vm_size} "
        f"unless the pool skips AKS's GPU driver install, {aks_image_table().source}"
    )


def _image_ships_driver(obj: K8sObject, labels: Mapping[str, str]) -> tuple[bool, str] | None:
    """Does the Node's image carry the NVIDIA driver, and what says so? The operator's own
    label; Bottlerocket names its NVIDIA variant in ``osImage`` (``aws-k8s-1.31-nvidia``,
    bottlerocket-os/bottlerocket README "Variants")."""
    if labels.get(DRIVER_DEPLOY_LABEL) == "pre-installed":
        return True, f"label {DRIVER_DEPLOY_LABEL}=pre-installed"
    os_image = dig(obj.raw, "status", "nodeInfo", "osImage")
    if isinstance(os_image, str) and os_image.startswith("Bottlerocket"):
        return "-nvidia" in os_image, f"osImage {os_image}"
    return None


def _pool_key(labels: Mapping[str, str], gpus: int | None) -> tuple[str, str]:
    for key in NODE_POOL_LABELS:
        if labels.get(key):
            return key, labels[key]
    instance = next((labels[k] for k in INSTANCE_TYPE_LABELS if labels.get(k)), "")
    shape = " x ".join(p for p in (str(gpus or ""), labels.get(GFD_PRODUCT, ""), instance) if p)
    return "shape", shape or "no GPUs"


def _common(values: list[Any]) -> Any:
    """The value every Node of a group agrees on, else ``None``."""
    return values[0] if values and all(v == values[0] for v in values) else None


def node_pools(objects: Iterable[K8sObject]) -> list[GpuPool]:
    """The node pools the ``Node`` objects among *objects* form.

    A pool's labels and taints are those all its Nodes share; its GPU product and count,
    instance type, Kubernetes minor (``nodeInfo.kubeletVersion``), driver (GFD labels) and
    allocatable cpu/memory are read where every Node agrees. ``extra["nodes"]`` counts its
    Nodes and ``extra["source"]`` says it was read from Nodes.
    """
    groups: dict[tuple[str, str], list[tuple[K8sObject, dict[str, str], int | None]]] = {}
    for obj in objects:
        if obj.kind != "Node":
            continue
        labels = _node_labels(obj)
        gpus = node_gpu_count(obj, labels)
        groups.setdefault(_pool_key(labels, gpus), []).append((obj, labels, gpus))
    pools = []
    for (key, value), members in groups.items():
        first = members[0][0]
        label_sets = [m[1] for m in members]
        shared = {
            k: v
            for k, v in label_sets[0].items()
            if k != "kubernetes.io/hostname" and all(ls.get(k) == v for ls in label_sets[1:])
        }
        taint_sets = [_node_taints(m[0]) for m in members]
        taints = [t for t in taint_sets[0] if all(t in ts for ts in taint_sets[1:])]
        count = _common([m[2] for m in members])
        instance = next((shared[k] for k in INSTANCE_TYPE_LABELS if shared.get(k)), None)
        cpu = _common([dig(m[0].raw, "status", "allocatable", "cpu") for m in members])
        memory = _common([dig(m[0].raw, "status", "allocatable", "memory") for m in members])
        shipped = _common([_image_ships_driver(m[0], m[1]) for m in members])
        gfd = _common([_driver_version(ls) for ls in label_sets])
        aks = None if gfd else _common([_aks_image_driver(ls, instance) for ls in label_sets])
        if aks is not None and shipped is None:
            shipped = (True, aks[1])
        extra: dict[str, Any] = {
            "source": "Node",
            "nodes": len(members),
            "poolLabel": key,
            "instanceType": instance,
            "kubernetesVersion": _common([_kubelet_minor(m[0]) for m in members]),
            "driverVersion": gfd or (aks[0] if aks else None),
            "driverSource": aks[1] if aks else None,
            "driverPreinstalled": shipped[0] if shipped else None,
            "nodeImage": shipped[1] if shipped else None,
            "allocatable": {"cpu": cpu, "memory": memory},
        }
        name = value if key != "shape" else f"Nodes with {value}"
        product = shared.get(GFD_PRODUCT)
        pools.append(
            GpuPool(
                first,
                name,
                shared,
                taints,
                count,
                product,
                None,  # a dump shows the Nodes there now, not how far the pool scales
                {k: v for k, v in extra.items() if v is not None},
            )
        )
    return pools


def pool_label_sets(pool: GpuPool) -> list[Mapping[str, str]]:
    """The label sets a pool's nodes may carry: its labels, or for a Karpenter NodePool one
    set per instance type (and per value of its other multi-valued requirements)."""
    alternatives = pool.extra.get("alternatives")
    return list(alternatives) if isinstance(alternatives, list) and alternatives else [pool.labels]


def pool_matches(
    node_selector: Mapping[str, Any],
    affinity_terms: list[list[Mapping[str, Any]]],
    pool: GpuPool,
) -> bool:
    """:func:`matches_selectors` against any node the pool may launch."""
    return any(
        matches_selectors(node_selector, affinity_terms, labels) for labels in pool_label_sets(pool)
    )


def pinned_types(
    node_selector: Mapping[str, Any], affinity_terms: list[list[Mapping[str, Any]]]
) -> set[str] | None:
    """The instance types a Pod's own selectors restrict it to (its nodeSelector's
    instance-type label, or an ``In`` on it in every OR-ed required affinity term), or None
    where they leave the type open."""
    for key in INSTANCE_TYPE_LABELS:
        value = node_selector.get(key)
        if isinstance(value, str) and value:
            return {value}
    out: set[str] = set()
    for term in affinity_terms:
        values = [
            v
            for e in term
            if e.get("key") in INSTANCE_TYPE_LABELS and e.get("operator") == "In"
            for v in as_list(e.get("values"), "values")
            if isinstance(v, str)
        ]
        if not values:
            return None
        out.update(values)
    return out or None


def launchable_types(
    pool: GpuPool,
    node_selector: Mapping[str, Any],
    affinity_terms: list[list[Mapping[str, Any]]],
) -> list[str]:
    """The instance types of a Karpenter NodePool a Pod with these selectors may get (its
    own ``instance-gpu-name`` or instance-type selector narrows the NodePool's list)."""
    types = pool.extra.get("instanceTypes")
    if not isinstance(types, list):
        return []
    found = {
        str(labels.get(_INSTANCE_TYPE))
        for labels in pool_label_sets(pool)
        if matches_selectors(node_selector, affinity_terms, labels)
    }
    return [t for t in types if t in found]
