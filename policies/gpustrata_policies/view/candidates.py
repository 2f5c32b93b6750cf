"""The values an unknown GPU can take: every catalogued GPU an engine may run on when the
Pod names none (or a family), and the engine's capacity inputs on each of them. A rule
decides on such an engine only where its verdict is the same on every candidate
(:func:`gpustrata_policies.rules._common.judged_engines`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.capacity import Inputs, gpu_estimate, model_and_settings
from gpustrata_policies.view.engines import (
    EngineSite,
    GpuRef,
    gpu_resources,
    karpenter_gpu,
    site_gpus,
)
from gpustrata_policies.view.nodes import (
    gpu_model_of_selectors,
    gpu_pools,
    gpu_variants_named,
    targeted_pools,
)
from gpustrata_policies.view.profile import profile_hint

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel

__all__ = ["CandidateInputs", "GpuCandidates", "candidate_inputs", "gpu_candidates"]


@dataclass(frozen=True, slots=True)
class GpuCandidates:
    """Every catalogued GPU an engine whose GPU is unknown may run on: the values the
    unknown fact can take. A rule decides on such an engine only where its verdict is the
    same on each of them (:func:`gpustrata_policies.rules._common.judged_engines`)."""

    gpus: tuple[GpuModel, ...]
    """The candidates, smallest memory first."""
    unknown: str
    """Why the GPU is unknown (:func:`site_gpus`' reason)."""
    basis: str
    """What the set is (``every catalogued NVIDIA GPU of compute capability 7.0 or more``)."""
    hint: str
    """The cluster-profile key that would decide it (``gpu_products`` or ``pools``)."""
    unnamed: str
    """Why no one GPU is named (``the Pod names no GPU``), for a finding's wording."""


# Image words of vLLM builds for other accelerators than NVIDIA's (the vllm-openai-rocm and
# -cpu variants, vllm_args.vllm_tagged_image; AMD's rocm/vllm): no catalogued GPU is theirs.
_NOT_CUDA_BUILDS = ("rocm", "-cpu", "/cpu", "tpu", "neuron", "xpu", "hpu", "gaudi")


def gpu_candidates(ctx: RuleContext, site: EngineSite) -> GpuCandidates | None:
    """The catalogued GPUs *site* may run on when its GPU is unknown because the Pod names
    no GPU the catalogue knows by one model: it selects no GPU label (or only labels that
    name no GPU, such as a vendor's own), or a family label naming several catalogued
    models (``Tesla-V100``). None where the GPU is known, or unknown for a reason that no
    candidate set covers: a described pool or NodePool (its reason stands), a label or Ray
    ``accelerator_type`` naming a GPU the catalogue lacks, a MIG slice, GPUs that are not
    ``nvidia.com/gpu`` (the catalogue holds NVIDIA GPUs only), or an image built for another
    accelerator (ROCm, CPU, ...).

    Without a GPU label the set is every catalogued NVIDIA GPU of at least the lowest
    compute capability any vLLM release's CUDA build runs on (release catalogue
    ``cuda_compute_capability``): a superset of what any image can run on."""
    found = site_gpus(ctx, site)
    pod = site.gpu_pod
    if not isinstance(found, str) or pod is None:
        return None
    if set(gpu_resources(ctx, pod)) != {"nvidia.com/gpu"}:
        return None  # MIG slices, another vendor's resource, or several kinds
    words = [
        w for i in site.images if isinstance(i, str) for w in _NOT_CUDA_BUILDS if w in i.lower()
    ]
    if words:
        return None  # a build for another accelerator
    pools = gpu_pools(ctx)
    if pools and targeted_pools(pod, pools):
        return None  # a described pool says what it runs (or why that is unknown)
    wanted = site.llm_config.get("accelerator_type")
    if isinstance(wanted, str) and wanted:
        return None  # Ray places it on that GPU type, which the catalogue lacks
    labels = pod.selected_labels()
    if karpenter_gpu(labels) is not None:
        return None
    gpu, where = gpu_model_of_selectors(pod)
    if gpu is not None:
        return None
    if where:
        variants = gpu_variants_named(where.partition("=")[2])
        if len(variants) < 2:
            return None  # a GPU the catalogue lacks: no catalogued GPU is a candidate
        gpus = sorted(variants, key=lambda g: (g.memory_gib, g.id))
        basis = f"each catalogued GPU that {where} names"
        hint = profile_hint("gpu_products")
        unnamed = f"the {where.partition('=')[2]} label names no single model"
    else:
        floor = catalogs.vllm_releases().cuda_cc_floor
        if floor is None:
            return None
        lowest = divmod(round(floor.value * 10), 10)  # 7.5 -> (7, 5)
        gpus = sorted(
            (g for g in catalogs.hardware().gpus.values() if g.capability >= lowest),
            key=lambda g: (g.memory_gib, g.id),
        )
        basis = (
            f"every catalogued NVIDIA GPU of compute capability {floor.value:.1f} or more, the "
            f"lowest any vLLM release's CUDA build runs on ({floor.source})"
        )
        hint = profile_hint("gpu_products or pools")
        unnamed = "the Pod names no GPU"
    if not gpus:
        return None
    return GpuCandidates(tuple(gpus), found, basis, hint, unnamed)


@dataclass(frozen=True, slots=True)
class CandidateInputs:
    """The capacity inputs of an engine whose GPU is unknown, on each candidate GPU
    (:func:`~gpustrata_policies.view.engines.gpu_candidates`): a rule reports only what
    holds on all of them."""

    candidates: GpuCandidates
    inputs: tuple[Inputs | str, ...]
    """Per candidate GPU (same order): its inputs, or why the planner cannot size it there."""


def candidate_inputs(ctx: RuleContext, site: EngineSite) -> CandidateInputs | None:
    """The capacity inputs of *site* on every GPU it may run on when its GPU is unknown
    (None where it is known, or unknown for a reason no candidate set covers, or where the
    model or settings are unknown as well: the GPU reason stands then); once per engine."""
    key = ("candidate-inputs", site.path, site.ray)
    found: CandidateInputs | None = ctx.index.fact(
        site.obj, key, lambda: _candidate_inputs(ctx, site)
    )
    return found


def _candidate_inputs(ctx: RuleContext, site: EngineSite) -> CandidateInputs | None:
    candidates = gpu_candidates(ctx, site)
    if candidates is None:
        return None
    read = model_and_settings(site)
    if isinstance(read, str):
        return None
    model, version, settings = read
    out: list[Inputs | str] = []
    for gpu in candidates.gpus:
        estimate = gpu_estimate(ctx, site, model.arch, gpu, settings)
        ref = GpuRef(gpu, "one of the candidates: the Pod's GPU is unknown")
        out.append(
            estimate
            if isinstance(estimate, str)
            else Inputs(site, model, ref, version, settings, estimate)
        )
    return CandidateInputs(candidates, tuple(out))
