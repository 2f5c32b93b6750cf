"""Capacity planner: weights, KV cache, memory budget, startup and step time of one engine.

Pure functions over a :class:`~gpustrata.catalog.architectures.ModelArchitecture` and a
:class:`~gpustrata.catalog.hardware.GpuModel`; no Pulumi import. Every figure carries
the working that produced it, so ``plan``, ``capacity`` and the rules can show it.

KV-cache arithmetic follows the reference vLLM release of the release catalogue
(``catalog/data/vllm-releases.yaml``) exactly (file paths below are in its wheel):

* page of one layer (``vllm/v1/kv_cache_interface.py`` ``AttentionSpec.page_size_bytes``):
  ``num_kv_heads x block_size x (head_size + head_size_v) x dtype bytes`` with
  ``num_kv_heads = max(1, total_kv_heads // TP)`` (``vllm/config/model.py``
  ``get_num_kv_heads``); MLA (``MLAAttentionSpec``) stores one latent of
  ``kv_lora_rank + qk_rope_head_dim`` per token with ``num_kv_heads = 1`` and
  ``head_size_v = 0``; ``fp8_ds_mla`` packs 656 bytes per token
  (``vllm/model_executor/layers/attention/mla_attention.py``);
* layers are grouped into KV-cache groups (``vllm/v1/core/kv_cache_planning.py``
  ``get_kv_cache_groups``: one group when every layer has the same spec; for hybrid
  full/sliding models, groups of ``min`` layers per attention type, or ``max`` when
  ``max < 1.5 x min``, taking ``layers[i::num_groups]``);
* ``num_blocks = available_memory // bytes_per_block`` where ``bytes_per_block`` is the
  widest group's sum of page sizes on that worker (``_get_kv_cache_bytes_per_block``),
  and every worker takes the smallest count (``get_kv_cache_configs``);
* one request of ``max_model_len`` must fit in ``available - bytes_per_block`` (the null
  block is held back) or vLLM refuses to start (``_check_enough_kv_cache_memory``:
  "To serve at least one request with the model's max seq len ...");
* the "GPU KV cache size" vLLM logs is ``int(num_blocks / blocks_per_request x
  max_model_len)`` (``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``).

The memory budget, the startup time and the longest engine step are estimates; each
term states its formula and where its default comes from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from gpustrata.catalog.architectures import (
    ModelArchitecture,
    ModelCatalog,
    architecture_from_hf_config,
    load_model_catalog,
)
from gpustrata.catalog.hardware import GpuModel
from gpustrata.catalog.vllm_releases import load_vllm_releases
from gpustrata.spec.stack import ModelSpec
from gpustrata.vllm.settings import EngineSettings

__all__ = [
    "DEFAULT_EFFICIENCY",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "LOAD_GBPS_DEFAULTS",
    "STARTUP_SAFETY_FACTOR",
    "VLLM_VERSION",
    "CapacityError",
    "CapacityEstimate",
    "KvCacheGroup",
    "KvCacheLayout",
    "MemoryBudget",
    "StartupEstimate",
    "StepEstimate",
    "Term",
    "WeightsEstimate",
    "activation_bytes",
    "cache_dtype_bytes",
    "cuda_total_bytes",
    "default_block_size",
    "default_max_num_batched_tokens",
    "default_max_num_seqs",
    "estimate_capacity",
    "estimate_for_model",
    "gb",
    "gib",
    "kv_cache_blocks",
    "largest_passing",
    "memory_budget",
    "model_dtype_bytes",
    "model_settings",
    "pp_layer_partition",
    "resolve_architecture",
    "startup_estimate",
    "step_estimate",
    "weights_estimate",
]

VLLM_VERSION = load_vllm_releases().reference
"""The reference vLLM release, whose arithmetic and defaults this module follows."""
_V = f"vllm {VLLM_VERSION}"
_MINOR = ".".join(VLLM_VERSION.split(".")[:2])
SRC_KV_SPEC = f"{_V} vllm/v1/kv_cache_interface.py"
SRC_KV_PLAN = f"{_V} vllm/v1/core/kv_cache_planning.py"
SRC_KV_UTILS = f"{_V} vllm/v1/core/kv_cache_utils.py"
SRC_MODEL_CONFIG = f"{_V} vllm/config/model.py"
SRC_ATTENTION = f"{_V} vllm/model_executor/layers/attention/attention.py"
SRC_WORKER = f"{_V} vllm/v1/worker/gpu_worker.py determine_available_memory"
SRC_PROFILING = f"{_V} vllm/utils/mem_utils.py memory_profiling"
SRC_ARG_UTILS = f"{_V} vllm/engine/arg_utils.py"
SRC_PP = f"{_V} vllm/distributed/utils.py get_pp_indices"

GIB = 1 << 30
GB = 10**9

DEFAULT_GPU_MEMORY_UTILIZATION = load_vllm_releases().gpu_memory_utilization.value
"""The reference release's ``CacheConfig.gpu_memory_utilization`` default (catalogue)."""

STARTUP_SAFETY_FACTOR = 1.5
"""Startup probe budget = estimated startup x this factor (gpustrata default)."""

DEFAULT_EFFICIENCY = 0.4
"""Fraction of dense BF16 peak a large prefill step reaches (gpustrata default: model
FLOP utilisation of 30-60 % is typical for long prefills; 0.4 errs towards a longer
step, i.e. a safer liveness budget)."""

WeightSourceName = Literal["huggingface", "s3", "pvc", "local-nvme"]

LOAD_GBPS_DEFAULTS: Mapping[str, tuple[float, str]] = {
    "huggingface": (
        0.25,
        "gpustrata default: half the ~500 MB/s that plain Python downloads top out at "
        "(huggingface/hf_transfer README), for shared Hub bandwidth plus the read back "
        "from the download cache",
    ),
    "s3": (
        1.0,
        "gpustrata default: Run:ai Model Streamer (vLLM --load-format runai_streamer) "
        "read 15 GB in 14.3 s (~1.05 GB/s) at concurrency 16 in NVIDIA's benchmark "
        "(developer.nvidia.com/blog/reducing-cold-start-latency-for-llm-inference-with-"
        "nvidia-runai-model-streamer); S3 matches or beats that with enough concurrency",
    ),
    "pvc": (
        0.3,
        "gpustrata default: vLLM's safetensors loader read 15 GB from an EBS gp3 volume "
        "in 48 s (~0.31 GB/s) in NVIDIA's Run:ai Model Streamer benchmark; gp3's baseline "
        "is 125 MiB/s unless more throughput is provisioned",
    ),
    "local-nvme": (
        2.0,
        "gpustrata default: the Run:ai Model Streamer read 15 GB from an io2 SSD in 7.5 s "
        "(~2 GB/s) in NVIDIA's benchmark; instance-store NVMe is at least that fast",
    ),
}
"""Weight load bandwidth in GB/s (10^9 bytes/s) per ``weights.source`` with its source."""

_INIT_BASE_S = 30
_INIT_COMPILE_S = 60
_INIT_MOE_S = 90
_INIT_SOURCES = (
    "vLLM PR #11005: 'init engine (profile, create kv cache, warmup model) took 14.18 s' "
    "for Llama-3-8B without torch.compile, +25 s with it (torch.compile 19.4 s, CUDA graph "
    "capture 15 s); vLLM issue #47456 (0.24, H100): dense 8B 86.6 s cold to /health, "
    "Qwen3-30B-A3B fp8 init engine 143-264 s (DeepGEMM warmup ~82 s)"
)

# CUDA total (torch.cuda.mem_get_info) is below NVML's total by the driver's reservation:
# H100 80GB NVML 81559 MiB = 79.65 GiB vs 79.22 GiB in vLLM's own log (vLLM PR #10511).
_DRIVER_RESERVED_BYTES = int(0.45 * GIB)
_CUDA_GRAPH_BYTES = 1 * GIB
_RUNTIME_OVERHEAD_BYTES = 1 * GIB

_MODEL_DTYPES: Mapping[str, tuple[str, int]] = {
    "half": ("float16", 2),
    "float16": ("float16", 2),
    "fp16": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "bf16": ("bfloat16", 2),
    "float": ("float32", 4),
    "float32": ("float32", 4),
}
# vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE: fp8 variants are stored as 1-byte
# tensors (uint8 / float8_e4m3fn); "auto" takes the model dtype.
_CACHE_DTYPES: Mapping[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}
_FP8_DS_MLA_TOKEN_BYTES = 656
# Bits per parameter of quantised linear weights (scales included).
_QUANT_BITS: Mapping[str, tuple[float, str]] = {
    "fp8": (8.0, "FP8 e4m3 weights (per-tensor or 128x128 block scales, negligible)"),
    "fbgemm_fp8": (8.0, "FP8 weights"),
    "modelopt": (8.0, "ModelOpt FP8 weights"),
    "awq": (4.25, "4-bit weights + a 16-bit scale per group of 128 (4 + 16/128 bits)"),
    "awq_marlin": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "gptq": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "gptq_marlin": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "mxfp4": (
        4.25,
        "MXFP4 expert weights: 4-bit values + an 8-bit shared exponent per 32 (4 + 8/32 "
        "bits); attention and embeddings stay in the model dtype",
    ),
}
_VOCAB_PADDING = 64  # vllm/model_executor/layers/vocab_parallel_embedding.py


class CapacityError(ValueError):
    """An engine setting the capacity planner cannot evaluate (vLLM would refuse it too).

    ``setting`` names the engine setting (``tensor_parallel_size``, ``kv_cache_dtype``
    ...), so callers can map it to a flag or a config path.
    """

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        super().__init__(message)


@dataclass(frozen=True)
class Term:
    """One derived number and how it was derived (a formula with its inputs and source)."""

    value: int | float
    explanation: str

    def as_dict(self) -> dict[str, int | float | str]:
        """``{"value": ..., "explanation": ...}`` for JSON output."""
        return {"value": self.value, "explanation": self.explanation}


def gib(n: float) -> str:
    """Format bytes as GiB with two decimals."""
    return f"{n / GIB:.2f} GiB"


def gb(n: float) -> str:
    """Format bytes as GB (10^9) with one decimal."""
    return f"{n / GB:.1f} GB"


def largest_passing(test: Callable[[int], bool], high: int) -> int:
    """The largest n in 1..*high* with ``test(n)``, 0 when none (binary search: *test*
    holds up to some n and fails above it)."""
    low, best = 1, 0
    while low <= high:
        mid = (low + high) // 2
        if test(mid):
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


# --------------------------------------------------------------------------- dtypes


FLOAT16_REFUSED_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})
"""Model types vLLM refuses to run in float16 (reference release vllm/config/model.py
``_FLOAT16_NOT_SUPPORTED_MODELS``)."""


def model_dtype_bytes(arch: ModelArchitecture, model_dtype: str = "auto") -> tuple[str, int]:
    """Resolve vLLM ``--dtype`` to ``(dtype name, bytes per element)``.

    ``auto`` takes config.json's dtype; float32 checkpoints are served in bfloat16
    (``vllm/config/model.py`` ``_resolve_auto_dtype`` downcasts float32 to the
    platform's preferred dtype).
    """
    key = model_dtype.strip().lower()
    if key == "auto":
        name, size = _MODEL_DTYPES.get(arch.torch_dtype.lower(), ("bfloat16", 2))
        if name == "float32":
            return "bfloat16", 2
        return name, size
    if key not in _MODEL_DTYPES:
        known = ", ".join(["auto", *sorted(_MODEL_DTYPES)])
        raise CapacityError("dtype", f"dtype {model_dtype!r} is not one of {known}")
    name, size = _MODEL_DTYPES[key]
    if name == "float16" and arch.model_type in FLOAT16_REFUSED_MODEL_TYPES:
        raise CapacityError(
            "dtype",
            f"vLLM refuses float16 for model type {arch.model_type!r} ({arch.id}): numerical "
            f"instability ({_V} vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS); "
            "use bfloat16 or float32",
        )
    return name, size


def cache_dtype_bytes(
    arch: ModelArchitecture, cache_dtype: str = "auto", model_dtype: str = "auto"
) -> tuple[str, int]:
    """Resolve vLLM ``--kv-cache-dtype`` to ``(dtype name, bytes per element)``.

    ``auto`` uses the model dtype (``kv_cache_dtype_str_to_dtype``); fp8 variants are
    one byte. ``fp8_ds_mla`` is only valid for MLA models.
    """
    key = cache_dtype.strip().lower()
    if key == "auto":
        return model_dtype_bytes(arch, model_dtype)
    if key not in _CACHE_DTYPES:
        known = ", ".join(["auto", *_CACHE_DTYPES])
        raise CapacityError(
            "kv_cache_dtype",
            f"kv_cache_dtype {cache_dtype!r} is not modelled; use one of {known}",
        )
    if key == "fp8_ds_mla" and arch.attention != "mla":
        raise CapacityError(
            "kv_cache_dtype",
            f"kv_cache_dtype 'fp8_ds_mla' is only for MLA models; {arch.id} uses "
            f"{arch.attention} attention: use 'fp8' or 'auto'",
        )
    return key, _CACHE_DTYPES[key]


# --------------------------------------------------------------------------- layers


def pp_layer_partition(num_layers: int, pipeline_parallel_size: int) -> tuple[int, ...]:
    """Layers per pipeline stage, as ``get_pp_indices`` splits them (reference vLLM release).

    Even split; the remainder goes one each to the stages before the last, from the
    second-to-last backwards (``VLLM_PP_LAYER_PARTITION`` unset).
    """
    pp = pipeline_parallel_size
    if pp < 1 or pp > num_layers:
        raise CapacityError(
            "pipeline_parallel_size",
            f"pipeline_parallel_size {pp} must be between 1 and the model's {num_layers} layers",
        )
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def _check_parallelism(arch: ModelArchitecture, tp: int, pp: int) -> None:
    """Refuse TP/PP sizes vLLM refuses (``ModelConfig.verify_with_parallel_config``)."""
    if tp < 1:
        raise CapacityError("tensor_parallel_size", f"tensor_parallel_size {tp} must be >= 1")
    heads = arch.num_attention_heads
    if heads % tp:
        fits = ", ".join(str(d) for d in range(1, min(heads, 64) + 1) if heads % d == 0)
        raise CapacityError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} does not divide {arch.id}'s {heads} attention "
            f"heads (vLLM refuses to start); use one of {fits}",
        )
    kv = arch.num_key_value_heads
    if arch.attention != "mla" and (kv % tp if kv >= tp else tp % kv):
        raise CapacityError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} and {arch.id}'s {kv} KV heads: one must divide "
            "the other for vLLM's QKVParallelLinear",
        )
    pp_layer_partition(arch.num_hidden_layers, pp)


@dataclass(frozen=True)
class _LayerSpec:
    """One layer's KV spec as vLLM builds it (block size, bytes per token, window)."""

    kind: Literal["full_attention", "sliding_window", "mla"]
    block_size: int
    token_bytes: int
    window: int | None = None
    padded_page: int | None = None

    @property
    def page(self) -> int:
        """``page_size_bytes``: the padded page when padding applies."""
        return self.padded_page or self.token_bytes * self.block_size


def _sliding_block_size(block_size: int, kernel_block: int) -> int:
    """Block size of a sliding-window layer (``_largest_kernel_block_within``).

    vLLM picks the largest ``MultipleOf(kernel_block)`` size not above ``block_size``
    (FlashAttention and Triton on CUDA: 16; the CPU backend: 32), else the smallest.
    """
    largest = block_size // kernel_block * kernel_block
    return largest if largest >= kernel_block else kernel_block


def _layer_specs(
    arch: ModelArchitecture,
    tp: int,
    block_size: int,
    cache_dtype: str,
    dtype_bytes: int,
    sliding_kernel_block: int,
) -> tuple[list[_LayerSpec], str]:
    """Every layer's spec and the page formula in words."""
    if arch.attention == "mla":
        latent = arch.mla_latent_dim or 0
        if cache_dtype == "fp8_ds_mla":
            token = _FP8_DS_MLA_TOKEN_BYTES
            why = f"1 latent x {block_size} tokens x 656 B (fp8_ds_mla packed NoPE+RoPE+scales)"
        else:
            token = latent * dtype_bytes
            why = (
                f"1 latent x {block_size} tokens x (kv_lora_rank {arch.kv_lora_rank} + "
                f"qk_rope_head_dim {arch.qk_rope_head_dim}) x {dtype_bytes} B (MLA, not split "
                "by TP)"
            )
        return [_LayerSpec("mla", block_size, token)] * arch.num_hidden_layers, why
    heads = max(1, arch.num_key_value_heads // tp)
    token = heads * 2 * arch.head_dim * dtype_bytes
    why = (
        f"{heads} KV heads per rank (max(1, {arch.num_key_value_heads} // TP {tp})) x "
        f"{block_size} tokens x (K {arch.head_dim} + V {arch.head_dim}) x {dtype_bytes} B"
    )
    sw_block = _sliding_block_size(block_size, sliding_kernel_block)
    specs = [
        _LayerSpec("sliding_window", sw_block, token, arch.sliding_window)
        if kind == "sliding_attention"
        else _LayerSpec("full_attention", block_size, token)
        for kind in arch.layer_attention_types()
    ]
    return specs, why


def _unify_page_size(specs: list[_LayerSpec]) -> list[_LayerSpec]:
    """``unify_kv_cache_spec_page_size``: scale smaller pages' block size, else pad."""
    pages = {s.page for s in specs}
    if len(pages) <= 1:
        return specs
    top = max(pages)
    out: list[_LayerSpec] = []
    for s in specs:
        if s.page == top:
            out.append(s)
        elif top % s.page == 0:
            out.append(replace(s, block_size=s.block_size * (top // s.page)))
        elif s.kind != "mla":
            out.append(replace(s, padded_page=top))
        else:  # pragma: no cover - no catalogue model mixes MLA with other layers
            raise CapacityError("block_size", "MLA pages cannot be padded to a common size")
    return out


def _group_layers(specs: list[_LayerSpec]) -> list[tuple[_LayerSpec, list[int]]]:
    """``get_kv_cache_groups`` for the layer kinds the catalogue has."""
    if len(set(specs)) == 1:
        return [(specs[0], list(range(len(specs))))]
    specs = _unify_page_size(specs)
    buckets: dict[_LayerSpec, list[int]] = {}
    for index, spec in enumerate(specs):
        buckets.setdefault(spec, []).append(index)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < min(sizes) * 1.5:
        group_size = max(sizes)
    groups: list[tuple[_LayerSpec, list[int]]] = []
    for spec, layers in buckets.items():
        n = -(-len(layers) // group_size)
        groups.extend((spec, layers[i::n]) for i in range(n))
    return groups


def _promote_sliding(specs: list[_LayerSpec], block_size: int) -> list[_LayerSpec]:
    """``unify_hybrid_kv_cache_specs`` (hybrid manager off): sliding layers as full."""
    kinds = {s.kind for s in specs}
    if not ({"full_attention", "sliding_window"} <= kinds):
        return specs
    return [
        _LayerSpec("full_attention", block_size, s.token_bytes) if s.kind == "sliding_window" else s
        for s in specs
    ]


def _pages_per_request(spec: _LayerSpec, max_model_len: int, in_flight: int) -> int:
    """``cdiv(max_memory_usage_bytes, page_size_bytes)`` of one group's spec."""
    if spec.kind == "sliding_window" and spec.window is not None:
        tokens = min(spec.window - 1 + in_flight, max_model_len)
        return -(-tokens // spec.block_size) + 1
    return -(-max_model_len // spec.block_size)


@dataclass(frozen=True)
class KvCacheGroup:
    """One vLLM KV-cache group: layers sharing a block table."""

    kind: Literal["full_attention", "sliding_window", "mla"]
    layers: tuple[int, ...]
    """Global layer indices (0-based) in the group."""
    block_size: int
    page_size_bytes: int
    sliding_window: int | None
    pages_per_request: int
    """Blocks one request of max_model_len takes from the shared pool for this group."""


@dataclass(frozen=True)
class KvCacheLayout:
    """The KV cache vLLM V1 (reference release) builds on one worker for a given memory budget.

    ``num_blocks`` is what ``get_kv_cache_configs`` gives every worker (the smallest
    over pipeline stages); ``tokens`` and ``max_concurrency`` are what vLLM logs as
    "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request".
    """

    page_size_bytes: int
    """``spec.page_size_bytes``: bytes of one block of one layer."""
    num_blocks: int
    """Blocks per worker (``KVCacheConfig.num_blocks``, null block included)."""
    bytes_per_token: int
    """KV bytes one more token costs on one GPU over all its layers (limiting stage)."""
    tokens: int
    """vLLM's "GPU KV cache size": ``int(num_blocks / blocks_per_request x max_model_len)``."""
    explanation: str
    block_size: int = 16
    bytes_per_block: int = 0
    """Pool bytes per block on the limiting stage (widest group's pages summed)."""
    num_kv_heads_per_rank: int = 0
    cache_dtype: str = "auto"
    cache_dtype_bytes: int = 2
    layers_per_stage: tuple[int, ...] = ()
    groups: tuple[KvCacheGroup, ...] = ()
    max_model_len: int = 0
    blocks_per_request: int = 0
    """Blocks one request of ``max_model_len`` needs summed over groups."""
    max_concurrency: float = 0.0
    """``num_blocks / blocks_per_request`` (vLLM's "Maximum concurrency")."""
    needed_bytes: int = 0
    """KV memory one ``max_model_len`` request needs on the limiting stage."""
    check_bytes: int = 0
    """Memory vLLM checks that request against: available minus one (null) block."""
    fits_one_sequence: bool = False
    """vLLM starts: ``check_bytes > 0`` and ``needed_bytes <= check_bytes``."""
    largest_max_model_len: int = 0
    """Largest max_model_len (up to the model's maximum) whose request fits."""
    vllm_error: str | None = None
    """The ValueError vLLM raises at startup for this budget, or None."""


def kv_cache_blocks(
    arch: ModelArchitecture,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    block_size: int = 16,
    cache_dtype: str = "auto",
    model_dtype: str = "auto",
    available_bytes: int | Sequence[int],
    max_model_len: int | None = None,
    max_num_batched_tokens: int = 2048,
    max_concurrent_batches: int | None = None,
    hybrid_kv_cache_manager: bool = True,
    sliding_kernel_block: int = 16,
) -> KvCacheLayout:
    """Page size, block count and token capacity exactly as the reference release computes them.

    Args:
        arch: the model.
        tensor_parallel_size / pipeline_parallel_size: vLLM's TP and PP sizes.
        block_size: ``--block-size`` as resolved (16 is vLLM's CUDA default).
        cache_dtype: ``--kv-cache-dtype``; model_dtype: ``--dtype``.
        available_bytes: KV memory of one worker (``determine_available_memory``), or
            one value per pipeline stage (stage 0 first).
        max_model_len: defaults to the model's ``max_position_embeddings`` (vLLM's
            derived value); only capacity in tokens, the fit check and concurrency use it.
        max_num_batched_tokens / max_concurrent_batches: only sliding-window layers use
            them (``VllmConfig.max_in_flight_tokens``); the latter defaults to PP + 1
            (async scheduling with the V2 model runner, the reference release's default on GPUs).
        hybrid_kv_cache_manager: False mirrors ``--disable-hybrid-kv-cache-manager``.
        sliding_kernel_block: the attention backend's kernel block multiple that
            sliding-window layers round to (16 for FlashAttention/Triton on CUDA, 32 on
            the CPU backend).

    Raises:
        CapacityError: a TP/PP size or dtype vLLM would refuse.
    """
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    _check_parallelism(arch, tp, pp)
    if block_size < 1:
        raise CapacityError("block_size", f"block_size {block_size} must be positive")
    model_dtype_bytes(arch, model_dtype)  # vLLM refuses some dtypes whatever the cache dtype
    cache_name, cache_bytes = cache_dtype_bytes(arch, cache_dtype, model_dtype)
    mml = max_model_len or arch.max_position_embeddings
    if isinstance(available_bytes, int):
        avail = [available_bytes] * pp
    else:
        avail = [int(a) for a in available_bytes]
        if len(avail) != pp:
            raise CapacityError(
                "pipeline_parallel_size",
                f"available_bytes has {len(avail)} values for {pp} pipeline stages",
            )
    in_flight = (max_concurrent_batches or pp + 1) * max_num_batched_tokens

    specs, page_why = _layer_specs(
        arch, tp, block_size, cache_name, cache_bytes, sliding_kernel_block
    )
    if not hybrid_kv_cache_manager:
        specs = _promote_sliding(specs, block_size)
    groups = _group_layers(specs)
    parts = pp_layer_partition(arch.num_hidden_layers, pp)
    starts = [sum(parts[:r]) for r in range(pp)]
    stage_layers = [set(range(s, s + n)) for s, n in zip(starts, parts, strict=True)]

    per_stage_bpb = [
        max(sum(spec.page for i in layers if i in mine) for spec, layers in groups)
        for mine in stage_layers
    ]
    stage_blocks = [a // b if b > 0 else 0 for a, b in zip(avail, per_stage_bpb, strict=True)]
    num_blocks = max(0, min(stage_blocks))
    limiting = stage_blocks.index(min(stage_blocks))
    bpb = per_stage_bpb[limiting]

    def pages_for(length: int) -> int:
        return sum(_pages_per_request(spec, length, in_flight) for spec, _ in groups)

    def fits(length: int) -> bool:
        return all(
            a - b > 0 and b * pages_for(length) <= a - b
            for a, b in zip(avail, per_stage_bpb, strict=True)
        )

    per_request = pages_for(mml)
    concurrency = num_blocks / per_request
    tokens = int(concurrency * mml)
    check = avail[limiting] - bpb
    needed = bpb * per_request
    ok = fits(mml)
    largest = largest_passing(fits, max(mml, arch.max_position_embeddings))
    error = None
    if min(a - b for a, b in zip(avail, per_stage_bpb, strict=True)) <= 0:
        error = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    elif not ok:
        error = (
            f"To serve at least one request with the model's max seq len ({mml}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({check / GIB:.2f} GiB). Based on the available memory, the "
            f"estimated maximum model length is {min(largest, mml)}."
        )

    token_bytes = sum(specs[i].token_bytes for i in stage_layers[limiting])
    group_objs = tuple(
        KvCacheGroup(
            kind=spec.kind,
            layers=tuple(layers),
            block_size=spec.block_size,
            page_size_bytes=spec.page,
            sliding_window=spec.window,
            pages_per_request=_pages_per_request(spec, mml, in_flight),
        )
        for spec, layers in groups
    )
    page = groups[0][0].page
    heads = 1 if arch.attention == "mla" else max(1, arch.num_key_value_heads // tp)
    explanation = _kv_explanation(
        arch,
        page,
        page_why,
        cache_name,
        groups,
        parts,
        limiting,
        bpb,
        avail[limiting],
        num_blocks,
        per_request,
        mml,
        tokens,
        concurrency,
    )
    return KvCacheLayout(
        page_size_bytes=page,
        num_blocks=num_blocks,
        bytes_per_token=token_bytes,
        tokens=tokens,
        explanation=explanation,
        block_size=block_size,
        bytes_per_block=bpb,
        num_kv_heads_per_rank=heads,
        cache_dtype=cache_name,
        cache_dtype_bytes=cache_bytes,
        layers_per_stage=parts,
        groups=group_objs,
        max_model_len=mml,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        needed_bytes=needed,
        check_bytes=check,
        fits_one_sequence=ok,
        largest_max_model_len=largest,
        vllm_error=error,
    )


def _kv_explanation(
    arch: ModelArchitecture,
    page: int,
    page_why: str,
    cache_name: str,
    groups: list[tuple[_LayerSpec, list[int]]],
    parts: tuple[int, ...],
    limiting: int,
    bpb: int,
    avail: int,
    num_blocks: int,
    per_request: int,
    mml: int,
    tokens: int,
    concurrency: float,
) -> str:
    """The KV working in one paragraph."""
    if len(groups) == 1:
        grouping = f"one KV-cache group of {parts[limiting]} layers"
        if len(parts) > 1:
            grouping += f" on pipeline stage {limiting} (stages hold {list(parts)} layers)"
    else:
        kinds: dict[str, int] = {}
        for spec, _ in groups:
            kinds[spec.kind] = kinds.get(spec.kind, 0) + 1
        sizes = sorted({len(layers) for _, layers in groups})
        grouping = (
            f"{len(groups)} KV-cache groups ("
            + ", ".join(f"{n} {k}" for k, n in kinds.items())
            + f") of {'/'.join(str(s) for s in sizes)} layers sharing one block pool"
        )
    return (
        f"page = {page_why} ({cache_name}) = {page:,} B per layer per block "
        f"({SRC_KV_SPEC}); {grouping} -> {bpb:,} B per block; num_blocks = "
        f"{avail:,} B // {bpb:,} B = {num_blocks:,} ({SRC_KV_PLAN} get_kv_cache_configs); "
        f"a {mml:,}-token request takes {per_request:,} blocks, so vLLM reports "
        f"{concurrency:.2f}x concurrency and {tokens:,} tokens ({SRC_KV_UTILS} "
        "get_kv_cache_capacity)"
    )


# --------------------------------------------------------------------------- weights


@dataclass(frozen=True)
class WeightsEstimate:
    """Weight bytes in total (what is read from storage) and per GPU."""

    total_bytes: int
    """All parameters at their stored precision: what the loader reads."""
    per_stage_bytes: tuple[int, ...]
    """Bytes on one GPU of each pipeline stage."""
    explanation: str

    @property
    def bytes_per_gpu(self) -> int:
        """The largest GPU's share (the one that must fit)."""
        return max(self.per_stage_bytes)


def _quant_bits(quantization: str | None, dtype_bytes: int) -> tuple[float, str]:
    if quantization is None:
        return dtype_bytes * 8.0, f"{dtype_bytes} B per parameter"
    key = quantization.strip().lower()
    if key not in _QUANT_BITS:
        known = ", ".join(sorted(_QUANT_BITS))
        raise CapacityError(
            "quantization",
            f"quantization {quantization!r} is not modelled for weight sizes; known: {known}",
        )
    return _QUANT_BITS[key]


def weights_estimate(
    arch: ModelArchitecture,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    model_dtype: str = "auto",
    quantization: str | None = None,
) -> WeightsEstimate:
    """Weight bytes per GPU as vLLM shards them.

    Formula: embeddings (``vocab`` padded to a multiple of 64 x ``hidden``) and an untied
    ``lm_head`` stay in the model dtype and are split by TP, on the first and last
    pipeline stage; every other parameter (``params_total - embeddings``) is spread
    evenly over the layers, stored at the quantisation's bits (``quantization``, else
    the checkpoint's), and split by TP. When TP exceeds the KV heads, vLLM replicates
    each KV head (``QKVParallelLinear``), adding ``2 x hidden x head_dim x (1 - kv/TP)``
    per layer. Norms and biases are ignored (<0.1 %).
    """
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    _check_parallelism(arch, tp, pp)
    dtype, b = model_dtype_bytes(arch, model_dtype)
    quant = quantization or arch.quantization
    bits, quant_why = _quant_bits(quant, b)
    vocab = -(-arch.vocab_size // _VOCAB_PADDING) * _VOCAB_PADDING
    embed = vocab * arch.hidden_size
    lm_head = 0 if arch.tie_word_embeddings else embed
    params = int(arch.params_total_b * 1e9)
    body = max(0, params - arch.vocab_size * arch.hidden_size * (1 if lm_head == 0 else 2))
    layers = arch.num_hidden_layers
    if quant is not None and quant.lower() == "mxfp4" and arch.is_moe:
        expert_inter = arch.moe_intermediate_size or arch.intermediate_size
        experts = min(body, (arch.num_experts or 0) * 3 * arch.hidden_size * expert_inter * layers)
        body_bytes = experts * bits / 8 + (body - experts) * b
        body_why = (
            f"{experts / 1e9:.2f}B expert params x {bits} bits ({quant_why}) + "
            f"{(body - experts) / 1e9:.2f}B other params x {b} B"
        )
    else:
        body_bytes = body * bits / 8
        body_why = f"{body / 1e9:.2f}B non-embedding params x {bits:g} bits"
        if quant is not None:
            body_why += f" ({quant_why})"
    extra = 0.0
    if arch.attention != "mla" and arch.num_key_value_heads < tp:
        replicated_bits = bits if quant not in (None, "mxfp4") else b * 8.0
        extra = (
            2
            * arch.hidden_size
            * arch.head_dim
            * (1 - arch.num_key_value_heads / tp)
            * replicated_bits
            / 8
        )
    parts = pp_layer_partition(layers, pp)
    per_layer = body_bytes / layers
    stage_bytes: list[int] = []
    for r, n in enumerate(parts):
        size = n * per_layer / tp + n * extra
        if r == 0:
            size += embed * b / tp
        if r == pp - 1 and (lm_head or pp > 1):
            size += embed * b / tp
        stage_bytes.append(int(size))
    total = int(body_bytes + (embed + lm_head) * b)
    head_why = "tied lm_head" if lm_head == 0 else f"lm_head {embed / 1e9:.2f}B x {b} B"
    why = (
        f"{arch.params_total_b:g}B params ({dtype}): {body_why} + embeddings "
        f"{embed / 1e9:.2f}B x {b} B + {head_why} = {gb(total)}; / TP {tp}"
    )
    if pp > 1:
        why += f", PP {pp} stages of {list(parts)} layers (embeddings on stage 0, lm_head last)"
    if extra:
        why += f", + {gb(extra * max(parts))} for KV heads replicated across TP"
    why += f" -> {gib(max(stage_bytes))} per GPU"
    return WeightsEstimate(total_bytes=total, per_stage_bytes=tuple(stage_bytes), explanation=why)


# --------------------------------------------------------------------------- memory


def cuda_total_bytes(gpu: GpuModel) -> int:
    """``torch.cuda.mem_get_info()`` total: NVML total minus the driver's reservation."""
    return int(gpu.memory_gib * GIB) - _DRIVER_RESERVED_BYTES


@dataclass(frozen=True)
class MemoryBudget:
    """The per-GPU memory budget of the reference release's ``determine_available_memory``.

    ``available_kv = ceil(total x gpu_memory_utilization) - (weights + activation peak +
    runtime overhead) - CUDA graph estimate`` (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
    is on by default in that release). Memory the process holds before vLLM's first snapshot
    (CUDA context, NCCL, cuBLAS handles) is outside the budget: it must fit in
    ``total x (1 - gpu_memory_utilization)``.
    """

    total: Term
    requested: Term
    weights: Term
    activation: Term
    cuda_graphs: Term
    runtime_overhead: Term
    available_kv_per_stage: tuple[int, ...]
    explanation: str

    @property
    def available_kv_bytes(self) -> int:
        """KV memory of the tightest pipeline stage."""
        return min(self.available_kv_per_stage)


def activation_bytes(
    arch: ModelArchitecture,
    *,
    tensor_parallel_size: int,
    dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
) -> Term:
    """Peak activation of vLLM's profile run (a forward pass of max_num_batched_tokens).

    Estimate: ``T x bytes x (4 x hidden + qkv/TP + 3 x mlp/TP)`` for hidden states, the
    QKV output and the gated MLP (for MoE: ``top_k x (3 x expert_mlp/TP + hidden)``, the
    fused-MoE caches), plus the sampler's ``max_num_seqs x vocab x 8 B`` (float32 logits
    and probabilities). Calibrated on vLLM PR #10511's log (Llama-3-8B, 8192 tokens:
    1.26 GiB measured, 1.3 GiB estimated); multimodal encoders are not modelled.
    """
    tp = tensor_parallel_size
    t = max_num_batched_tokens
    h = arch.hidden_size
    qkv = (arch.num_attention_heads + 2 * arch.num_key_value_heads) * arch.head_dim // tp
    if arch.is_moe and arch.num_experts_per_tok:
        inter = arch.moe_intermediate_size or arch.intermediate_size
        mlp = arch.num_experts_per_tok * (3 * inter // tp + h)
        mlp_why = f"{arch.num_experts_per_tok} experts x (3 x {inter}/TP + {h})"
    else:
        mlp = 3 * arch.intermediate_size // tp
        mlp_why = f"3 x {arch.intermediate_size}/TP"
    forward = t * dtype_bytes * (4 * h + qkv + max(mlp, 3 * arch.intermediate_size // tp))
    sampler = max_num_seqs * arch.vocab_size * 8
    value = forward + sampler
    why = (
        f"{t} tokens x {dtype_bytes} B x (4 x {h} + qkv {qkv} + mlp {mlp_why}) + sampler "
        f"{max_num_seqs} seqs x {arch.vocab_size} vocab x 8 B = {gib(value)} (gpustrata "
        f"estimate of the profile run's torch peak, {SRC_PROFILING})"
    )
    return Term(value, why)


def memory_budget(
    arch: ModelArchitecture,
    gpu: GpuModel,
    weights: WeightsEstimate,
    *,
    tensor_parallel_size: int,
    gpu_memory_utilization: float,
    dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool = False,
) -> MemoryBudget:
    """Available KV-cache memory per GPU with every term explained."""
    total = cuda_total_bytes(gpu)
    total_t = Term(
        total,
        f"{gpu.name}: {gpu.memory_gib} GiB (NVML, hardware catalogue) - 0.45 GiB driver "
        f"reservation = {gib(total)} CUDA total (H100 80GB: 79.65 vs 79.22 GiB in vLLM PR "
        "#10511's log)",
    )
    requested = math.ceil(total * gpu_memory_utilization)
    requested_t = Term(
        requested,
        f"ceil({gib(total)} x gpu_memory_utilization {gpu_memory_utilization}) = "
        f"{gib(requested)} ({_V} vllm/v1/worker/utils.py request_memory)",
    )
    weights_t = Term(weights.bytes_per_gpu, weights.explanation)
    act = activation_bytes(
        arch,
        tensor_parallel_size=tensor_parallel_size,
        dtype_bytes=dtype_bytes,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
    )
    if enforce_eager:
        graphs = Term(0, "enforce_eager: no CUDA graphs are captured")
    else:
        graphs = Term(
            _CUDA_GRAPH_BYTES,
            "gpustrata default 1 GiB, subtracted because VLLM_MEMORY_PROFILER_ESTIMATE_"
            f"CUDAGRAPHS=1 is the {_MINOR} default ({SRC_WORKER}); measured 0.32-0.65 GiB for "
            "7-8B models (vLLM PRs #11005, #21489), ~1.3 GiB for Llama 4 Maverick (#21489)",
        )
    runtime = Term(
        _RUNTIME_OVERHEAD_BYTES,
        "gpustrata default 1 GiB for memory taken after vLLM's baseline snapshot besides "
        "weights and activations (sampler and input buffers, attention/MoE workspaces, "
        "non-torch allocations; 0.07 GiB measured for one GPU in vLLM PR #21489)",
    )
    fixed = act.value + graphs.value + runtime.value
    per_stage = tuple(int(requested - w - fixed) for w in weights.per_stage_bytes)
    why = (
        f"available KV = {gib(requested)} requested - {gib(weights.bytes_per_gpu)} weights - "
        f"{gib(act.value)} activation peak - {gib(graphs.value)} CUDA graphs - "
        f"{gib(runtime.value)} runtime = {gib(min(per_stage))} ({SRC_WORKER})"
    )
    return MemoryBudget(
        total=total_t,
        requested=requested_t,
        weights=weights_t,
        activation=act,
        cuda_graphs=graphs,
        runtime_overhead=runtime,
        available_kv_per_stage=per_stage,
        explanation=why,
    )


# --------------------------------------------------------------------------- defaults


def default_block_size(arch: ModelArchitecture, gpu: GpuModel | None = None) -> tuple[int, str]:
    """The reference vLLM release's block size when ``--block-size`` is unset, with the reason.

    ``CacheConfig.DEFAULT_BLOCK_SIZE`` is 16 and the default CUDA backends accept it
    (FlashAttention ``MultipleOf(16)``); on compute capability 10.x MLA models get
    FlashInfer-MLA, which supports only 32 and 64, so its smallest, 32
    (``vllm/platforms/cuda.py`` backend priorities, ``AttentionBackend.get_preferred_block_size``).
    """
    if arch.attention == "mla" and gpu is not None and gpu.compute_capability.startswith("10."):
        return 32, f"FlashInfer-MLA on compute capability {gpu.compute_capability} ({_V})"
    return 16, f"CacheConfig.DEFAULT_BLOCK_SIZE ({_V} vllm/config/cache.py)"


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


# --------------------------------------------------------------------------- time


@dataclass(frozen=True)
class StartupEstimate:
    """Time from container start to a ready engine: load + init, and the probe budget."""

    weights_bytes: int
    load_gbps: float
    load_source: str
    """Where the bandwidth comes from (spec override or the default's citation)."""
    load_s: float
    init_s: float
    init_source: str
    total_s: float
    safety_factor: float
    budget_s: float
    """``total_s x safety_factor``: what probes and thresholds must allow."""
    explanation: str
    """The chain, e.g. ``141.1 GB / 1.0 GB/s + 90 s init = 231 s, x1.5 = 347 s``."""


def startup_estimate(
    arch: ModelArchitecture,
    weights: WeightsEstimate,
    *,
    weights_source: str = "huggingface",
    load_gbps: float | None = None,
    engine_init_s: float | None = None,
    enforce_eager: bool = False,
    safety_factor: float = STARTUP_SAFETY_FACTOR,
) -> StartupEstimate:
    """Startup = total weight bytes / load bandwidth + engine init, times a safety factor.

    Engine init (process start, profiling, KV allocation, torch.compile, CUDA graph
    capture) defaults to 30 s + 60 s for compile and graphs (none with enforce_eager)
    + 90 s for MoE kernel warmup, from the measurements cited in ``init_source``.
    """
    if load_gbps is not None:
        gbps, source = load_gbps, f"weights.load_gbps {load_gbps} set in the stack"
    else:
        if weights_source not in LOAD_GBPS_DEFAULTS:
            known = ", ".join(LOAD_GBPS_DEFAULTS)
            raise CapacityError(
                "weights.source", f"weights source {weights_source!r} is not one of {known}"
            )
        gbps, source = LOAD_GBPS_DEFAULTS[weights_source]
    if gbps <= 0:
        raise CapacityError("weights.load_gbps", f"load bandwidth {gbps} GB/s must be positive")
    load_s = weights.total_bytes / (gbps * GB)
    if engine_init_s is not None:
        init_s, init_source = float(engine_init_s), "startup_init_s set in the stack"
    else:
        parts = [f"{_INIT_BASE_S} s process start, profiling and KV allocation"]
        init_s = float(_INIT_BASE_S)
        if not enforce_eager:
            init_s += _INIT_COMPILE_S
            parts.append(f"{_INIT_COMPILE_S} s torch.compile and CUDA graph capture")
        if arch.is_moe:
            init_s += _INIT_MOE_S
            parts.append(f"{_INIT_MOE_S} s MoE kernel warmup")
        init_source = "gpustrata default: " + " + ".join(parts) + f" ({_INIT_SOURCES})"
    total = load_s + init_s
    budget = total * safety_factor
    why = (
        f"{gb(weights.total_bytes)} / {_rate(gbps)} GB/s ({weights_source}) + {init_s:.0f} s init "
        f"= {total:.0f} s, x{safety_factor:g} = {budget:.0f} s"
    )
    return StartupEstimate(
        weights_bytes=weights.total_bytes,
        load_gbps=gbps,
        load_source=source,
        load_s=load_s,
        init_s=init_s,
        init_source=init_source,
        total_s=total,
        safety_factor=safety_factor,
        budget_s=budget,
        explanation=why,
    )


def _rate(gbps: float) -> str:
    """``1.0``, ``0.25``: one decimal unless more are needed."""
    return f"{gbps:.1f}" if round(gbps, 1) == gbps else f"{gbps:g}"


@dataclass(frozen=True)
class StepEstimate:
    """The longest engine step: a prefill of the largest batch."""

    tokens: int
    context_tokens: int
    flops: float
    effective_tflops: float
    seconds: float
    explanation: str


def step_estimate(
    arch: ModelArchitecture,
    gpu: GpuModel,
    *,
    tensor_parallel_size: int,
    tokens: int,
    max_model_len: int,
    max_num_seqs: int,
    efficiency: float = DEFAULT_EFFICIENCY,
) -> StepEstimate:
    """Prefill time of ``tokens`` tokens at the end of a ``max_model_len`` context.

    FLOPs = 2 x T x (active params - embeddings - lm_head) + 2 x min(T, max_num_seqs)
    x vocab x hidden (logits of the last token per sequence) + 4 x layers x heads x
    head_dim x T x context, where context is the average attended length (``max_model_len
    - T/2`` for a chunk at the end of a full prompt; ``T/2`` when the batch holds whole
    prompts) and sliding layers attend at most their window. Time = FLOPs / (dense BF16
    TFLOP/s x TP x efficiency); pipeline stages run one after another, so PP does not
    shorten a step.
    """
    tp = tensor_parallel_size
    t = tokens
    h, vocab = arch.hidden_size, arch.vocab_size
    embeds = vocab * h * (1 if arch.tie_word_embeddings else 2)
    active = max(0.0, arch.params_active_b * 1e9 - embeds + (vocab * h if arch.is_moe else 0))
    linear = 2 * t * active
    logits = 2 * min(t, max_num_seqs) * vocab * h
    ctx = max_model_len - t / 2 if t < max_model_len else max_model_len / 2
    attn = 0.0
    for kind in arch.layer_attention_types():
        layer_ctx = min(ctx, arch.sliding_window or ctx) if kind == "sliding_attention" else ctx
        attn += 4 * arch.num_attention_heads * arch.head_dim * t * layer_ctx
    flops = linear + logits + attn
    rate = gpu.dense_bf16_tflops * 1e12 * tp * efficiency
    seconds = flops / rate
    why = (
        f"prefill of {t:,} tokens (context {ctx:,.0f}): 2 x {active / 1e9:.2f}B active params "
        f"+ attention + logits = {flops / 1e12:,.0f} TFLOP / ({gpu.dense_bf16_tflops:g} "
        f"TFLOP/s x TP {tp} x {efficiency:g} efficiency) = {seconds:.2f} s"
    )
    return StepEstimate(
        tokens=t,
        context_tokens=int(ctx),
        flops=flops,
        effective_tflops=rate / 1e12,
        seconds=seconds,
        explanation=why,
    )


# --------------------------------------------------------------------------- all of it


@dataclass(frozen=True)
class CapacityEstimate:
    """Everything the planner, the rules and ``gpustrata capacity`` need for one engine.

    Field names are stable API: ``ModelPlan.capacity`` carries this object.
    """

    model_id: str
    gpu_id: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    dtype: str
    kv_cache_dtype: str
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool
    gpu_memory_utilization: float
    weights_source: str
    model_max_len: int
    """The model's ``max_position_embeddings``: the largest max_model_len vLLM accepts."""
    weights: WeightsEstimate
    memory: MemoryBudget
    kv: KvCacheLayout
    startup: StartupEstimate
    longest_step: StepEstimate
    defaults: dict[str, str] = field(default_factory=dict)
    """Settings gpustrata resolved to vLLM's defaults, with the reason."""

    @property
    def weights_fit(self) -> bool:
        """Weights, activations and overheads leave KV memory on every GPU."""
        return self.memory.available_kv_bytes > 0

    @property
    def fits(self) -> bool:
        """vLLM would start: weights fit and one max_model_len request fits the KV cache."""
        return self.weights_fit and self.kv.fits_one_sequence

    @property
    def max_concurrent_full_length_sequences(self) -> int:
        """Requests of max_model_len the KV cache holds at once (floor of vLLM's figure)."""
        return max(0, math.floor(self.kv.max_concurrency))

    @property
    def largest_max_model_len(self) -> int:
        """Largest max_model_len that fits this budget (up to the model's maximum)."""
        return self.kv.largest_max_model_len

    @property
    def gpus(self) -> int:
        """GPUs one engine replica uses (TP x PP)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


def _resolved_int(settings: EngineSettings, key: str, default: int | None) -> int | None:
    value = getattr(settings, key)
    if isinstance(value, str):
        raise CapacityError(key, f"{key} {value!r} is not an integer")
    return default if value is None else int(value)


def estimate_capacity(
    arch: ModelArchitecture,
    gpu: GpuModel,
    settings: EngineSettings | None = None,
    *,
    weights_source: str = "huggingface",
    load_gbps: float | None = None,
    engine_init_s: float | None = None,
    safety_factor: float = STARTUP_SAFETY_FACTOR,
    efficiency: float = DEFAULT_EFFICIENCY,
    **engine: Any,
) -> CapacityEstimate:
    """Weights, memory budget, KV cache, startup and longest step for one engine.

    *settings* are the engine's vLLM settings; ``engine`` keywords (vLLM names such as
    ``max_model_len=8192``) change single ones, a shorthand for
    ``settings.replace(...)``. The other keywords describe the weights' load and the
    planner's margins, not vLLM. Unset settings take the reference release's defaults
    (recorded in ``defaults``). Raises :class:`CapacityError` for settings vLLM would
    refuse (TP not dividing the heads, an unknown dtype, a value that is not a number).
    """
    settings = (settings or EngineSettings()).replace(**engine) if engine else settings
    settings = settings or EngineSettings()
    tp = _resolved_int(settings, "tensor_parallel_size", 1) or 1
    pp = _resolved_int(settings, "pipeline_parallel_size", 1) or 1
    max_model_len = _resolved_int(settings, "max_model_len", None)
    block_size = _resolved_int(settings, "block_size", None)
    max_num_batched_tokens = _resolved_int(settings, "max_num_batched_tokens", None)
    max_num_seqs = _resolved_int(settings, "max_num_seqs", None)
    utilization = settings.gpu_memory_utilization
    if isinstance(utilization, str):
        raise CapacityError(
            "gpu_memory_utilization", f"gpu_memory_utilization {utilization!r} is not a number"
        )
    gpu_memory_utilization = DEFAULT_GPU_MEMORY_UTILIZATION if utilization is None else utilization
    dtype = settings.dtype or "auto"
    kv_cache_dtype = settings.kv_cache_dtype or "auto"
    quantization = settings.quantization
    enforce_eager = settings.enforce_eager is True
    enable_chunked_prefill = (
        None if settings.enable_chunked_prefill is None else settings.enable_chunked_prefill is True
    )
    if not 0 < gpu_memory_utilization <= 1:
        raise CapacityError(
            "gpu_memory_utilization",
            f"gpu_memory_utilization {gpu_memory_utilization} must be in (0, 1]",
        )
    defaults: dict[str, str] = {}
    mml = max_model_len or arch.max_position_embeddings
    if max_model_len is None:
        defaults["max_model_len"] = (
            f"{mml} = config.json max_position_embeddings (vLLM's derived maximum)"
        )
    chunked = True if enable_chunked_prefill is None else enable_chunked_prefill
    if enable_chunked_prefill is None:
        defaults["enable_chunked_prefill"] = "on: vLLM V1 enables chunked prefill for decoders"
    if block_size is None:
        block_size, why = default_block_size(arch, gpu)
        defaults["block_size"] = f"{block_size}: {why}"
    if max_num_batched_tokens is None:
        max_num_batched_tokens, why = default_max_num_batched_tokens(gpu, mml, chunked)
        defaults["max_num_batched_tokens"] = why
    if max_num_seqs is None:
        max_num_seqs, why = default_max_num_seqs(gpu)
        defaults["max_num_seqs"] = why
    dtype_name, dtype_b = model_dtype_bytes(arch, dtype)
    weights = weights_estimate(
        arch,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        model_dtype=dtype,
        quantization=quantization,
    )
    memory = memory_budget(
        arch,
        gpu,
        weights,
        tensor_parallel_size=tp,
        gpu_memory_utilization=gpu_memory_utilization,
        dtype_bytes=dtype_b,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        enforce_eager=enforce_eager,
    )
    kv = kv_cache_blocks(
        arch,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        block_size=block_size,
        cache_dtype=kv_cache_dtype,
        model_dtype=dtype,
        available_bytes=[max(0, a) for a in memory.available_kv_per_stage],
        max_model_len=mml,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    startup = startup_estimate(
        arch,
        weights,
        weights_source=weights_source,
        load_gbps=load_gbps,
        engine_init_s=engine_init_s,
        enforce_eager=enforce_eager,
        safety_factor=safety_factor,
    )
    step_tokens = max_num_batched_tokens if chunked else max(max_num_batched_tokens, mml)
    step = step_estimate(
        arch,
        gpu,
        tensor_parallel_size=tp,
        tokens=step_tokens,
        max_model_len=mml,
        max_num_seqs=max_num_seqs,
        efficiency=efficiency,
    )
    return CapacityEstimate(
        model_id=arch.id,
        gpu_id=gpu.id,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dtype=dtype_name,
        kv_cache_dtype=kv.cache_dtype,
        block_size=block_size,
        max_model_len=mml,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        chunked_prefill=chunked,
        gpu_memory_utilization=gpu_memory_utilization,
        weights_source=weights_source,
        model_max_len=arch.max_position_embeddings,
        weights=weights,
        memory=memory,
        kv=kv,
        startup=startup,
        longest_step=step,
        defaults=defaults,
    )


def resolve_architecture(
    model: str, catalog: ModelCatalog | None = None, base_dir: Path | None = None
) -> ModelArchitecture | None:
    """The architecture of ``model``: a catalogue id or alias, or a local config.json.

    ``model`` may name a ``config.json`` file or a directory holding one (relative paths
    resolve against ``base_dir``, default the working directory). Returns None when
    neither applies. Raises :class:`ModelCatalogError` for an unreadable config.json.
    """
    found = (catalog or load_model_catalog()).get(model)
    if found is not None:
        return found
    path = Path(model).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_file() or (path.is_dir() and (path / "config.json").is_file()):
        return architecture_from_hf_config(path)
    return None


def model_settings(model: ModelSpec) -> dict[str, Any]:
    """A stack model's engine and weights settings as :func:`estimate_capacity` keywords."""
    e = model.engine
    return {
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "max_model_len": e.max_model_len,
        "gpu_memory_utilization": e.gpu_memory_utilization,
        "dtype": e.dtype,
        "kv_cache_dtype": e.kv_cache_dtype,
        "block_size": e.block_size,
        "max_num_batched_tokens": e.max_num_batched_tokens,
        "max_num_seqs": e.max_num_seqs,
        "enable_chunked_prefill": e.enable_chunked_prefill,
        "enforce_eager": e.enforce_eager,
        "quantization": e.quantization,
        "weights_source": model.weights.source,
        "load_gbps": model.weights.load_gbps,
        "engine_init_s": model.startup_init_s,
    }


def estimate_for_model(
    model: ModelSpec, arch: ModelArchitecture, gpu: GpuModel, **overrides: Any
) -> CapacityEstimate:
    """:func:`estimate_capacity` with a stack model's engine and weights settings.

    ``overrides`` replace single settings by their :func:`estimate_capacity` name
    (``tensor_parallel_size=8``), for what-if tables.
    """
    return estimate_capacity(arch, gpu, **{**model_settings(model), **overrides})
