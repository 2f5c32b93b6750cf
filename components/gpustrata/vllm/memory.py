"""The per-GPU memory budget: CUDA total, activations, CUDA graphs, what is left for KV cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.catalog.vllm_release_types import ProfileRelease
from gpustrata.catalog.vllm_releases import profile_facts
from gpustrata.vllm.reference import SRC_PROFILING, SRC_VLLM, SRC_WORKER, VLLM_SERIES
from gpustrata.vllm.terms import GIB, Term, gib
from gpustrata.vllm.weights import WeightsEstimate

__all__ = [
    "MemoryBudget",
    "activation_bytes",
    "cuda_total_bytes",
    "memory_budget",
]


# CUDA total (torch.cuda.mem_get_info) is below NVML's total by the driver's reservation:
# H100 80GB NVML 81559 MiB = 79.65 GiB vs 79.22 GiB in vLLM's own log (vLLM PR #10511).
_DRIVER_RESERVED_BYTES = int(0.45 * GIB)
_CUDA_GRAPH_BYTES = 1 * GIB
_RUNTIME_OVERHEAD_BYTES = 1 * GIB
_SAMPLER_BYTES_PER_LOGIT = 8
"""The calibrated sampler term: float32 logits and probabilities (vLLM PR #10511)."""

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
    sampler_bytes_per_logit: int = _SAMPLER_BYTES_PER_LOGIT,
    sampler_why: str = "",
    sampler_after_forward: bool = False,
) -> Term:
    """Peak activation of vLLM's profile run (a forward pass of max_num_batched_tokens).

    Estimate: ``T x bytes x (4 x hidden + qkv/TP + 3 x mlp/TP)`` for hidden states, the
    QKV output and the gated MLP (for MoE: ``top_k x (3 x expert_mlp/TP + hidden)``, the
    fused-MoE caches), plus the sampler warm-up's ``max_num_seqs x vocab x`` 8 B (float32
    logits and probabilities) or the *sampler_bytes_per_logit* a release's sampler path
    holds (the release catalogue's ``profile_run``, explained by *sampler_why*). With
    *sampler_after_forward* (a read release whose profile_run samples once the dummy
    forward has returned) the peak is the larger of the forward and the sampler warm-up
    beside the kept hidden states (``T x hidden``), not their sum. Calibrated on vLLM PR
    #10511's log (Llama-3-8B, 8192 tokens: 1.26 GiB measured, 1.3 GiB estimated);
    multimodal encoders are not modelled.
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
    sampler = max_num_seqs * arch.vocab_size * sampler_bytes_per_logit
    forward_why = f"{t} tokens x {dtype_bytes} B x (4 x {h} + qkv {qkv} + mlp {mlp_why})"
    sampler_why_s = (
        f"sampler {max_num_seqs} seqs x {arch.vocab_size} vocab x {sampler_bytes_per_logit} B"
        f"{f' ({sampler_why})' if sampler_why else ''}"
    )
    if sampler_after_forward:
        kept = t * dtype_bytes * h
        value = max(forward, kept + sampler)
        how = (
            f"max(forward {forward_why} = {gib(forward)}, hidden states {t} x {h} x "
            f"{dtype_bytes} B + {sampler_why_s} = {gib(kept + sampler)}): the sampler "
            "warm-up runs after the dummy forward returned"
        )
    else:
        value = forward + sampler
        how = f"{forward_why} + {sampler_why_s}"
    why = (
        f"{how} = {gib(value)} (gpustrata estimate of the profile run's torch peak, "
        f"{SRC_PROFILING})"
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
    vllm_release: str | None = None,
    flashinfer_sampler: bool | None = None,
) -> MemoryBudget:
    """Available KV-cache memory per GPU with every term explained.

    *vllm_release* (None: the reference release) picks the release catalogue's
    ``profile_run`` terms where they were read: whether a CUDA graph estimate is
    subtracted, and the sampler warm-up's path (*flashinfer_sampler*: what
    ``VLLM_USE_FLASHINFER_SAMPLER`` says, None: unset).
    """
    facts = profile_facts(vllm_release)
    sampler_bytes, sampler_why = _sampler(facts, flashinfer_sampler)
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
        f"{gib(requested)} ({SRC_VLLM} vllm/v1/worker/utils.py request_memory)",
    )
    weights_t = Term(weights.bytes_per_gpu, weights.explanation)
    act = activation_bytes(
        arch,
        tensor_parallel_size=tensor_parallel_size,
        dtype_bytes=dtype_bytes,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        sampler_bytes_per_logit=sampler_bytes,
        sampler_why=sampler_why,
        sampler_after_forward=facts is not None and facts.sampler_after_forward,
    )
    if enforce_eager:
        graphs = Term(0, "enforce_eager: no CUDA graphs are captured")
    elif facts is not None and not facts.cuda_graph_estimate:
        graphs = Term(
            0,
            f"vLLM {vllm_release} subtracts no CUDA graph estimate (no VLLM_MEMORY_PROFILER_"
            "ESTIMATE_CUDAGRAPHS): its graphs are captured after the KV cache, from the "
            f"memory outside gpu_memory_utilization ({facts.sources[0]})",
        )
    else:
        graphs = Term(
            _CUDA_GRAPH_BYTES,
            "gpustrata default 1 GiB, subtracted because VLLM_MEMORY_PROFILER_ESTIMATE_"
            f"CUDAGRAPHS=1 is the {VLLM_SERIES} default ({SRC_WORKER}); measured 0.32-0.65 GiB for "
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


def _sampler(facts: ProfileRelease | None, flashinfer: bool | None) -> tuple[int, str]:
    """Bytes per logit of the sampler warm-up on the release's path, and why (the
    calibrated figure where the release's path was not read)."""
    if facts is None or facts.sampler_default is None:
        return _SAMPLER_BYTES_PER_LOGIT, ""
    path = (
        facts.sampler_default if flashinfer is None else ("flashinfer" if flashinfer else "native")
    )
    value = facts.sampler_bytes_per_logit(path)
    if value is None:
        return _SAMPLER_BYTES_PER_LOGIT, ""
    how = "unset" if flashinfer is None else f"={int(flashinfer)}"
    return value, (
        f"vLLM {facts.version}'s {path} top-k/top-p path, VLLM_USE_FLASHINFER_SAMPLER "
        f"{how}; {facts.sources[-1]}"
    )
