"""GPU- and model-dependent engine defaults of the reference release (block size, batch budget)."""

from __future__ import annotations

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.vllm.memory import cuda_total_bytes
from gpustrata.vllm.reference import SRC_ARG_UTILS, SRC_VLLM, VLLM_VERSION
from gpustrata.vllm.terms import GIB, gib

__all__ = [
    "default_block_size",
    "default_max_num_batched_tokens",
    "default_max_num_seqs",
]


# --------------------------------------------------------------------------- defaults


def default_block_size(arch: ModelArchitecture, gpu: GpuModel | None = None) -> tuple[int, str]:
    """The reference vLLM release's block size when ``--block-size`` is unset, with the reason.

    ``CacheConfig.DEFAULT_BLOCK_SIZE`` is 16 and the default CUDA backends accept it
    (FlashAttention ``MultipleOf(16)``); on compute capability 10.x MLA models get
    FlashInfer-MLA, which supports only 32 and 64, so its smallest, 32
    (``vllm/platforms/cuda.py`` backend priorities, ``AttentionBackend.get_preferred_block_size``).
    """
    if arch.attention == "mla" and gpu is not None and gpu.compute_capability.startswith("10."):
        return 32, f"FlashInfer-MLA on compute capability {gpu.compute_capability} ({SRC_VLLM})"
    return 16, f"CacheConfig.DEFAULT_BLOCK_SIZE ({SRC_VLLM} vllm/config/cache.py)"


def _is_large_tier(gpu: GpuModel) -> tuple[bool, bool]:
    """(>= 160 GiB, >= 70 GiB and not A100) as ``get_batch_defaults`` tiers devices."""
    total = cuda_total_bytes(gpu)
    big = total >= 160 * GIB
    mid = total >= 70 * GIB and "a100" not in f"{gpu.id} {gpu.name}".lower()
    return big, mid


def default_max_num_batched_tokens(
    gpu: GpuModel, max_model_len: int, chunked_prefill: bool = True
) -> tuple[int, str]:
    """``vllm serve``'s max_num_batched_tokens default (OPENAI_API_SERVER usage context).

    16384 on GPUs with >= 160 GiB, 8192 on >= 70 GiB except A100, else 2048
    (``EngineArgs.get_batch_defaults``); without chunked prefill raised to max_model_len.
    """
    big, mid = _is_large_tier(gpu)
    value = 16384 if big else 8192 if mid else 2048
    why = (
        f"vLLM {VLLM_VERSION} default for {gpu.id} ({gib(cuda_total_bytes(gpu))}): "
        f"{value} ({SRC_ARG_UTILS} get_batch_defaults, OPENAI_API_SERVER)"
    )
    if not chunked_prefill and max_model_len > value:
        return (
            max_model_len,
            why + f", raised to max_model_len {max_model_len} (no chunked prefill)",
        )
    return value, why


def default_max_num_seqs(gpu: GpuModel) -> tuple[int, str]:
    """``vllm serve``'s max_num_seqs default: 1024 on the >= 70 GiB tiers, else 256."""
    big, mid = _is_large_tier(gpu)
    value = 1024 if big or mid else 256
    return (
        value,
        f"vLLM {VLLM_VERSION} default for {gpu.id}: {value} ({SRC_ARG_UTILS} get_batch_defaults)",
    )
