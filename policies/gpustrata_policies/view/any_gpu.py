"""Capacity of an engine whose GPU model is unknown, bounded by the catalogued GPU with the
most memory: a shortfall there is one on every catalogued GPU (V003, V004; issue 30)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from gpustrata.core.unknown import UnknownInput
from gpustrata_policies.findings import NotEvaluated, RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.capacity import (
    Inputs,
    capacity_inputs,
    engine_settings,
    engine_sites,
    engine_version,
    not_evaluated_reason,
    resolve_model,
    site_estimate,
)
from gpustrata_policies.view.engines import EngineSite, GpuRef, gpu_resources, site_gpus
from gpustrata_policies.view.objects import K8sObject

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel


@dataclass(frozen=True, slots=True)
class AnyGpu:
    """An engine whose GPU model is unknown, estimated on the catalogued GPU with the most
    memory: a memory shortfall there (weights, one sequence's KV cache) is one on every
    catalogued GPU, whichever the Pod lands on."""

    inputs: Inputs
    """The engine on that GPU (its :class:`GpuRef` says why it stands for any GPU)."""
    record: NotEvaluated
    """The "not evaluated" record to give where the shortfall is not certain."""

    @property
    def room(self) -> int:
        """Bytes per GPU vLLM may use there (gpu_memory_utilization x memory), less the
        weights: an upper bound of the KV cache on any catalogued GPU (activations, CUDA
        graphs and runtime overhead only lower it)."""
        est = self.inputs.estimate
        return int(est.memory.requested.value - est.weights.bytes_per_gpu)


def largest_gpu() -> GpuModel:
    """The catalogued GPU with the most memory (the hardware catalogue holds NVIDIA GPUs)."""
    return max(catalogs.hardware().gpus.values(), key=lambda g: (g.memory_gib, g.id))


def estimated_engines_any_gpu(
    ctx: RuleContext, obj: K8sObject
) -> Iterator[Inputs | NotEvaluated | AnyGpu]:
    """:func:`estimated_engines`, with an engine whose only missing input is its GPU model
    (whole ``nvidia.com/gpu`` GPUs, the model and settings known) given as :class:`AnyGpu`
    on :func:`largest_gpu` with the record it otherwise gets: a rule reports a shortfall
    there as one on any GPU and gives the record otherwise (never a pass: a GPU smaller
    than every catalogued one exists)."""
    for site in engine_sites(ctx, obj):
        found = capacity_inputs(ctx, site)
        if not isinstance(found, str):
            yield from found
            continue
        record = ctx.not_evaluated(obj, not_evaluated_reason(site, found))
        bound = ctx.memo(("capacity-any-gpu", id(site)), partial(_any_gpu, ctx, site, found))
        yield record if bound is None else AnyGpu(bound, record)


def _any_gpu(ctx: RuleContext, site: EngineSite, reason: str) -> Inputs | None:
    if not isinstance(site_gpus(ctx, site), str) or site.gpu_pod is None:
        return None  # the GPU is known: the record is for another missing input
    resources = gpu_resources(ctx, site.gpu_pod)
    if set(resources) != {"nvidia.com/gpu"}:
        return None  # MIG slices, DRA claims, other vendors: not whole catalogued GPUs
    try:
        model = resolve_model(site)
        if isinstance(model, str):
            return None
        version = engine_version(site)
        settings = engine_settings(site, model.arch, version.v0, version.version)
    except UnknownInput:  # an input the controller or a preview fills
        return None
    if isinstance(settings, str):
        return None
    gpu = largest_gpu()
    estimate = site_estimate(ctx, site, model.arch, gpu, settings)
    if isinstance(estimate, str):
        return None
    where = (
        f"the catalogued GPU with the most memory, {gpu.memory_gib:g} GiB, standing for any "
        f"GPU: {reason.removeprefix(site.name + ': ')}"
    )
    return Inputs(site, model, GpuRef(gpu, where), version, settings, estimate)
