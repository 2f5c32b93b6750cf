"""Hardware catalogue: NVIDIA GPU models and the cloud instance types that carry them.

The data lives in ``data/gpus.yaml`` and ``data/instances.yaml`` next to this module;
every entry cites at least one source. Users add or override entries without code
changes through :meth:`HardwareCatalog.extended`.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Iterable, Mapping
from datetime import date
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpustrata.catalog.packaged import CatalogError, packaged_document

__all__ = [
    "GpuModel",
    "HardwareCatalog",
    "InstanceType",
    "OnDemandPrice",
    "load_hardware_catalog",
]

_SHARED_SUFFIX = "-SHARED"
# GFD's nvidia.com/gpu.product under the MIG "single" strategy: the parent's product name,
# "MIG" and the profile joined by "-" (NVIDIA/k8s-device-plugin@v0.20.0:internal/lm/resource.go
# getProductName, internal/lm/mig-strategy.go), e.g. NVIDIA-A100-SXM4-80GB-MIG-3g.40gb.
_MIG_PRODUCT = re.compile(r"^(?P<parent>.+)-mig-(?P<profile>(?P<g>\d+)g\.(?P<gb>\d+)gb)$")
_MIG_GUIDE = (
    "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html#supported-mig-profiles"
)
_GFD_MIG = "NVIDIA/k8s-device-plugin@v0.20.0:internal/lm/resource.go"
_GPUS_FILE = "data/gpus.yaml"
_INSTANCES_FILE = "data/instances.yaml"


class GpuModel(BaseModel):
    """One NVIDIA GPU model, with the figures the planner needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        min_length=1,
        description='Short stable id, e.g. "h100-sxm-80gb", "a10g", "l40s".',
    )
    name: str = Field(
        min_length=1,
        description='Marketing name, e.g. "NVIDIA H100 80GB HBM3 (SXM5)".',
    )
    memory_gib: float = Field(
        gt=0,
        description=(
            "Total device memory as the NVIDIA driver reports it (NVML memory.total, the "
            "nvidia-smi 'Total' and GFD's nvidia.com/gpu.memory label, in MiB) divided by "
            "1024. vLLM sizes its budget from torch.cuda.mem_get_info() total, which is "
            "smaller by the driver's reserved memory (typically 0.2-0.6 GiB, varying with "
            "the driver version), so treat this as an upper bound."
        ),
    )
    compute_capability: str = Field(
        pattern=r"^\d+\.\d+$",
        description='CUDA compute capability "major.minor", e.g. "9.0".',
    )
    brand: Literal["datacenter", "professional", "geforce"] = Field(
        default="datacenter",
        description=(
            "Product line: data-center (Tesla lineage, CUDA forward compatibility supported), "
            "professional RTX (forward compatibility only on NGC-Ready server SKUs) or GeForce "
            "(no forward compatibility; the images' NVIDIA_REQUIRE_CUDA lists no GeForce branch)."
        ),
    )
    bf16: bool = Field(description="Tensor cores support BF16.")
    fp8: bool = Field(description="Tensor cores support FP8 (Ada, Hopper and later).")
    dense_bf16_tflops: float = Field(
        gt=0,
        description=(
            "Dense (no 2:4 sparsity) BF16 tensor TFLOP/s. GPUs without BF16 (Volta, "
            "Turing) carry their FP16 tensor rate here, stated in notes."
        ),
    )
    memory_bandwidth_gbs: float = Field(
        gt=0, description="Peak memory bandwidth in GB/s (10^9 bytes per second)."
    )
    interconnect: Literal["nvlink", "pcie"] | None = Field(
        default=None,
        description="How the GPU talks to its peers: NVLink (SXM, NVL bridge) or PCIe only.",
    )
    interconnect_gbs: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Total (bidirectional) GPU-to-GPU bandwidth of that interconnect per GPU in GB/s, "
            "datasheet figure (NVLink, or the PCIe link for PCIe-only parts); None if not read."
        ),
    )
    nvlink_peers: int | None = Field(
        default=None,
        ge=2,
        description=(
            "How many GPUs one NVLink bridge joins on a PCIe card (the datasheet's 'NVLink "
            "Bridge for 2 GPUs'); a tensor-parallel group larger than that crosses PCIe. None: "
            "NVLink reaches every GPU of the node (SXM with NVSwitch) or no NVLink at all."
        ),
    )
    gfd_products: list[str] = Field(
        min_length=1,
        description=(
            "Values GPU Feature Discovery sets in the nvidia.com/gpu.product node label "
            '(NVML device name, spaces replaced by "-"), e.g. "NVIDIA-H100-80GB-HBM3".'
        ),
    )
    ray_accelerator_type: str | None = Field(
        default=None,
        description=(
            'The accelerator type Ray detects on a node with this GPU, e.g. "H100": the '
            "`accelerator_type:<X>` node resource and the value of Ray Serve LLM's "
            "`accelerator_type`. None when Ray's detected value is not a Ray Serve LLM "
            "accelerator type."
        ),
    )
    mig_profiles: list[str] = Field(
        default_factory=list,
        description='MIG GPU-instance profiles such as "1g.10gb"; empty without MIG.',
    )
    notes: str = Field(default="", description="Caveats about the figures above.")
    sources: list[str] = Field(
        min_length=1,
        description='Where the figures come from: URLs or "owner/repo/path@commit".',
    )

    @property
    def capability(self) -> tuple[int, int]:
        """:attr:`compute_capability` as a comparable (major, minor) pair: ``"8.6"`` ->
        ``(8, 6)``."""
        return _capability(self.compute_capability)


# Parsed once per text: a check asks it for every pod x pool x engine (issue 18: 70k parses
# of a handful of strings).
@functools.cache
def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


class OnDemandPrice(BaseModel):
    """A published list price of one instance type (on-demand unless ``kind`` says otherwise)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["on-demand", "capacity-block", "spot"] = Field(
        default="on-demand",
        description=(
            "What the price buys: on-demand, an EC2 Capacity Block (where AWS publishes no "
            "on-demand price to cite), or spot."
        ),
    )
    usd_per_hour: float = Field(gt=0, description="Price per instance-hour in USD.")
    region: str = Field(min_length=1, description='Region the price is for, e.g. "us-east-1".')
    read_on: date = Field(description="The date the price was read (prices change).")
    source: str = Field(min_length=1, description="Where it was read (URL or repo/path@commit).")


class InstanceType(BaseModel):
    """One cloud instance type (EC2 instance type, GCE machine type, Azure VM size) with GPUs.

    Every cloud's types are keyed the same way, by the name the cloud's node label
    ``node.kubernetes.io/instance-type`` carries; ``provider`` says which cloud. The EKS
    fields (``max_pods``, ``eks_ami_type``) are required for AWS types and absent from the
    GKE and AKS ones; the planner, which builds EKS node groups, needs both.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        min_length=1,
        description="Instance type name as node.kubernetes.io/instance-type carries it, e.g. "
        '"p5.48xlarge", "a3-highgpu-8g", "Standard_ND96isr_H100_v5".',
    )
    provider: str = Field(
        min_length=1,
        description='Cloud provider: "aws" (EC2/EKS), "gcp" (GCE/GKE), "azure" (AKS), or a '
        "name of your own for user entries.",
    )
    gpu: str = Field(min_length=1, description="GpuModel.id of the attached GPUs.")
    gpu_count: int = Field(ge=1, description="Number of GPUs attached to one instance.")
    vcpu: int = Field(ge=1, description="vCPUs of one instance.")
    memory_mib: int = Field(ge=1, description="Instance memory (RAM) in MiB.")
    max_pods: int | None = Field(
        default=None,
        ge=1,
        description=(
            "EKS default max pods (amazon-eks-ami eni-max-pods.txt; nodeadm computes "
            "ENIs * (IPv4 addresses per ENI - 1) + 2). AWS only."
        ),
    )
    arch: Literal["x86_64", "arm64"] = Field(description="CPU architecture.")
    eks_ami_type: Literal["AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA"] | None = Field(
        default=None,
        description="EKS managed node group amiType of the NVIDIA AL2023 AMI. AWS only.",
    )
    price: OnDemandPrice | None = Field(
        default=None, description="On-demand list price with its region, source and date."
    )
    local_nvme_gib: int = Field(
        default=0,
        ge=0,
        description=(
            "Instance-store NVMe total as the provider reports it (AWS "
            "DescribeInstanceTypes TotalSizeInGB); 0 if none."
        ),
    )
    network_gbps: float | None = Field(
        default=None,
        gt=0,
        description="Baseline network bandwidth in Gbit/s; None when unknown.",
    )
    efa_interfaces: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Elastic Fabric Adapter interfaces one instance takes (the "
            "vpc.amazonaws.com/efa resource the EFA device plugin advertises per node); 0: "
            "no EFA; None: not known (every non-AWS type). AWS only."
        ),
    )
    kaito_gpu_memory_gib: int | None = Field(
        default=None,
        ge=1,
        description=(
            "GPU memory of one instance (all its GPUs) as the KAITO operator's SKU table "
            "states it, in GiB: what KAITO's node estimator sizes a Workspace with; None: "
            "not in KAITO's table."
        ),
    )
    sources: list[str] = Field(
        min_length=1,
        description='Where the figures come from: URLs or "owner/repo/path@commit".',
    )

    @model_validator(mode="after")
    def _eks_fields_match_provider(self) -> InstanceType:
        if self.provider == "aws" and (self.max_pods is None or self.eks_ami_type is None):
            raise ValueError(
                f"AWS instance type {self.name!r} needs max_pods and eks_ami_type (EKS node "
                "groups are built from them)"
            )
        return self


def _size_distance(wanted: str, size: str) -> float:
    """How far EC2 size *size* is from *wanted* (``xlarge`` 1, ``12xlarge`` 12; log ratio);
    0 where either is not such a size."""
    a, b = (re.fullmatch(r"(\d*)xlarge", x) for x in (wanted, size))
    if a is None or b is None:
        return 0.0
    return abs(math.log(int(a.group(1) or 1) / int(b.group(1) or 1)))


def _index_gpus(gpus: Iterable[GpuModel]) -> dict[str, GpuModel]:
    return {g.id.lower(): g for g in gpus}


class HardwareCatalog:
    """Immutable lookup over GPU models and instance types.

    Build it with :func:`load_hardware_catalog` (the shipped data) and add user entries
    with :meth:`extended`. Construction checks that every instance references a known
    GPU id.
    """

    __slots__ = ("_by_label", "_gpus", "_instances", "_lowered")

    def __init__(self, gpus: Iterable[GpuModel], instances: Iterable[InstanceType]) -> None:
        """Index ``gpus`` by id (case-insensitive) and ``instances`` by name; later entries win.

        Raises:
            CatalogError: an instance references a GPU id that is not in ``gpus``.
        """
        lowered = _index_gpus(gpus)
        gpu_map = {g.id: g for g in lowered.values()}
        inst_map: dict[str, InstanceType] = {}
        for i in instances:
            inst_map[i.name] = i
        for inst in inst_map.values():
            if inst.gpu.lower() not in lowered:
                known = ", ".join(sorted(gpu_map))
                raise CatalogError(
                    f"instance {inst.name!r} references unknown gpu {inst.gpu!r}; "
                    f"known gpu ids: {known}. Add a GpuModel with that id or fix the reference."
                )
        by_label: dict[str, GpuModel] = {}
        for g in gpu_map.values():
            for label in g.gfd_products:
                by_label[label.lower()] = g
        self._lowered: Mapping[str, GpuModel] = MappingProxyType(lowered)
        self._gpus: Mapping[str, GpuModel] = MappingProxyType(gpu_map)
        self._instances: Mapping[str, InstanceType] = MappingProxyType(inst_map)
        self._by_label: Mapping[str, GpuModel] = MappingProxyType(by_label)

    @property
    def gpus(self) -> Mapping[str, GpuModel]:
        """GPU models keyed by id (read-only)."""
        return self._gpus

    @property
    def instances(self) -> Mapping[str, InstanceType]:
        """Instance types keyed by name (read-only)."""
        return self._instances

    def gpu(self, key: str) -> GpuModel | None:
        """Find a GPU by id (case-insensitive) or by a GFD ``nvidia.com/gpu.product`` value.

        A trailing ``-SHARED`` (added by GFD when time-slicing replicates the GPU) is
        ignored; a MIG single-strategy label (``NVIDIA-A100-SXM4-80GB-MIG-3g.40gb``) gives the
        slice, derived from its parent. Returns None when nothing matches.
        """
        k = key.strip().lower()
        if not k:
            return None
        found = self._lowered.get(k) or self._by_label.get(k)
        if found is None and k.endswith(_SHARED_SUFFIX.lower()):
            k = k[: -len(_SHARED_SUFFIX)]
            found = self._by_label.get(k)
        if found is None:
            found = self._mig_slice(k, key.strip())
        return found

    def mig_slice(self, parent: GpuModel, profile: str) -> GpuModel | None:
        """The MIG slice *profile* (``3g.40gb``, as in the mixed strategy's
        ``nvidia.com/mig-3g.40gb`` resource) of *parent*, derived like a single-strategy
        product label; None when *parent* has no such profile or no GFD product name."""
        if not parent.gfd_products:
            return None
        label = f"{parent.gfd_products[0]}-MIG-{profile}"
        return self._mig_slice(label.lower(), label)

    def _mig_slice(self, lowered: str, label: str) -> GpuModel | None:
        """The MIG slice a single-strategy GFD product label names, derived from its parent.

        Memory and bandwidth are the parent's scaled by the profile's GB over the full-GPU
        profile's (``3g.40gb`` of ``7g.80gb``: half), tensor throughput by its compute slices
        over 7 (MIG user guide). None when the parent or the profile is unknown.
        """
        m = _MIG_PRODUCT.match(lowered)
        if m is None:
            return None
        parent = self._by_label.get(m["parent"])
        if parent is None or m["profile"] not in parent.mig_profiles:
            return None
        full = max(int(p.split(".")[1].removesuffix("gb")) for p in parent.mig_profiles)
        memory_share = int(m["gb"]) / full
        return parent.model_copy(
            update={
                "id": f"{parent.id}-mig-{m['profile']}",
                "name": f"{parent.name} MIG {m['profile']}",
                "memory_gib": round(parent.memory_gib * memory_share, 2),
                "dense_bf16_tflops": round(parent.dense_bf16_tflops * int(m["g"]) / 7, 2),
                "memory_bandwidth_gbs": round(parent.memory_bandwidth_gbs * memory_share, 1),
                "gfd_products": [label.removesuffix(_SHARED_SUFFIX)],
                "mig_profiles": [],
                "ray_accelerator_type": parent.ray_accelerator_type,
                "notes": (
                    f"MIG {m['profile']} slice of {parent.name}, derived: memory and bandwidth "
                    f"x {m['gb']}/{full} (profile GB over the full-GPU profile), tensor rate x "
                    f"{m['g']}/7 compute slices."
                ),
                "sources": [*parent.sources, _MIG_GUIDE, _GFD_MIG],
            }
        )

    def instance(self, name: str) -> InstanceType | None:
        """Find an instance type by exact name (surrounding whitespace ignored)."""
        return self._instances.get(name.strip())

    def related_instances(self, name: str, *, aws: bool = False, n: int = 3) -> list[str]:
        """Catalogued instance types related to an unknown *name*: its family's (the part
        before the first ``.``) first, else the families closest in name (``g6f`` -> ``g6``,
        ``p5en`` -> ``p5e``), else that size in the families of its first letter (``g9.2xlarge``
        -> ``g6.2xlarge``); the same size first. ``[]`` when none is related (``trn1``,
        ``m7i`` carry no NVIDIA GPU). *aws*: only EC2 types (those with a pod limit)."""
        names = [k for k, t in self._instances.items() if not aws or t.max_pods is not None]
        wanted = name.strip().casefold()
        family, _, size = wanted.partition(".")
        families = sorted({k.casefold().partition(".")[0] for k in names})
        close = (
            [family]
            if family in families
            else difflib.get_close_matches(family, families, n=2, cutoff=0.75)
        )
        if not close and size and family[:1].isalpha():  # g9.2xlarge: the g families' 2xlarge
            close = [f for f in families if f[:1] == family[:1]]
            names = [k for k in names if k.casefold().partition(".")[2] == size]
        found: list[str] = []
        for fam in close:
            members = [k for k in names if k.casefold().partition(".")[0] == fam]
            members.sort(
                key=lambda k: (
                    k.casefold().partition(".")[2] != size,
                    _size_distance(size, k.casefold().partition(".")[2]),
                    -difflib.SequenceMatcher(None, wanted, k.casefold()).ratio(),
                    k,
                )
            )
            found += members
        return found[:n]

    def instance_families(self, *, aws: bool = False) -> list[str]:
        """The catalogued instance families (``g6``, ``p5e``; a whole name where it has no
        ``.``), sorted; *aws*: only EC2 types."""
        return sorted(
            {k.partition(".")[0] for k, t in self._instances.items() if not aws or t.max_pods}
        )

    def extended(
        self,
        gpus: Iterable[GpuModel] = (),
        instances: Iterable[InstanceType] = (),
    ) -> HardwareCatalog:
        """Return a new catalogue with user entries added or overriding by id / name.

        Raises:
            CatalogError: an instance references a GPU id unknown to the result.
        """
        return HardwareCatalog(
            [*self._gpus.values(), *gpus],
            [*self._instances.values(), *instances],
        )

    def __repr__(self) -> str:
        return f"HardwareCatalog(gpus={len(self._gpus)}, instances={len(self._instances)})"


def _read_yaml(filename: str, key: str) -> list[Any]:
    doc = packaged_document(filename)
    if not isinstance(doc, dict) or set(doc) != {key}:
        raise CatalogError(f"{filename}: expected a mapping with exactly one key {key!r}")
    entries = doc[key]
    if not isinstance(entries, list):
        raise CatalogError(f"{filename}: {key!r} must be a list of mappings")
    return entries


def _entry_label(raw: Any, field: str, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get(field), str):
        return f"{raw[field]!r} (entry {index})"
    return f"entry {index}"


_Entry = TypeVar("_Entry", GpuModel, InstanceType)


def _parse_entries(
    filename: str, entries: list[Any], model: type[_Entry], what: str, key: str, fold: bool
) -> list[_Entry]:
    """Validate each entry as *model*; an entry repeating another's *key* (compared
    ignoring case when *fold*) is an error naming both."""
    out: list[_Entry] = []
    seen: set[str] = set()
    for i, raw in enumerate(entries):
        label = _entry_label(raw, key, i)
        try:
            entry = model.model_validate(raw)
        except ValidationError as exc:
            raise CatalogError(f"{filename}: {what} {label} is invalid: {exc}") from exc
        value = str(getattr(entry, key))
        if (value.lower() if fold else value) in seen:
            raise CatalogError(f"{filename}: {what} {label} repeats {key} {value!r}")
        seen.add(value.lower() if fold else value)
        out.append(entry)
    return out


@functools.cache
def load_hardware_catalog() -> HardwareCatalog:
    """Load the shipped GPU and instance catalogues (cached).

    Raises:
        CatalogError: a data file is unreadable or an entry is invalid; the message
            names the file and the entry.
    """
    gpus = _parse_entries(_GPUS_FILE, _read_yaml(_GPUS_FILE, "gpus"), GpuModel, "gpu", "id", True)
    instances = _parse_entries(
        _INSTANCES_FILE,
        _read_yaml(_INSTANCES_FILE, "instances"),
        InstanceType,
        "instance",
        "name",
        False,
    )
    try:
        return HardwareCatalog(gpus, instances)
    except CatalogError as exc:
        raise CatalogError(f"{_INSTANCES_FILE}: {exc}") from exc
