"""Model weights per GPU: parameters, dtype or quantisation bits, TP/PP sharding."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.vllm_releases import load_vllm_releases, mxfp4_kernel
from gpustrata.vllm.dtypes import model_dtype_bytes
from gpustrata.vllm.kv_cache import check_parallelism, pp_layer_partition
from gpustrata.vllm.terms import CapacityError, gb, gib

__all__ = [
    "WeightsEstimate",
    "weights_estimate",
]


# Bits per parameter of quantised linear weights (scales included).
_QUANT_BITS: Mapping[str, tuple[float, str]] = {
    "fp8": (8.0, "FP8 e4m3 weights (per-tensor or 128x128 block scales, negligible)"),
    "fbgemm_fp8": (8.0, "FP8 weights"),
    "modelopt": (8.0, "ModelOpt FP8 weights"),
    "awq": (4.25, "4-bit weights + a 16-bit scale per group of 128 (4 + 16/128 bits)"),
    "awq_marlin": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "gptq": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "gptq_marlin": (4.25, "4-bit weights + a 16-bit scale per group of 128"),
    "nvfp4": (
        4.5,
        "NVFP4 weights: 4-bit E2M1 values + an FP8 E4M3 scale per 16 (4 + 8/16 bits; "
        "ModelOpt and compressed-tensors nvfp4-pack-quantized)",
    ),
    "modelopt_fp4": (4.5, "NVFP4 weights: 4-bit values + an FP8 scale per 16 (4 + 8/16 bits)"),
    "int8": (8.0, "INT8 weights (compressed-tensors W8A8/W8A16; per-channel scales negligible)"),
    "w4a16": (
        4.25,
        "4-bit integer weights + a 16-bit scale per group of 128 (compressed-tensors W4A16)",
    ),
    "mxfp4": (
        4.25,
        "MXFP4 expert weights: 4-bit values + an 8-bit shared exponent per 32 (4 + 8/32 "
        "bits); attention and embeddings stay in the model dtype",
    ),
}
_VOCAB_PADDING = 64  # vllm/model_executor/layers/vocab_parallel_embedding.py
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
    compute_capability: str | None = None,
    vllm_release: str | None = None,
) -> WeightsEstimate:
    """Weight bytes per GPU as vLLM shards them.

    Formula: embeddings (``vocab`` padded to a multiple of 64 x ``hidden``) and an untied
    ``lm_head`` stay in the model dtype and are split by TP, on the first and last
    pipeline stage; every other parameter (``params_total - embeddings``) is spread
    evenly over the layers, stored at the quantisation's bits (``quantization``, else
    the checkpoint's), and split by TP. When TP exceeds the KV heads, vLLM replicates
    each KV head (``QKVParallelLinear``), adding ``2 x hidden x head_dim x (1 - kv/TP)``
    per layer. Norms and biases are ignored (<0.1 %). MXFP4 MoE experts are held as the
    kernel that ``vllm_release`` (None: the reference release) picks on that
    ``compute_capability`` lays them out (the release catalogue's ``mxfp4_moe``): padded
    (gpt-oss under Marlin: hidden 2880 -> 3072, intermediate 2880 -> 2944) and, where the
    release keeps the checkpoint's block scales beside the kernel's copy, one more byte
    per 32 expert weights; ``total_bytes`` stays what the checkpoint holds.
    """
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    check_parallelism(arch, tp, pp)
    dtype, b = model_dtype_bytes(arch, model_dtype)
    quant = quantization or arch.quantization
    bits, quant_why = _quant_bits(quant, b)
    vocab = -(-arch.vocab_size // _VOCAB_PADDING) * _VOCAB_PADDING
    embed = vocab * arch.hidden_size
    lm_head = 0 if arch.tie_word_embeddings else embed
    params = int(arch.params_total_b * 1e9)
    body = max(0, params - arch.vocab_size * arch.hidden_size * (1 if lm_head == 0 else 2))
    layers = arch.num_hidden_layers
    stored_body: float | None = None
    if quant is not None and quant.lower() == "mxfp4" and arch.is_moe:
        expert_inter = arch.moe_intermediate_size or arch.intermediate_size
        experts = min(body, (arch.num_experts or 0) * 3 * arch.hidden_size * expert_inter * layers)
        stored_body = experts * bits / 8 + (body - experts) * b
        body_why = (
            f"{experts / 1e9:.2f}B expert params x {bits} bits ({quant_why}) + "
            f"{(body - experts) / 1e9:.2f}B other params x {b} B"
        )
        padded, kept_scales, pad_why = _mxfp4_held(
            arch, experts, tp, compute_capability, vllm_release
        )
        body_bytes = padded * bits / 8 + kept_scales + (body - experts) * b
        body_why += pad_why
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
    total = int((body_bytes if stored_body is None else stored_body) + (embed + lm_head) * b)
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


def _mxfp4_held(
    arch: ModelArchitecture,
    experts: int,
    tp: int,
    compute_capability: str | None,
    vllm_release: str | None,
) -> tuple[int, int, str]:
    """Expert parameters as the GPU holds them after the MXFP4 kernel's padding, the bytes
    of checkpoint block scales left beside the kernel's copy, and the explanation."""
    major = compute_capability.partition(".")[0] if compute_capability else ""
    if not major.isdigit() or not arch.num_experts:
        return experts, 0, ""
    kernel, read_in = mxfp4_kernel(vllm_release, int(major))
    asked = vllm_release or load_vllm_releases().reference
    release = f"vLLM {asked}" + ("" if read_in == asked else f" (as read in {read_in})")
    if kernel is None:
        return (
            experts,
            0,
            (
                f", unpadded ({release}'s MXFP4 MoE kernel on compute capability "
                f"{compute_capability} was not read)"
            ),
        )
    source = next(r.source for r in load_vllm_releases().mxfp4_moe if r.version == read_in)
    h = arch.hidden_size
    shard = -(-(arch.moe_intermediate_size or arch.intermediate_size) // tp)
    h_pad = -(-h // kernel.hidden_multiple) * kernel.hidden_multiple
    i_pad = -(-shard // kernel.intermediate_multiple) * kernel.intermediate_multiple
    padded = int(experts * (h_pad * i_pad) / (h * shard))
    kept = padded // 32 if kernel.keeps_checkpoint_scales else 0
    why = f", {release} runs the experts on {kernel.kernel} ({source})"
    if padded != experts:
        why += (
            f": padded to hidden {h_pad} x intermediate {i_pad} per TP shard, "
            f"{padded / 1e9:.2f}B expert params held"
        )
    if kept:
        why += (
            f"{':' if padded == experts else ','} + {gb(kept)} of checkpoint block scales "
            "kept beside the kernel's swizzled copy (1 B per 32 weights)"
        )
    return padded, kept, why
