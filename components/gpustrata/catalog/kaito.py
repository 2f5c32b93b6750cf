"""What the KAITO controller decides for a preset Workspace or InferenceSet, per KAITO
release (``data/kaito-presets.yaml``, written by ``tools/kaito_presets.py``).

A preset Workspace states the model by preset name and the nodes by instance type; the
controller picks the rest: the image every vLLM preset runs (``kaito-base``, so the vLLM
release), the preset's Hugging Face model and revision, ``--tensor-parallel-size`` from the
instance type's GPU count, ``--gpu-memory-utilization`` and, from v0.7.0, the node count
(its estimator, ``resource.count`` deprecated: :func:`estimate_nodes`). Those facts change
with the release, so they are keyed by it (``versions.kaito`` in the cluster profile);
:func:`defining` gives the releases whose presets hold a name.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from gpustrata.catalog.packaged import packaged_mapping, per_release

__all__ = [
    "ESTIMATOR_SOURCES",
    "EstimatorInputs",
    "KaitoPreset",
    "KaitoRelease",
    "base_image_vllm",
    "defining",
    "estimate_nodes",
    "kaito_release",
    "kaito_releases",
]

ESTIMATOR_SOURCES = {
    "kv-overhead": "kaito-project/kaito@v0.10.0:pkg/workspace/estimator/nodesestimator/estimator.go"
    " (advancednodesestimator/estimator.go v0.7.0-v0.9.4, the same formula)",
    "kv-weight-overhead": (
        "kaito-project/kaito@v0.12.0:pkg/workspace/estimator/nodesestimator/estimator.go"
    ),
}
"""Where each node estimator formula was read (``EstimateNodeCount``)."""

_GIB = 1 << 30
# The estimators' constants (both formulas): --gpu-memory-utilization, the weights' growth
# once loaded, the fixed per-GPU overhead and the context when no max-model-len is stated.
_UTILIZATION = Fraction(84, 100)
_WEIGHT_EXPANSION = Fraction(102, 100)
_BASE_OVERHEAD = Fraction(23, 10) * _GIB
_WEIGHT_OVERHEAD = Fraction(5, 100)
DEFAULT_CONTEXT = 2048


@dataclass(frozen=True, slots=True)
class EstimatorInputs:
    """What KAITO's node estimator reads of one preset at one release."""

    size: str
    """The model files' size as KAITO states it (``131.42Gi``, a Kubernetes quantity)."""
    bytes_per_token: int
    """KV-cache bytes per token (all layers)."""
    distributed: bool
    """Whether the preset may span nodes (``SupportDistributedInference``)."""
    tensor_parallel: bool
    """False where the preset disables tensor parallelism (one GPU holds it all)."""

    @property
    def size_bytes(self) -> int:
        """:attr:`size` in bytes, rounded up as a Kubernetes quantity's ``Value()``."""
        number, unit = self.size[:-2], self.size[-2:]
        if unit != "Gi":
            raise ValueError(f"KAITO preset size {self.size!r} is not in Gi")
        try:
            return math.ceil(Fraction(Decimal(number)) * _GIB)
        except InvalidOperation as exc:
            raise ValueError(f"KAITO preset size {self.size!r} is not a number") from exc


@dataclass(frozen=True, slots=True)
class KaitoPreset:
    """One preset's model, as a release's ``supported_models.yaml`` names it."""

    model: str
    """The Hugging Face repository (``meta-llama/Llama-3.3-70B-Instruct``)."""
    revision: str
    """The commit KAITO pins (``--code-revision``)."""
    estimator: EstimatorInputs | None = None
    """What the release's node estimator reads of it; None where no estimator runs or the
    release states no size for it."""


@dataclass(frozen=True, slots=True)
class KaitoRelease:
    """The facts of one KAITO release."""

    release: str
    """``0.12.0`` (tag ``v0.12.0``)."""
    source: str
    """``kaito-project/kaito@v0.12.0 (files read)``."""
    base_image: str
    """The image every vLLM preset runs (``mcr.microsoft.com/aks/kaito/kaito-base:0.5.0``)."""
    vllm: str
    """The vLLM release that image installs (the ``requirements.txt`` pin)."""
    parallelism: str
    """``all-gpus`` (``--tensor-parallel-size`` = the instance type's GPU count) or
    ``data-parallel-when-fits`` (1, with ``--data-parallel-size`` = the GPU count, when the
    model's files take under half of one GPU's memory; else the GPU count)."""
    node_count: str
    """``resource.count`` or ``estimated`` (the controller's node estimator decides)."""
    estimator: str | None
    """The estimator's formula (:data:`ESTIMATOR_SOURCES`); None where ``resource.count``
    decides."""
    max_model_len: str
    """``auto`` (KAITO passes ``--max-model-len=auto``) or ``computed`` (its own figure)."""
    gpu_memory_utilization: str | None
    """The ``--gpu-memory-utilization`` KAITO passes; None: computed from the GPU."""
    gpu_memory_utilization_by_gpu: Mapping[str, str]
    """Its overrides by GPU model name (``NVIDIA A10`` -> ``0.82``)."""
    presets: Mapping[str, KaitoPreset]
    """Preset name -> its model."""
    served: Mapping[str, tuple[str, ...]]
    """Kind (``Workspace``, ``InferenceSet``) -> the API versions its CRD serves."""

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether this release serves *kind* at *api_version* (``kaito.sh/v1beta1``)."""
        group, _, version = api_version.rpartition("/")
        return group == "kaito.sh" and version in self.served.get(kind, ())


def _inputs(raw: Any) -> EstimatorInputs | None:
    if not raw:
        return None
    return EstimatorInputs(
        str(raw["size"]),
        int(raw["bytes_per_token"]),
        bool(raw["distributed"]),
        bool(raw["tensor_parallel"]),
    )


_PATH = "data/kaito-presets.yaml"


@functools.cache
def _catalogue() -> dict[str, KaitoRelease]:
    doc = packaged_mapping(_PATH)
    source = str(doc["source"])
    # files by their name, a folder (config/crd/bases) whole
    paths = list(
        dict.fromkeys(p.rsplit("/", 1)[-1] if "." in p else p for p in map(str, doc["paths"]))
    )

    def build(row: Mapping[str, Any], release: str) -> KaitoRelease:
        gmu = row.get("gpu_memory_utilization")
        return KaitoRelease(
            release,
            f"{source.format(release=release, path='').rstrip(':')} ({', '.join(paths)})",
            str(row["base_image"]),
            str(row["vllm"]),
            str(row["parallelism"]),
            str(row["node_count"]),
            str(row["estimator"]) if row.get("estimator") else None,
            str(row["max_model_len"]),
            str(gmu) if gmu is not None else None,
            {str(k): str(v) for k, v in (row.get("gpu_memory_utilization_by_gpu") or {}).items()},
            {
                str(name): KaitoPreset(
                    str(p["model"]), str(p["revision"]), _inputs(p.get("estimator"))
                )
                for name, p in (row.get("presets") or {}).items()
            },
            {str(k): tuple(map(str, v)) for k, v in (row.get("served") or {}).items()},
        )

    return per_release(_PATH, "kaito", build)


def kaito_releases() -> tuple[str, ...]:
    """The KAITO releases whose preset facts are catalogued, oldest first."""
    return tuple(_catalogue())


def kaito_release(release: str) -> KaitoRelease | None:
    """The facts of KAITO *release* (``0.12.0`` or ``v0.12.0``); None when not catalogued."""
    return _catalogue().get(release.removeprefix("v"))


def defining(
    preset: str, api_version: str | None = None, kind: str | None = None
) -> tuple[KaitoRelease, ...]:
    """The catalogued releases whose presets include *preset* (``llama-3.3-70b-instruct``)
    and, given *api_version* and *kind*, that serve that kind at that version, oldest first:
    the others reject such an object."""
    return tuple(
        r
        for r in _catalogue().values()
        if preset in r.presets and (kind is None or r.serves(api_version or "", kind))
    )


def base_image_vllm(image: str) -> tuple[str, KaitoRelease] | None:
    """(the vLLM release, the first KAITO release that ships it) of a ``kaito-base`` image
    KAITO runs its vLLM presets on (``mcr.microsoft.com/aks/kaito/kaito-base:0.5.0``); None
    for any other image."""
    if image not in _base_images():  # most images: no release is built (issue 35)
        return None
    for row in _catalogue().values():
        if row.base_image == image:
            return row.vllm, row
    return None


@functools.cache
def _base_images() -> frozenset[str]:
    """Every catalogued release's ``base_image``, read from the document without building
    the releases (every vLLM image asks :func:`base_image_vllm`)."""
    return frozenset(str(row["base_image"]) for row in packaged_mapping(_PATH)["releases"])


def estimate_nodes(
    formula: str,
    preset: EstimatorInputs,
    node_gpu_memory_gib: int,
    gpus: int,
    context: int | None,
) -> int | str:
    """The node count KAITO's estimator gives one replica (``status.targetNodeCount``), or
    why it refuses the Workspace (its error, worded), re-derived from
    :data:`ESTIMATOR_SOURCES`: the weights (files x 1.02) over the GPUs' budget, each GPU's
    share of the node's memory x 0.84 less 2.3 GiB and the KV cache of *context* tokens
    (``max-model-len`` of the inference ConfigMap, else 2048) split over the node's GPUs;
    ``kv-weight-overhead`` divides what is left by 1.05 (activations growing with the
    weights). GPUs needed = floor(weights / per-GPU budget) + 1, nodes = those over the
    node's GPUs, rounded up. Exact fractions where KAITO computes in float64 (a difference
    only at a byte's boundary)."""
    if formula not in ESTIMATOR_SOURCES:
        raise ValueError(f"unknown KAITO estimator formula {formula!r}")
    weights = preset.size_bytes * _WEIGHT_EXPANSION
    per_gpu = Fraction(node_gpu_memory_gib * _GIB, gpus)
    budget = per_gpu * _UTILIZATION
    tokens = context if context is not None and context > 0 else DEFAULT_CONTEXT
    reserve = _BASE_OVERHEAD + Fraction(tokens * preset.bytes_per_token, gpus)
    gib = float(_GIB)
    if formula == "kv-overhead" and not preset.tensor_parallel and weights + reserve > budget:
        return (
            f"the model ({float(weights) / gib:.1f} GiB loaded) and its overhead "
            f"({float(reserve) / gib:.1f} GiB) do not fit one GPU's {float(budget) / gib:.1f} "
            "GiB and the preset disables tensor parallelism"
        )
    if budget <= reserve:
        return (
            f"one GPU's {float(budget) / gib:.1f} GiB (0.84 of {float(per_gpu) / gib:.1f}) "
            f"holds no more than the overhead, {float(reserve) / gib:.1f} GiB (2.3 GiB + the "
            f"KV cache of {tokens} tokens)"
        )
    room = budget - reserve
    if formula == "kv-weight-overhead":
        room /= 1 + _WEIGHT_OVERHEAD
    needed = math.floor(weights / room) + 1
    nodes = -(-needed // gpus)
    if nodes > 1 and not preset.tensor_parallel:
        return f"it needs {nodes} nodes and the preset disables tensor parallelism"
    if nodes > 1 and not preset.distributed:
        return (
            f"it needs {nodes} nodes and the preset does not support distributed inference "
            "(KAITO asks for a node with more GPU memory)"
        )
    return nodes
