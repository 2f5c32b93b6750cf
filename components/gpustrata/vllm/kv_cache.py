"""The KV cache vLLM V1 builds: page sizes per layer, KV-cache groups, blocks and capacity.

The arithmetic follows the reference vLLM release of the release catalogue
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
* Gated DeltaNet hybrids (``hybrid_linear``: Qwen3-Next, Qwen3.5): each linear layer is a
  ``MambaSpec`` whose page is one sequence's state (``gated_delta_net_state_shape``: conv
  ``(2 x key heads x key dim + value heads x value dim) / TP x (kernel - 1)`` in the
  model dtype, recurrent ``value heads / TP x value dim x key dim`` in
  ``mamba_ssm_cache_dtype``, which Qwen3.5 architectures take from config.json's
  ``mamba_ssm_dtype``: ``vllm/model_executor/models/config.py``
  ``Qwen3_5ForConditionalGenerationConfig``); ``Platform._align_hybrid_block_size``
  (``vllm/platforms/interface.py``) raises the attention block size to the smallest
  multiple of the kernel alignment whose page holds that state and pads the state page to
  the attention page; a request holds 1 state block per linear group, 2 with prefix
  caching (``mamba_cache_mode`` "align", the default for hybrids: ``MambaModelConfig``)
  plus 1 prefill checkpoint where the FlashInfer GDN prefill kernel runs (Hopper,
  Blackwell), which also aligns the block to 64 tokens
  (``vllm/v1/kv_cache_interface.py`` ``MambaSpec.max_memory_usage_bytes``);
* ``num_blocks = available_memory // bytes_per_block`` where ``bytes_per_block`` is the
  widest group's sum of page sizes on that worker (``_get_kv_cache_bytes_per_block``),
  and every worker takes the smallest count (``get_kv_cache_configs``);
* one request of ``max_model_len`` must fit in ``available - bytes_per_block`` (the null
  block is held back) or vLLM refuses to start (``_check_enough_kv_cache_memory``:
  "To serve at least one request with the model's max seq len ...");
* the "GPU KV cache size" vLLM logs is ``int(num_blocks / blocks_per_request x
  max_model_len)`` (``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.vllm.dtypes import FP8_DS_MLA_TOKEN_BYTES, cache_dtype_bytes, model_dtype_bytes
from gpustrata.vllm.parallelism import kv_heads_split, valid_tp_sizes
from gpustrata.vllm.reference import SRC_KV_PLAN, SRC_KV_SPEC, SRC_KV_UTILS
from gpustrata.vllm.terms import GIB, CapacityError, largest_passing

__all__ = [
    "KvCacheGroup",
    "KvCacheLayout",
    "check_parallelism",
    "gdn_prefill_checkpoints",
    "gdn_state_bytes",
    "kv_cache_blocks",
    "pp_layer_partition",
]


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


def check_parallelism(arch: ModelArchitecture, tp: int, pp: int) -> None:
    """Refuse TP/PP sizes vLLM refuses (``ModelConfig.verify_with_parallel_config``)."""
    if tp < 1:
        raise CapacityError("tensor_parallel_size", f"tensor_parallel_size {tp} must be >= 1")
    heads = arch.num_attention_heads
    if heads % tp:
        fits = ", ".join(str(d) for d in valid_tp_sizes(arch))
        raise CapacityError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} does not divide {arch.id}'s {heads} attention "
            f"heads (vLLM refuses to start); use one of {fits}",
        )
    if not kv_heads_split(arch, tp):
        raise CapacityError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} and {arch.id}'s {arch.num_key_value_heads} KV heads: "
            "one must divide the other for vLLM's QKVParallelLinear; use one of "
            + ", ".join(str(d) for d in valid_tp_sizes(arch)),
        )
    if arch.attention == "hybrid_linear":
        for name in ("linear_num_key_heads", "linear_num_value_heads"):
            value = getattr(arch, name) or 0
            if value % tp:
                raise CapacityError(
                    "tensor_parallel_size",
                    f"tensor_parallel_size {tp} does not divide {arch.id}'s {name} {value} "
                    "(vLLM's gated_delta_net_state_shape divides them by TP and refuses to "
                    "start); use one of "
                    + ", ".join(str(d) for d in valid_tp_sizes(arch) if not value % d),
                )
    pp_layer_partition(arch.num_hidden_layers, pp)


@dataclass(frozen=True)
class _LayerSpec:
    """One layer's KV spec as vLLM builds it (block size, bytes per token, window)."""

    kind: Literal["full_attention", "sliding_window", "chunked_local", "mla", "mamba"]
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
    model_bytes: int = 2,
    gdn: _GdnCache | None = None,
) -> tuple[list[_LayerSpec], str]:
    """Every layer's spec and the page formula in words."""
    if arch.attention == "mla":
        latent = arch.mla_latent_dim or 0
        if cache_dtype == "fp8_ds_mla":
            token = FP8_DS_MLA_TOKEN_BYTES
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
    if arch.attention == "hybrid_linear":
        return _linear_hybrid_specs(
            arch, tp, block_size, token, model_bytes, sliding_kernel_block, gdn, why
        )
    sw_block = _sliding_block_size(block_size, sliding_kernel_block)
    # One spec per kind, shared by its layers (specs are values: an 80-layer model needs
    # one, not 80; the grouping below relies on the sharing to stay cheap).
    full = _LayerSpec("full_attention", block_size, token)
    by_kind = {
        "sliding_attention": _LayerSpec("sliding_window", sw_block, token, arch.sliding_window),
        # ChunkedLocalAttentionSpec takes the cache's block size (chunked_local_attention.py).
        "chunked_attention": _LayerSpec(
            "chunked_local", block_size, token, arch.attention_chunk_size
        ),
    }
    specs = [by_kind.get(kind, full) for kind in arch.layer_attention_types()]
    return specs, why


@dataclass(frozen=True)
class _GdnCache:
    """How vLLM holds Gated DeltaNet states: prefix caching (``mamba_cache_mode`` "align")
    and whether the FlashInfer GDN prefill kernel exports prefill checkpoints."""

    prefix_caching: bool = True
    prefill_checkpoints: bool = False


_QWEN3_5_ARCHITECTURES = frozenset(
    {
        "Qwen3_5ForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
    }
)
"""Architectures whose recurrent state takes config.json's ``mamba_ssm_dtype`` when
``--mamba-ssm-cache-dtype`` is auto (reference release ``vllm/model_executor/models/
config.py`` ``Qwen3_5ForConditionalGenerationConfig`` / ``Qwen3_5ForCausalLMConfig``)."""

_GDN_CHECKPOINT_ALIGNMENT = 64
"""``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`` (``vllm/v1/attention/backends/gdn_attn.py``)."""


def gdn_prefill_checkpoints(arch: ModelArchitecture, compute_capability: str | None) -> bool:
    """Whether vLLM picks the FlashInfer GDN prefill kernel, which exports prefill
    checkpoints (``_resolve_gdn_prefill_backend`` in
    ``vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py``): compute capability
    9.0, or the 10.x / 12.x families with ``linear_key_head_dim`` 128 and CUDA runtime 13+
    (the reference release's PyPI wheel is built for CUDA 13: torch 2.14, ``[cu13]``
    extras). False for other GPUs (Triton/FLA) and for models without linear layers."""
    if arch.attention != "hybrid_linear" or not compute_capability:
        return False
    major, _, minor = compute_capability.partition(".")
    if major == "9":
        return minor in ("0", "")
    return major in ("10", "12") and arch.linear_key_head_dim == 128


def gdn_state_bytes(arch: ModelArchitecture, tp: int, model_bytes: int) -> int:
    """One linear layer's per-sequence state on one rank (``MambaSpec.page_size_bytes``
    before padding): conv state in the model dtype, recurrent state in the SSM dtype."""
    conv, recurrent = arch.gdn_state_elements(tp)
    ssm_bytes = model_bytes
    if arch.mamba_ssm_dtype and arch.architecture in _QWEN3_5_ARCHITECTURES:
        ssm_bytes = model_dtype_bytes(arch, arch.mamba_ssm_dtype)[1]
    return conv * model_bytes + recurrent * ssm_bytes


def _linear_hybrid_specs(
    arch: ModelArchitecture,
    tp: int,
    block_size: int,
    token: int,
    model_bytes: int,
    kernel_block: int,
    gdn: _GdnCache | None,
    why: str,
) -> tuple[list[_LayerSpec], str]:
    """``_align_hybrid_block_size``: the attention block grows until its page holds one
    Gated DeltaNet state; the state page is padded to the attention page."""
    gdn = gdn or _GdnCache()
    state = gdn_state_bytes(arch, tp, model_bytes)
    align = max(kernel_block, block_size)
    if gdn.prefix_caching and gdn.prefill_checkpoints:
        align = math.lcm(align, _GDN_CHECKPOINT_ALIGNMENT)
    attn_block = align * -(-state // (align * token))
    attn_block = kernel_block * -(-attn_block // kernel_block)
    block = max(block_size, attn_block)
    page = block * token
    full = _LayerSpec("full_attention", block, token)
    # The state does not grow per token: token_bytes 0, a page of exactly one state.
    mamba = _LayerSpec("mamba", block, 0, padded_page=page)
    specs = [full if t == "full_attention" else mamba for t in arch.layer_attention_types()]
    conv, recurrent = arch.gdn_state_elements(tp)
    why = why.replace(f"{block_size} tokens", f"{block} tokens") + (
        f"; each linear layer holds one {state:,} B Gated DeltaNet state per sequence "
        f"(conv {conv:,} + recurrent {recurrent:,} elements per rank), so the attention "
        f"block is {block} tokens and the state page is padded to it"
    )
    return specs, why


def _unify_page_size(specs: list[_LayerSpec]) -> list[_LayerSpec]:
    """``unify_kv_cache_spec_page_size``: scale smaller pages' block size, else pad."""
    distinct = _distinct(specs)
    pages = {s.page for s in distinct}
    if len(pages) <= 1:
        return specs
    top = max(pages)
    unified: dict[int, _LayerSpec] = {}  # by id: each distinct spec is unified once
    for s in distinct:
        if s.page == top:
            unified[id(s)] = s
        elif top % s.page == 0:
            unified[id(s)] = replace(s, block_size=s.block_size * (top // s.page))
        elif s.kind != "mla":
            unified[id(s)] = replace(s, padded_page=top)
        else:  # pragma: no cover - no catalogue model mixes MLA with other layers
            raise CapacityError("block_size", "MLA pages cannot be padded to a common size")
    return [unified[id(s)] for s in specs]


def _distinct(specs: list[_LayerSpec]) -> list[_LayerSpec]:
    """The spec objects of *specs* (each once, in order of first use)."""
    return list({id(s): s for s in specs}.values())


def _group_layers(specs: list[_LayerSpec]) -> list[tuple[_LayerSpec, list[int]]]:
    """``get_kv_cache_groups`` for the layer kinds the catalogue has."""
    if len(set(_distinct(specs))) == 1:
        return [(specs[0], list(range(len(specs))))]
    specs = _unify_page_size(specs)
    # Layers by spec object, then objects of equal specs merged: the buckets of
    # ``setdefault(spec, []).append(index)`` over the layers, without hashing each layer.
    by_object: dict[int, tuple[_LayerSpec, list[int]]] = {}
    for index, spec in enumerate(specs):
        found = by_object.get(id(spec))
        if found is None:
            found = by_object[id(spec)] = (spec, [])
        found[1].append(index)
    buckets: dict[_LayerSpec, list[int]] = {}
    for spec, indices in by_object.values():
        if spec in buckets:
            buckets[spec] = sorted(buckets[spec] + indices)
        else:
            buckets[spec] = indices
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
    """``unify_hybrid_kv_cache_specs`` (hybrid manager off): sliding and chunked local
    layers as full (``_promote_local_kv_cache_specs``)."""
    kinds = {s.kind for s in specs}
    local = {"sliding_window", "chunked_local"}
    if "full_attention" not in kinds or not (kinds & local):
        return specs
    promoted = {
        id(s): _LayerSpec("full_attention", block_size, s.token_bytes) if s.kind in local else s
        for s in _distinct(specs)
    }
    return [promoted[id(s)] for s in specs]


def _pages_per_request(
    spec: _LayerSpec, max_model_len: int, in_flight: int, gdn: _GdnCache | None = None
) -> int:
    """``cdiv(max_memory_usage_bytes, page_size_bytes)`` of one group's spec."""
    if spec.kind == "mamba":
        gdn = gdn or _GdnCache()
        if not gdn.prefix_caching:
            return 1
        return 2 + (1 if gdn.prefill_checkpoints else 0)
    if spec.kind == "sliding_window" and spec.window is not None:
        tokens = min(spec.window - 1 + in_flight, max_model_len)
        return -(-tokens // spec.block_size) + 1
    if spec.kind == "chunked_local" and spec.window is not None:
        # ChunkedLocalAttentionSpec.max_admission_blocks_per_request: one chunk plus the
        # in-flight tokens.
        tokens = min(spec.window + in_flight, max_model_len)
        return -(-tokens // spec.block_size)
    return -(-max_model_len // spec.block_size)


@dataclass(frozen=True)
class KvCacheGroup:
    """One vLLM KV-cache group: layers sharing a block table."""

    kind: Literal["full_attention", "sliding_window", "chunked_local", "mla", "mamba"]
    layers: tuple[int, ...]
    """Global layer indices (0-based) in the group."""
    block_size: int
    page_size_bytes: int
    sliding_window: int | None
    """The window of a sliding group, the attention_chunk_size of a chunked local one."""
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
    prefix_caching: bool = True,
    gdn_prefill_checkpoints: bool = False,
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
            the CPU backend); Gated DeltaNet hybrids align their block to it too.
        prefix_caching: only Gated DeltaNet hybrids use it: with prefix caching (vLLM's
            default) a request holds 2 state blocks per linear group, without it 1.
        gdn_prefill_checkpoints: the FlashInfer GDN prefill kernel runs (vLLM picks it on
            Hopper and Blackwell GPUs; Triton elsewhere): with prefix caching, one more
            state block per linear group and a block size aligned to 64 tokens.

    Raises:
        CapacityError: a TP/PP size or dtype vLLM would refuse.
    """
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    check_parallelism(arch, tp, pp)
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

    gdn = _GdnCache(prefix_caching, gdn_prefill_checkpoints)
    specs, page_why = _layer_specs(
        arch,
        tp,
        block_size,
        cache_name,
        cache_bytes,
        sliding_kernel_block,
        model_dtype_bytes(arch, model_dtype)[1],
        gdn,
    )
    if not hybrid_kv_cache_manager:
        specs = _promote_sliding(specs, block_size)
    groups = _group_layers(specs)
    parts = pp_layer_partition(arch.num_hidden_layers, pp)
    starts = [sum(parts[:r]) for r in range(pp)]
    stage_layers = [set(range(s, s + n)) for s, n in zip(starts, parts, strict=True)]

    per_stage_bpb = [
        max(spec.page * len(mine.intersection(layers)) for spec, layers in groups)
        for mine in stage_layers
    ]
    stage_blocks = [a // b if b > 0 else 0 for a, b in zip(avail, per_stage_bpb, strict=True)]
    num_blocks = max(0, min(stage_blocks))
    limiting = stage_blocks.index(min(stage_blocks))
    bpb = per_stage_bpb[limiting]

    group_specs = [spec for spec, _ in groups]

    def pages_for(length: int) -> int:
        return sum(_pages_per_request(spec, length, in_flight, gdn) for spec in group_specs)

    stages = list(zip(avail, per_stage_bpb, strict=True))
    room = all(a - b > 0 for a, b in stages)  # a block left after the null block, everywhere

    def fits(length: int) -> bool:
        if not room:
            return False
        pages = pages_for(length)
        return all(b * pages <= a - b for a, b in stages)

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
            pages_per_request=_pages_per_request(spec, mml, in_flight, gdn),
        )
        for spec, layers in groups
    )
    page = groups[0][0].page
    block_size = groups[0][0].block_size if arch.attention == "hybrid_linear" else block_size
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
