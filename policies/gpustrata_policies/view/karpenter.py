"""Karpenter NodePools as GPU pools: the instance types a NodePool's requirements allow,
the GPUs they carry (the catalogue's, and Karpenter's own labels), and whether the AMI of
its EC2NodeClass ships the NVIDIA driver."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpustrata_policies.view import catalogs
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig
from gpustrata_policies.view.pools import (
    _INSTANCE_TYPE,
    KARPENTER_GPU_COUNT,
    GpuPool,
    _expr_matches,
    _int,
    normalise_effect,
)

__all__ = [
    "KARPENTER_GPU_MEMORY",
    "KARPENTER_GPU_NAME",
    "KARPENTER_NODEPOOL",
    "ami_driver_of_node_class",
    "ami_of_node_class",
    "karpenter_pools",
]

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
"""The label Karpenter puts on every Node it launches for a NodePool."""
KARPENTER_DOCS = "https://karpenter.sh/v1.9/concepts/nodepools/"
KARPENTER_NODECLASS_DOCS = "https://karpenter.sh/v1.9/concepts/nodeclasses/"
_FAMILY = "karpenter.k8s.aws/instance-family"
_SIZE = "karpenter.k8s.aws/instance-size"
_CATEGORY = "karpenter.k8s.aws/instance-category"
_GENERATION = "karpenter.k8s.aws/instance-generation"
KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
"""Per-GPU memory in MiB, as Karpenter labels its nodes."""
_GPU_NAME = KARPENTER_GPU_NAME
_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
_GPU_MEMORY = KARPENTER_GPU_MEMORY
_CPU = "karpenter.k8s.aws/instance-cpu"
_MEMORY = "karpenter.k8s.aws/instance-memory"
_ARCH = "kubernetes.io/arch"
_CAPACITY_TYPE = "karpenter.sh/capacity-type"
_GPU_KEYS = (_GPU_NAME, KARPENTER_GPU_COUNT, _GPU_MANUFACTURER, _GPU_MEMORY)
# Requirement keys a catalogue instance type answers (Karpenter's well-known labels, as its
# generated instance-type reference lists them per type): requirements on these pick types.
_TYPE_KEYS = frozenset(
    {_INSTANCE_TYPE, _FAMILY, _SIZE, _CATEGORY, _GENERATION, _CPU, _MEMORY, _ARCH, *_GPU_KEYS}
)
_ALTERNATIVES_CAP = 512
# EC2NodeClass AMI aliases / amiFamily values whose GPU image Karpenter resolves to the EKS
# accelerated AMI (AL2 GPU, AL2023 NVIDIA, Bottlerocket -nvidia variant) for instance types
# with NVIDIA GPUs, which ship the driver (karpenter.sh nodeclasses "amiSelectorTerms" alias;
# aws-samples/karpenter-blueprints@f986fd618f91030bed188ae0a484a136584a7ed5:
# blueprints/nvidia-gpu-workload/README.md, "Karpenter will pick the respective EKS optimized
# accelerated AMI. AL2023 comes packaged with the NVIDIA GPU drivers").
_DRIVER_AMI_FAMILIES = frozenset({"al2", "al2023", "bottlerocket"})


def _instance_labels(name: str) -> dict[str, str] | None:
    """The Karpenter well-known labels a node of catalogue instance type *name* carries
    (``None``: not a catalogued AWS type). ``instance-gpu-name`` is the catalogue GPU id's
    first segment (``h100-sxm-80gb`` -> ``h100``), ``instance-gpu-memory`` the GPU's memory
    in MiB from the catalogue (Karpenter reports EC2's figure, within a few percent)."""

    inst = catalogs.instance(name)
    if inst is None or inst.provider != "aws":
        return None
    gpu = catalogs.hardware().gpus.get(inst.gpu)
    family, _, size = name.partition(".")
    head = re.match(r"([a-z]+)(\d+)", family)  # g6e -> g, 6; p6-b200 -> p, 6
    labels = {
        _INSTANCE_TYPE: name,
        _FAMILY: family,
        _SIZE: size,
        _CPU: str(inst.vcpu),
        _MEMORY: str(inst.memory_mib),
        _ARCH: "arm64" if inst.arch == "arm64" else "amd64",
        _GPU_NAME: inst.gpu.split("-")[0],
        KARPENTER_GPU_COUNT: str(inst.gpu_count),
        _GPU_MANUFACTURER: "nvidia",
    }
    if head:
        labels[_CATEGORY], labels[_GENERATION] = head.group(1), head.group(2)
    if gpu is not None:
        labels[_GPU_MEMORY] = str(round(gpu.memory_gib * 1024))
    return labels


def _aws_types() -> list[str]:

    return sorted(n for n, i in catalogs.hardware().instances.items() if i.provider == "aws")


def _requirements(spec: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    out = []
    for req in as_list(dig(spec, "template", "spec", "requirements"), f"requirements of {where}"):
        if not isinstance(req, Mapping) or not isinstance(req.get("key"), str):
            continue
        values = req.get("values")
        out.append(
            {
                "key": req["key"],
                "operator": str(req.get("operator") or ""),
                "values": [str(v) for v in values] if isinstance(values, list) else [],
            }
        )
    return out


def _node_class_of(
    nodepool: K8sObject, classes: Mapping[str, K8sObject]
) -> tuple[K8sObject | None, str | None]:
    """The EC2NodeClass a NodePool's ``nodeClassRef`` names (v1 ``name``, v1beta1 ``name``),
    and that name."""
    ref = as_map(dig(nodepool.raw, "spec", "template", "spec", "nodeClassRef"), "nodeClassRef")
    name = ref.get("name")
    if not isinstance(name, str):
        return None, None
    return classes.get(name), name


def ami_of_node_class(node_class: K8sObject) -> tuple[bool | None, str]:
    """Does an EC2NodeClass's image ship the NVIDIA driver on GPU instances, and what says
    so: an ``amiSelectorTerms`` alias (``al2023@latest``, ``bottlerocket@v1.30``) or
    ``amiFamily`` AL2/AL2023/Bottlerocket -> Karpenter launches the EKS accelerated image
    -> ``True``; ``Custom``, Windows, or AMIs chosen by id/name/tags -> ``None``."""
    spec = as_map(node_class.raw.get("spec"), f"spec of {node_class.resource}")
    for term in as_list(spec.get("amiSelectorTerms"), "amiSelectorTerms"):
        if isinstance(term, Mapping) and isinstance(term.get("alias"), str):
            alias = term["alias"]
            family = alias.partition("@")[0].lower()
            where = f"{node_class.resource} amiSelectorTerms alias {alias}"
            return (True if family in _DRIVER_AMI_FAMILIES else None), where
    family = spec.get("amiFamily")
    if isinstance(family, str):
        where = f"{node_class.resource} amiFamily {family}"
        if spec.get("amiSelectorTerms"):  # images chosen by id/name/tags: not known here
            return None, f"{where} with its own amiSelectorTerms"
        return (True if family.lower() in _DRIVER_AMI_FAMILIES else None), where
    return None, f"{node_class.resource} names no AMI alias or amiFamily"


def ami_driver_of_node_class(node_class: K8sObject) -> tuple[str, str] | None:
    """(driver version, where it was read) of an EC2NodeClass pinned to an AL2023 AMI
    release (``amiSelectorTerms`` alias ``al2023@v20260714``): the driver that release's
    NVIDIA image ships on every Kubernetes minor it was built for (the release notes,
    :mod:`gpustrata.catalog.eks_ami`); ``None`` for ``latest``, other families, releases not
    catalogued, or releases whose minors ship different drivers."""
    from gpustrata.catalog.eks_ami import eks_ami_driver, eks_ami_table

    spec = as_map(node_class.raw.get("spec"), f"spec of {node_class.resource}")
    for term in as_list(spec.get("amiSelectorTerms"), "amiSelectorTerms"):
        alias = term.get("alias") if isinstance(term, Mapping) else None
        if not isinstance(alias, str):
            continue
        family, _, release = alias.partition("@")
        if family.lower() != "al2023" or not release.startswith("v"):
            return None
        driver = eks_ami_driver(release)
        if driver is None:
            return None
        return (
            driver,
            f"the EKS AL2023 NVIDIA AMI {release}'s release notes, {eks_ami_table().source}",
        )
    return None


def _alternatives(
    base: Mapping[str, str], candidates: list[dict[str, str]], reqs: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """The label sets a NodePool's nodes may carry: one per candidate instance type and
    per value of each multi-valued ``In`` requirement on another key (capacity type, zone)."""
    sets: list[dict[str, str]] = [{**base, **c} for c in candidates] or [dict(base)]
    for req in reqs:
        key = req["key"]
        if candidates and key in _TYPE_KEYS:
            continue
        if req["operator"] != "In" or len(req["values"]) < 2 or key in base:
            continue
        if len(sets) * len(req["values"]) > _ALTERNATIVES_CAP:
            break
        sets = [{**s, key: v} for s in sets for v in req["values"]]
    return sets


def karpenter_pools(objects: Iterable[K8sObject]) -> list[GpuPool]:
    """Karpenter ``NodePool`` objects (``karpenter.sh/v1``, ``v1beta1``) as GPU pools, with
    the ``EC2NodeClass`` (``karpenter.k8s.aws/v1``, ``v1beta1``) each one names.

    A NodePool may launch several instance types: ``extra["instanceTypes"]`` lists the
    catalogued AWS types its requirements allow (instance type, family, size, CPU, memory,
    arch, ``instance-gpu-name/-count/-manufacturer/-memory``), and its GPU product and count
    are set only where every one of them agrees (``extra["gpuModels"]`` names each GPU id).
    Instance types or families it names that the catalogue lacks are in
    ``extra["unknownTypes"]``. ``extra["alternatives"]`` holds the label sets its nodes may
    carry, for :func:`pool_label_sets`. Taints are ``template.spec.taints``
    (``startupTaints`` are removed once the node is ready: kept in ``extra``); ``maxSize``
    is ``limits["nvidia.com/gpu"]`` divided by the GPUs per node (the limit itself is
    ``extra["gpuLimit"]``); kubelet settings are the
    EC2NodeClass's ``spec.kubelet`` (v1) or the NodePool's ``template.spec.kubelet``
    (v1beta1), and ``extra["kubeletObject"]`` is the object that holds them.
    """
    objects = list(objects)
    classes = {
        o.name: o
        for o in objects
        if o.kind == "EC2NodeClass" and o.api_version.startswith("karpenter.k8s.aws/")
    }
    pools = []
    for obj in objects:
        if obj.kind != "NodePool" or not obj.api_version.startswith("karpenter.sh/"):
            continue
        pools.append(_karpenter_pool(obj, classes))
    return pools


def _karpenter_pool(obj: K8sObject, classes: Mapping[str, K8sObject]) -> GpuPool:

    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    template = as_map(dig(spec, "template", "spec"), "template.spec")
    reqs = _requirements(spec, obj.resource)
    labels = {
        str(k): str(v)
        for k, v in as_map(dig(spec, "template", "metadata", "labels"), "labels").items()
        if isinstance(v, str | int | float) and not isinstance(v, bool)
    }
    labels[KARPENTER_NODEPOOL] = obj.name
    for req in reqs:
        if req["operator"] == "In" and len(req["values"]) == 1:
            labels.setdefault(req["key"], req["values"][0])
    if not any(r["key"] == _CAPACITY_TYPE for r in reqs):
        labels.setdefault(_CAPACITY_TYPE, "on-demand")  # Karpenter's default capacity type
    typed = [r for r in reqs if r["key"] in _TYPE_KEYS]
    unknown: list[str] = []
    names = set(_aws_types())  # Karpenter's provider here is EC2
    families = {n.partition(".")[0] for n in names}
    for req in typed:
        if req["operator"] != "In":
            continue
        if req["key"] == _INSTANCE_TYPE:
            unknown += [v for v in req["values"] if v not in names]
        elif req["key"] == _FAMILY:
            unknown += [f"{v} family" for v in req["values"] if v not in families]
    candidates = []
    gpu_ids: dict[str, str] = {}
    for name in sorted(names):
        inst_labels = _instance_labels(name)
        inst = catalogs.instance(name)
        if inst_labels is not None and inst and all(_expr_matches(r, inst_labels) for r in typed):
            candidates.append(inst_labels)
            gpu_ids[name] = inst.gpu
    taints = [
        {
            "key": str(t.get("key") or ""),
            "value": str(t.get("value") or ""),
            "effect": normalise_effect(t.get("effect")),
        }
        for t in as_list(template.get("taints"), f"taints of {obj.resource}")
        if isinstance(t, Mapping)
    ]
    startup = [
        t for t in as_list(template.get("startupTaints"), "startupTaints") if isinstance(t, Mapping)
    ]
    limits = as_map(spec.get("limits"), f"limits of {obj.resource}")
    gpu_signs = (
        # Only a requirement that asks for GPUs: `instance-gpu-count DoesNotExist` (or NotIn,
        # Lt) is how a CPU NodePool keeps GPU types out.
        any(r["key"] in _GPU_KEYS and r["operator"] in ("In", "Exists", "Gt") for r in reqs)
        or any(t["key"] == "nvidia.com/gpu" for t in taints)
        or "nvidia.com/gpu" in limits
        or (
            any(r["key"] in (_INSTANCE_TYPE, _FAMILY) and r["operator"] == "In" for r in reqs)
            and bool(candidates)
        )
    )
    if not gpu_signs:
        candidates, unknown = [], []  # a CPU NodePool: its types are not in a GPU catalogue
    models = sorted({gpu_ids[c[_INSTANCE_TYPE]] for c in candidates})
    counts = sorted({int(c[KARPENTER_GPU_COUNT]) for c in candidates})
    gpu = catalogs.gpu_by_label(models[0]) if len(models) == 1 and not unknown else None
    product = gpu.gfd_products[0] if gpu is not None else None
    count = counts[0] if len(counts) == 1 and not unknown else None
    gpu_limit = _int(limits.get("nvidia.com/gpu"))
    node_class, class_name = _node_class_of(obj, classes)
    kubelet_holder: K8sObject | None = obj
    kubelet = template.get("kubelet")
    if kubelet is None and node_class is not None:
        kubelet_holder = node_class
        kubelet = dig(node_class.raw, "spec", "kubelet")
    shipped, image = ami_of_node_class(node_class) if node_class is not None else (None, None)
    ami_driver = ami_driver_of_node_class(node_class) if node_class is not None else None
    extra: dict[str, Any] = {
        "source": "NodePool",
        "requirements": reqs,
        "instanceTypes": [c[_INSTANCE_TYPE] for c in candidates],
        "gpuModels": models if candidates else [],
        "unknownTypes": sorted(set(unknown)),
        "alternatives": _alternatives(labels, candidates, reqs),
        "startupTaints": startup,
        "limits": dict(limits),
        "gpuLimit": gpu_limit,
        "disruption": spec.get("disruption"),
        "nodeClass": class_name,
        "nodeClassObject": node_class,
        "kubelet": kubelet,
        "kubeletObject": kubelet_holder if kubelet is not None or node_class else None,
        "driverPreinstalled": shipped if gpu_signs and candidates else None,
        "nodeImage": image,
        "gpuSigns": gpu_signs,
        "driverVersion": ami_driver[0] if ami_driver and shipped else None,
        "driverSource": ami_driver[1] if ami_driver and shipped else None,
    }
    if len(candidates) == 1:
        extra["instanceType"] = candidates[0][_INSTANCE_TYPE]
    max_size = gpu_limit // count if gpu_limit is not None and count else None
    return GpuPool(
        obj,
        obj.name,
        labels,
        taints,
        count,
        product,
        max_size,
        {k: v for k, v in extra.items() if v is not None},
    )
