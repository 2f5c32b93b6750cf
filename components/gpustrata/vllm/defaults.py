"""The engine defaults the planner applies to unset settings, from the release catalogue.

No value lives here: :func:`~gpustrata.catalog.vllm_facts.facts_for` reads each one (and
its source) from ``catalog/data/vllm-releases.yaml`` for the reference release, and these
functions word it for the planner's ``defaults`` notes.
"""

from __future__ import annotations

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.catalog.vllm_facts import Default, ReleaseFacts, cited, facts_for
from gpustrata.catalog.vllm_release_types import VllmReleaseCatalogError
from gpustrata.vllm.memory import cuda_total_bytes
from gpustrata.vllm.terms import GIB, gib

__all__ = [
    "default_block_size",
    "default_gpu_memory_utilization",
    "default_max_num_batched_tokens",
    "default_max_num_seqs",
    "planner_facts",
    "release_gpu_memory_utilization",
]


def planner_facts() -> ReleaseFacts:
    """The facts of the release the planner follows (the catalogue's reference)."""
    return facts_for(None)


def _need(found: Default | None, what: str) -> Default:
    if found is None:
        facts = planner_facts()
        raise VllmReleaseCatalogError(
            f"vllm-releases.yaml has no {what} for the reference release {facts.release}: "
            "read it in that release and add it"
        )
    return found


def default_gpu_memory_utilization() -> float:
    """The reference release's ``gpu_memory_utilization`` default."""
    return float(_need(planner_facts().gpu_memory_utilization, "memory_defaults row").value)


def release_gpu_memory_utilization(release: str | None) -> tuple[float, str]:
    """The unset ``gpu_memory_utilization`` of *release* (read in it, or agreed by the read
    releases around it), else the reference release's, and how it was found."""
    reference = planner_facts().release
    found = facts_for(release).gpu_memory_utilization if release else None
    if found is not None and release != reference:
        return float(found.value), (
            f"gpu_memory_utilization unset: vLLM {release}'s default {found.value:g} "
            f"({found.source})"
        )
    ref = _need(planner_facts().gpu_memory_utilization, "memory_defaults row")
    unread = f" (vLLM {release}'s was not read)" if release not in (None, reference) else ""
    return float(ref.value), (
        f"gpu_memory_utilization unset: vLLM {reference}'s default {ref.value}{unread}"
    )


def default_block_size(arch: ModelArchitecture, gpu: GpuModel | None = None) -> tuple[int, str]:
    """The reference release's block size when ``--block-size`` is unset, with the reason.

    ``CacheConfig.DEFAULT_BLOCK_SIZE``, or for MLA models on the GPU generations where the
    first MLA backend takes only larger pages, that backend's smallest (catalogue
    ``block_size[].default`` / ``mla``).
    """
    facts = planner_facts()
    cc = gpu.compute_capability if gpu is not None else None
    found = _need(facts.block_size(arch.attention == "mla", cc), "block_size default")
    block = facts.block
    assert block is not None  # a default was found in it
    for m in block.mla:
        if found.source == m.source and found.value == m.value:
            return m.value, f"FlashInfer-MLA on compute capability {cc} (vllm {found.read_in})"
    return int(found.value), f"CacheConfig.DEFAULT_BLOCK_SIZE ({cited(found.source)})"


def _total_gib(gpu: GpuModel) -> float:
    return cuda_total_bytes(gpu) / GIB


def default_max_num_batched_tokens(
    gpu: GpuModel, max_model_len: int, chunked_prefill: bool = True
) -> tuple[int, str]:
    """``vllm serve``'s max_num_batched_tokens default (OPENAI_API_SERVER usage context):
    the reference release's ``get_batch_defaults`` row for the GPU's CUDA memory; without
    chunked prefill raised to max_model_len."""
    label = f"{gpu.id} {gpu.name}"
    found = _need(planner_facts().max_num_batched_tokens(_total_gib(gpu), label), "scheduler entry")
    value = int(found.value)
    why = (
        f"vLLM {found.read_in} default for {gpu.id} ({gib(cuda_total_bytes(gpu))}): "
        f"{value} ({cited(found.source)} get_batch_defaults, OPENAI_API_SERVER)"
    )
    if not chunked_prefill and max_model_len > value:
        return (
            max_model_len,
            why + f", raised to max_model_len {max_model_len} (no chunked prefill)",
        )
    return value, why


def default_max_num_seqs(gpu: GpuModel) -> tuple[int, str]:
    """``vllm serve``'s max_num_seqs default: the reference release's
    ``get_batch_defaults`` row for the GPU's CUDA memory."""
    label = f"{gpu.id} {gpu.name}"
    found = _need(planner_facts().max_num_seqs(_total_gib(gpu), label), "scheduler entry")
    value = int(found.value)
    return (
        value,
        f"vLLM {found.read_in} default for {gpu.id}: {value} "
        f"({cited(found.source)} get_batch_defaults)",
    )
