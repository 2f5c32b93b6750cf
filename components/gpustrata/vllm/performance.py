"""The serving performance of one vLLM engine: decode step, prefill, TTFT, TPOT, throughput.

A roofline over the figures the capacity estimate already has (weights per GPU, the exact
KV cache, max_num_seqs, max_num_batched_tokens) and the catalogue's GPU facts (memory
bandwidth, dense BF16 TFLOP/s, GPU-to-GPU bandwidth):

* decode step = max(bytes read / (bandwidth x memory efficiency), FLOPs / (peak x compute
  efficiency)) + TP all-reduces (2 per layer) + a per-step and a per-sequence overhead.
  Bytes read: the weights on one GPU (MoE: the shared part plus the experts the batch
  routes to), plus the KV cache each running sequence attends over.
* prefill: the same with the prompt's tokens; chunked prefill spreads the prompts of the
  running batch over its decode steps, so a decode step also carries ``B x input /
  output`` prompt tokens on average (the other sequences' prompts: what makes TPOT grow
  with the prompt and the batch).
* at a concurrency (closed loop, as ``vllm bench serve --max-concurrency``) or a request
  rate (open loop): the running batch is bounded by max_num_seqs and by the requests the
  KV cache holds; the rest queue (TTFT grows by the wait).

Every number is a :class:`~gpustrata.vllm.terms.Term` (value and working). The
efficiencies and overheads are :class:`ServingConstants`, fitted once to published
vLLM runs (``catalog/data/serving-fit.yaml``, points in ``serving-calibration.yaml``).
Pure: no Pulumi import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.dtypes import model_dtype_bytes
from gpustrata.vllm.kv_cache import gdn_state_bytes
from gpustrata.vllm.terms import GB, CapacityError, Term
from gpustrata.vllm.timing import forward_flops
from gpustrata.vllm.transport import transport_figures

__all__ = [
    "FP8_QUANTIZATIONS",
    "PCIE4_GBS",
    "DecodeStep",
    "ServingConstants",
    "ServingPrediction",
    "Workload",
    "decode_step",
    "link_gbs",
    "predict_serving",
    "prefill_seconds",
]

FP8_QUANTIZATIONS = frozenset({"fp8", "fbgemm_fp8", "modelopt", "compressed-tensors-fp8"})
"""Quantisations whose GEMMs run on FP8 tensor cores (twice the BF16 rate) where the GPU
has them."""


@dataclass(frozen=True)
class ServingConstants:
    """The calibrated constants of the model, with where each came from."""

    memory_efficiency: float
    """Fraction of the datasheet memory bandwidth a decode step's reads reach."""
    compute_efficiency: float
    """Fraction of dense peak FLOP/s a prefill (or compute-bound decode) reaches on a GPU
    generation with no fitted value of its own (below)."""
    step_overhead_s: float
    """Fixed time per engine step (scheduler, sampler, launches, output processing)."""
    per_sequence_overhead_s: float
    """Time per running sequence per step of the engine core's own CPU work, which runs in
    series with the GPU in vLLM V1 (``EngineCore.step``: ``Scheduler.schedule``, the model
    runner's input preparation, ``Scheduler.update_from_output``; vllm
    ``v1/engine/core.py`` at v0.10.1.1). Detokenisation and streaming are not in it: they
    run in the API server process (``AsyncLLM``'s output handler and
    ``OutputProcessor``), in parallel with the engine's next steps, and a request's
    ``RequestOutputCollector`` merges the tokens of several steps when that process falls
    behind, so its per-request cost does not lengthen a step (session 20,
    docs/reference/sizing-accuracy.md)."""
    allreduce_latency_s: float
    """Fixed time of one tensor-parallel all-reduce (launch and synchronisation)."""
    moe_layer_overhead_s: float
    """Fixed time per MoE layer per step (routing, permutation, the fused-MoE kernels'
    launch), beyond the bytes the experts read."""
    request_overhead_s: float
    """Fixed time added to each request's TTFT (HTTP, tokenisation, scheduling, the first
    token's detokenisation and streaming)."""
    source: str
    """Where the values come from (the fit and its points)."""
    compute_efficiency_sm80: float | None = None
    """``compute_efficiency`` on compute capability 8.0 (A100, A30); None: the default."""
    compute_efficiency_sm90: float | None = None
    """``compute_efficiency`` on compute capability 9.0 (H100, H200, GH200); None: the
    default. Published vLLM runs reach a smaller fraction of the Hopper datasheet peak
    (989 TFLOP/s dense BF16) than of the Ampere one (312), so one fraction for both
    misses one of them by ~2x (catalog/data/serving-fit.yaml says on which points)."""

    memory_efficiency_sm80: float | None = None
    """``memory_efficiency`` on compute capability 8.0 (A100); None: the default."""
    memory_efficiency_sm90: float | None = None
    """``memory_efficiency`` on compute capability 9.0 (H100, H200); None: the default.
    Microbenchmarks reach 0.75-0.78 of the H200's datasheet bandwidth
    (benchmarks/data/h200-decode-microbench.json), more than one value for every generation
    gives; benchmarks/bench_serving_loso.py fits both per held-out source."""

    moe_tp_layer_floor_s: float = 0.0
    """Least time one decoder layer of an MoE model takes per step when its experts are
    split over TP > 1 GPUs, however few bytes each GPU reads: the layer's chain of
    latency-bound kernels (attention, router and top-k, the two fused-MoE GEMMs, shared
    expert, norms) and its two all-reduces, each a launch of its own in the step's CUDA
    graph. At small batch each GPU's slice of the touched experts is a few MB, so the chain,
    not HBM bandwidth, sets the step (``decode_step`` takes the larger of the two)."""

    layer_floor_s: float | None = None
    """Least time one decoder layer takes per step on any model, however few bytes it
    reads: its chain of kernels (norms, QKV, rotary, attention, output projection, MLP),
    each with a minimum time of its own even when replayed from a CUDA graph. It binds
    only where a layer's bytes take less (a sub-1B model: Qwen3-0.6B reads ~19 us a layer
    on an H100); ``moe_tp_layer_floor_s`` is the larger floor of an MoE layer split over
    TP > 1 GPUs. Not in serving-fit.yaml (None: no floor): benchmarks/bench_serving_loso.py
    fits it per held-out source (session 20)."""

    def _for(self, gpu: GpuModel, name: str, label: str) -> tuple[float, str]:
        """``name`` on ``gpu``'s generation (``name_sm80`` / ``name_sm90`` where set, else
        ``name``), and which value it is."""
        cc = gpu.compute_capability.replace(".", "")
        value = getattr(self, f"{name}_sm{cc}", None) if cc in ("80", "90") else None
        if value is not None:
            return value, f"sm{cc} {label}{value:g}"
        default: float = getattr(self, name)
        return default, f"{label}{default:g}"

    def memory_efficiency_for(self, gpu: GpuModel) -> tuple[float, str]:
        """The memory-bandwidth efficiency on ``gpu``'s generation, and which value it is."""
        return self._for(gpu, "memory_efficiency", "")

    def compute_efficiency_for(self, gpu: GpuModel) -> tuple[float, str]:
        """The compute efficiency on ``gpu``'s generation, and which value it is."""
        return self._for(gpu, "compute_efficiency", "efficiency ")


@dataclass(frozen=True)
class Workload:
    """What the engine is asked to serve: fixed lengths at a concurrency or a rate."""

    input_tokens: int
    output_tokens: int
    concurrency: int | None = None
    """Requests in flight (closed loop); None with a request rate."""
    request_rate: float | None = None
    """Requests per second arriving (open loop); None with a concurrency."""
    burst: bool = False
    """With a concurrency: the ``concurrency`` requests all arrive at once and are not
    replaced (``vllm bench serve --num-prompts N`` at request rate inf without
    --max-concurrency): TTFT is the mean over the draining queue instead of a steady
    closed loop's wait."""

    @property
    def load(self) -> str:
        """``2 req/s``, ``burst 100`` or ``concurrency 64``: how requests arrive."""
        if self.request_rate is not None:
            return f"{self.request_rate:g} req/s"
        return f"burst {self.concurrency}" if self.burst else f"concurrency {self.concurrency}"

    def __post_init__(self) -> None:
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise CapacityError("workload", "input and output tokens must be at least 1")
        if (self.concurrency is None) == (self.request_rate is None):
            raise CapacityError("workload", "give exactly one of concurrency or request rate")
        if self.concurrency is not None and self.concurrency < 1:
            raise CapacityError("workload", "concurrency must be at least 1")
        if self.request_rate is not None and not self.request_rate > 0:
            raise CapacityError("workload", "request rate must be positive")
        if self.burst and self.concurrency is None:
            raise CapacityError("workload", "a burst needs a concurrency (the requests sent)")


@dataclass(frozen=True)
class DecodeStep:
    """One engine step of ``batch`` decoding sequences (plus prompt tokens), with its parts."""

    batch: int
    prompt_tokens: float
    weight_bytes: Term
    kv_bytes: Term
    flops: Term
    memory_s: Term
    compute_s: Term
    allreduce_s: Term
    overhead_s: Term
    seconds: Term


@dataclass(frozen=True)
class ServingPrediction:
    """TTFT, TPOT, throughput of one engine replica for a workload, each with its working."""

    workload: Workload
    running: Term
    """Sequences decoding together (bounded by concurrency, max_num_seqs and the KV cache)."""
    limit: str
    """What bounds ``running``: ``concurrency``, ``max_num_seqs``, ``kv_cache`` or ``rate``."""
    kv_sequences: Term
    """Requests of input + output tokens the KV cache holds at once."""
    step: DecodeStep
    tpot_seconds: Term
    ttft_seconds: Term
    output_tokens_per_second: Term
    requests_per_second: Term
    saturated: bool
    """A request rate above what the engine sustains: the queue grows without bound."""


# --------------------------------------------------------------------------- parts


def _bytes_per_param(arch: ModelArchitecture, est: CapacityEstimate) -> float:
    return est.weights.total_bytes / max(1.0, arch.params_total_b * 1e9)


def _routed_expert_params(arch: ModelArchitecture) -> float:
    """Parameters of one routed expert summed over the MoE layers (0 for a dense model):
    the parameters a token does not activate, over the experts it does not route to."""
    e, k = arch.num_experts or 0, arch.num_experts_per_tok or 0
    if not arch.is_moe or e <= k or k <= 0:
        return 0.0
    return (arch.params_total_b - arch.params_active_b) * 1e9 / (e - k)


def _weight_bytes_read(arch: ModelArchitecture, est: CapacityEstimate, tokens: float) -> Term:
    """Weight bytes one GPU of the largest stage reads in a step of ``tokens`` tokens."""
    per_gpu = est.weights.bytes_per_gpu
    e, k = arch.num_experts or 0, arch.num_experts_per_tok or 0
    per_expert = _routed_expert_params(arch)
    if not per_expert:
        return Term(per_gpu, f"{per_gpu / GB:.2f} GB of weights on one GPU, all read")
    expert_bytes = min(per_gpu, e * per_expert * _bytes_per_param(arch, est) / est.gpus)
    touched = 1 - (1 - k / e) ** max(1.0, tokens)
    read = per_gpu - expert_bytes * (1 - touched)
    return Term(
        read,
        f"{(per_gpu - expert_bytes) / GB:.2f} GB shared weights + {expert_bytes / GB:.2f} GB "
        f"experts x {touched:.0%} touched (1 - (1 - {k}/{e})^{tokens:.0f} tokens) "
        f"= {read / GB:.2f} GB per GPU",
    )


def _kv_bytes_read(arch: ModelArchitecture, est: CapacityEstimate, batch: int, ctx: float) -> Term:
    """KV cache bytes ``batch`` sequences of average context ``ctx`` attend over, per GPU."""
    per_token = est.kv.bytes_per_token
    layers = arch.num_hidden_layers
    sliding = arch.num_sliding_attention_layers
    window = arch.sliding_window or ctx
    eff_ctx = ((layers - sliding) * ctx + sliding * min(ctx, window)) / layers
    value = batch * eff_ctx * per_token
    why = f"{batch} sequences x {eff_ctx:,.0f} attended tokens x {per_token:,} B/token/GPU"
    linear = arch.layer_attention_types().count("linear_attention")
    if linear:
        # Each Gated DeltaNet layer reads (and writes back) its whole state every step.
        state = gdn_state_bytes(
            arch, est.tensor_parallel_size, model_dtype_bytes(arch, est.dtype)[1]
        )
        value += batch * linear * state
        why += f" + {batch} x {linear} Gated DeltaNet states of {state:,} B"
    return Term(value, f"{why} = {value / GB:.2f} GB")


def _compute_seconds(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    flops: float,
    tokens: float,
    rate: float,
) -> tuple[float, str]:
    """Seconds of ``flops`` (per GPU) at ``rate`` FLOP/s (peak x efficiency), and how.

    FP8 on a GPU with FP8 tensor cores doubles the rate of the dense GEMMs (CUTLASS
    ``scaled_mm``), but not of an MoE model's routed-expert GEMMs: vLLM's ``Fp8MoEMethod``
    runs them in Triton's ``fused_moe`` on Hopper (DeepGEMM only where the image installs
    it; the CUTLASS block-scaled grouped GEMM only on compute capability 10.0: vllm
    ``model_executor/layers/quantization/fp8.py``), and vLLM's own measurement of
    block-scaled FP8 GEMMs on H100 gives 407 TFLOP/s (Triton) and 490 (CUTLASS) against
    666 for BF16 at M = 8192 (vllm-project/vllm#23280): no faster than 16-bit. So those
    FLOPs are priced at the 16-bit rate.
    """
    fp8 = gpu.fp8 and (est.quantization or "").lower() in FP8_QUANTIZATIONS
    expert = 2 * tokens * (arch.num_experts_per_tok or 0) * _routed_expert_params(arch)
    expert = min(flops, expert / est.gpus)
    if not fp8 or not expert:
        return flops / rate, ""
    seconds = (flops - expert) / rate + expert / (rate / 2)
    return seconds, (
        f" (of which {expert / 1e12:.3f} TFLOP routed-expert GEMMs in fused_moe at the 16-bit "
        "rate: FP8 MoE kernels are no faster than BF16, vllm-project/vllm#23280)"
    )


def _peak_flops(gpu: GpuModel, est: CapacityEstimate) -> tuple[float, str]:
    """Dense peak FLOP/s of the step's GEMMs. FP8 weights on a GPU without FP8 tensor
    cores (compute capability below 8.9: A100) run weight-only through Marlin: vLLM's
    ``Fp8LinearMethod`` and ``Fp8MoEMethod`` set ``use_marlin`` when the device lacks
    capability 89 and leave activations unquantised (vllm ``model_executor/layers/
    quantization/fp8.py`` of the releases read, e.g. the one GPUStack's A100 runs state),
    so the GEMMs run at the 16-bit rate while the weights are read at 8 bits (the weights
    estimate's bytes)."""
    quantised = (est.quantization or "").lower() in FP8_QUANTIZATIONS
    fp8 = gpu.fp8 and quantised
    mult = 2.0 if fp8 else 1.0
    why = f"{gpu.dense_bf16_tflops:g} TFLOP/s dense BF16" + (" x 2 (FP8 GEMMs)" if fp8 else "")
    if quantised and not gpu.fp8:
        why += " (FP8 weights without FP8 tensor cores: weight-only through Marlin, 16-bit GEMMs)"
    return gpu.dense_bf16_tflops * 1e12 * mult, why


PCIE4_GBS = 32.0
"""Per-direction GB/s of a PCIe Gen4 x16 link: the all-reduce's bandwidth for a GPU whose
catalogue entry states no interconnect_gbs."""


def link_gbs(gpu: GpuModel, tp: int = 2) -> float | None:
    """Per-direction GPU-to-GPU GB/s of a ring over ``tp`` GPUs: half the catalogue's
    bidirectional ``interconnect_gbs``, or a PCIe Gen4 link where the group is larger than
    the GPUs one NVLink bridge joins (``nvlink_peers``: the ring's other hops cross PCIe)."""
    if gpu.nvlink_peers is not None and tp > gpu.nvlink_peers:
        return PCIE4_GBS
    return gpu.interconnect_gbs / 2 if gpu.interconnect_gbs else None


def _allreduce(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    tokens: float,
    c: ServingConstants,
) -> Term:
    tp = est.tensor_parallel_size
    if tp == 1:
        return Term(0.0, "TP 1: no all-reduce")
    layers = max(est.kv.layers_per_stage or (arch.num_hidden_layers,))
    msg = tokens * arch.hidden_size * 2
    figures = transport_figures(est.tp_transport)
    if figures is not None:
        latency, bw = figures.latency_s, figures.bus_gbs
        src = f" over NCCL {est.tp_transport} transport: {figures.source}"
    else:
        interconnect_gbs = link_gbs(gpu, tp)
        latency, bw = c.allreduce_latency_s, interconnect_gbs or PCIE4_GBS
        src = "" if interconnect_gbs else " (no interconnect in the catalogue: PCIe Gen4 assumed)"
        if gpu.nvlink_peers is not None and tp > gpu.nvlink_peers:
            src = (
                f" (TP {tp} > the {gpu.nvlink_peers} GPUs one NVLink bridge joins: the ring "
                "crosses PCIe Gen4)"
            )
    one = latency + 2 * (tp - 1) / tp * msg / (bw * GB)
    total = 2 * layers * one
    return Term(
        total,
        f"2 all-reduces x {layers} layers x ({latency * 1e6:.1f} us + ring "
        f"2x{tp - 1}/{tp} x {msg / 1e6:.2f} MB / {bw:g} GB/s per direction{src}) "
        f"= {total * 1e3:.2f} ms",
    )


def decode_step(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    *,
    batch: int,
    context: float,
    constants: ServingConstants,
    prompt_tokens: float = 0.0,
    prompt_context: float = 0.0,
) -> DecodeStep:
    """One step: ``batch`` sequences decode one token at ``context`` tokens each, and the
    step also prefills ``prompt_tokens`` tokens attending ``prompt_context`` on average.

    Pipeline stages run one after another for a token, so a step costs the largest
    stage's time x PP (a conservative reading of vLLM's pipelining).
    """
    c = constants
    pp = est.pipeline_parallel_size
    tokens = batch + prompt_tokens
    w = _weight_bytes_read(arch, est, tokens)
    kv = _kv_bytes_read(arch, est, batch, context)
    flops_total = forward_flops(arch, batch, context, batch)
    if prompt_tokens > 0:
        flops_total += forward_flops(arch, prompt_tokens, prompt_context, 0)
    flops = flops_total / est.gpus
    fl = Term(flops, f"{flops_total / 1e12:,.2f} TFLOP / {est.gpus} GPUs")
    mem_eff, mem_eff_why = c.memory_efficiency_for(gpu)
    bw = gpu.memory_bandwidth_gbs * GB * mem_eff
    mem = (w.value + kv.value) / bw * pp
    peak, peak_why = _peak_flops(gpu, est)
    eff, eff_why = c.compute_efficiency_for(gpu)
    comp_s, comp_why = _compute_seconds(arch, gpu, est, flops, tokens, peak * eff)
    comp = comp_s * pp
    pp_why = f" x PP {pp}" if pp > 1 else ""
    mem_t = Term(
        mem,
        f"({w.value / GB:.2f} + {kv.value / GB:.2f}) GB / ({gpu.memory_bandwidth_gbs:g} GB/s "
        f"x {mem_eff_why}){pp_why} = {mem * 1e3:.2f} ms",
    )
    comp_t = Term(
        comp,
        f"{flops / 1e12:.3f} TFLOP / ({peak_why} x {eff_why}){comp_why}{pp_why} "
        f"= {comp * 1e3:.2f} ms",
    )
    ar = _allreduce(arch, gpu, est, tokens, c)
    moe_layers = arch.num_hidden_layers if arch.is_moe else 0
    # The engine's CPU work (step_overhead_s, per_sequence_overhead_s) and the MoE layers'
    # fixed GPU time (moe_layer_overhead_s): only the CPU part overlaps the GPU's under
    # asynchronous scheduling (gpustrata.vllm.scheduling).
    cpu = c.step_overhead_s + c.per_sequence_overhead_s * batch
    moe_over = c.moe_layer_overhead_s * moe_layers
    over = cpu + moe_over
    moe_why = (
        f" + {c.moe_layer_overhead_s * 1e6:.0f} us x {moe_layers} MoE layers" if moe_layers else ""
    )
    over_t = Term(
        over,
        f"{c.step_overhead_s * 1e3:.2f} ms per step + {c.per_sequence_overhead_s * 1e6:.0f} us "
        f"x {batch} sequences (engine CPU work){moe_why}",
    )
    floor_layers = max(est.kv.layers_per_stage or (arch.num_hidden_layers,))
    moe_tp = arch.is_moe and est.tensor_parallel_size > 1
    layer_floor = c.layer_floor_s or 0.0
    per_layer = max(layer_floor, c.moe_tp_layer_floor_s if moe_tp else 0.0)
    floor = per_layer * floor_layers * pp
    gpu_s = max(mem, comp, floor) + ar.value * pp + moe_over
    total = max(gpu_s, cpu) if est.async_scheduling else gpu_s + cpu
    bound = "memory" if mem >= comp else "compute"
    if floor > max(mem, comp):
        bound = "layer-floor"
    floor_kind = (
        f"MoE TP {est.tensor_parallel_size} layer floor"
        if moe_tp and c.moe_tp_layer_floor_s >= layer_floor
        else "layer floor"
    )
    floor_why = (
        f", {floor_kind} {per_layer * 1e6:.0f} us x {floor_layers} layers{pp_why} "
        f"= {floor * 1e3:.2f} ms"
        if per_layer
        else ""
    )
    gpu_why = (
        f"max(memory {mem * 1e3:.2f} ms, compute {comp * 1e3:.2f} ms{floor_why}) "
        f"[{bound}-bound] + all-reduce {ar.value * pp * 1e3:.2f} ms"
        + (f" + MoE layers {moe_over * 1e3:.2f} ms" if moe_layers else "")
    )
    secs = Term(
        total,
        (
            f"max(GPU {gpu_why} = {gpu_s * 1e3:.2f} ms, engine CPU {cpu * 1e3:.2f} ms) "
            f"[async scheduling] = {total * 1e3:.2f} ms"
            if est.async_scheduling
            else f"{gpu_why} + engine CPU {cpu * 1e3:.2f} ms = {total * 1e3:.2f} ms"
        ),
    )
    return DecodeStep(batch, prompt_tokens, w, kv, fl, mem_t, comp_t, ar, over_t, secs)


def prefill_seconds(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    *,
    input_tokens: int,
    decoding: int,
    context: float,
    constants: ServingConstants,
) -> Term:
    """Time to prefill one prompt while ``decoding`` sequences keep decoding (chunked prefill).

    The prompt goes in chunks of ``max_num_batched_tokens - decoding`` tokens, one per step;
    each chunk's step also decodes the running batch.
    """
    budget = max(1, est.max_num_batched_tokens - decoding)
    chunks = max(1, math.ceil(input_tokens / budget)) if est.chunked_prefill else 1
    chunk = input_tokens / chunks
    total = 0.0
    for i in range(chunks):
        ctx = i * chunk + chunk / 2
        step = decode_step(
            arch,
            gpu,
            est,
            batch=decoding,
            context=context,
            constants=constants,
            prompt_tokens=chunk,
            prompt_context=ctx,
        )
        total += step.seconds.value
    total += constants.request_overhead_s
    return Term(
        total,
        f"{input_tokens:,} prompt tokens in {chunks} chunk(s) of <= {budget:,} "
        f"(max_num_batched_tokens {est.max_num_batched_tokens:,} - {decoding} decoding), "
        f"each a step with the running batch, + {constants.request_overhead_s * 1e3:.0f} ms "
        f"per request = {total * 1e3:.1f} ms",
    )


def _kv_sequences(est: CapacityEstimate, tokens: int) -> Term:
    block = est.kv.block_size
    per_seq = -(-tokens // block) * block
    n = est.kv.tokens // per_seq if per_seq else 0
    return Term(
        n,
        f"KV cache {est.kv.tokens:,} tokens // {per_seq:,} tokens per request "
        f"(input + output, rounded up to blocks of {block}) = {n}",
    )


# --------------------------------------------------------------------------- serving


def _burst_ttft(
    w: Workload, running: int, prompt_rate: float, decode_s: float, pre: Term
) -> tuple[float, str]:
    """Mean TTFT of ``w.concurrency`` requests sent at once, served ``running`` at a time.

    Request i (in arrival order) starts when both the prompts ahead of it have been
    prefilled (at ``prompt_rate`` tokens/s, the steps' spare token budget) and, for
    i >= running, request i - running has finished decoding (``decode_s`` after its own
    first token): t_i = max(i x input / prompt_rate, t_(i - running) + decode_s). TTFT =
    the mean t_i + the request's own prefill and overhead.
    """
    n = int(w.concurrency or 1)
    starts: list[float] = []
    for i in range(n):
        by_prefill = i * w.input_tokens / prompt_rate
        by_slot = starts[i - running] + decode_s if i >= running else 0.0
        starts.append(max(by_prefill, by_slot))
    wait = sum(starts) / n
    why = (
        pre.explanation
        + f"; + mean wait {wait:.2f} s in a burst of {n}: request i starts after the "
        f"prompts ahead of it at {prompt_rate:,.0f} prompt tokens/s and, past the first "
        f"{running}, when request i - {running} has decoded ({decode_s:.2f} s)"
    )
    return pre.value + wait, why


def predict_serving(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    workload: Workload,
    constants: ServingConstants,
) -> ServingPrediction:
    """TTFT, TPOT, output tokens/s and requests/s of one replica serving ``workload``.

    Closed loop (concurrency C): B = min(C, max_num_seqs, KV requests) decode together;
    each step carries (B - 1) x input / output prompt tokens on average (chunked prefill), so
    TPOT = that step's time; TTFT = the prompt's chunked prefill + the queue wait
    (C/B - 1) x one request's service time when C > B. Throughput = B x output / (TTFT +
    (output - 1) x TPOT). Open loop (rate R): the running batch N solves N = R x E2E(N)
    (Little's law); above the largest rate B_max sustains, ``saturated``.
    """
    c = constants
    w = workload
    seq_tokens = w.input_tokens + w.output_tokens
    kv_seqs = _kv_sequences(est, seq_tokens)
    budget = est.max_num_batched_tokens
    # A step schedules at most max_num_batched_tokens tokens: B decode tokens plus the
    # prompt tokens of the requests replacing them, B x input / output on average, so at
    # most budget x output / (input + output) requests decode together in steady state.
    by_budget = max(1, budget * w.output_tokens // seq_tokens)
    bounds = {
        "max_num_seqs": est.max_num_seqs,
        "kv_cache": int(kv_seqs.value),
        "token_budget": by_budget,
    }
    slots = max(1, min(bounds.values()))
    slot_limit = min(bounds, key=lambda k: (bounds[k], k != "max_num_seqs"))
    mean_ctx = w.input_tokens + w.output_tokens / 2

    def decode_at(batch: int, prompt: float) -> DecodeStep:
        # One decode step of ``batch`` sequences carrying ``prompt`` tokens of prompt chunks.
        return decode_step(
            arch,
            gpu,
            est,
            batch=batch,
            context=mean_ctx,
            constants=c,
            prompt_tokens=prompt,
            prompt_context=w.input_tokens / 2,
        )

    def at(batch: int) -> tuple[DecodeStep, Term, Term, float]:
        # The other sequences' prompts interleave with this one's decode steps, a chunk of
        # min(input, the step's spare token budget) tokens at a time: over one request's
        # output steps, (B - 1) x input prompt tokens arrive in (B - 1) x input / chunk
        # chunks; a step carrying one is compute-bound where a decode-only step is not.
        others = (batch - 1) * w.input_tokens
        spare = max(1, budget - batch)
        chunk = min(w.input_tokens, spare)
        n_chunks = others / chunk
        out = w.output_tokens

        if others == 0:
            step = decode_at(batch, 0.0)
            tpot = Term(step.seconds.value, step.seconds.explanation)
        elif n_chunks <= out:
            plain, step = decode_at(batch, 0.0), decode_at(batch, float(chunk))
            value = ((out - n_chunks) * plain.seconds.value + n_chunks * step.seconds.value) / out
            tpot = Term(
                value,
                f"of {out} steps, {out - n_chunks:,.1f} decode only "
                f"({plain.seconds.value * 1e3:.2f} ms: {plain.seconds.explanation}) and "
                f"{n_chunks:,.1f} carrying a {chunk:,}-token prompt chunk of the other "
                f"{batch - 1} requests (chunked prefill; {step.seconds.explanation}): mean "
                f"{value * 1e3:.2f} ms",
            )
        else:
            step = decode_at(batch, min(others / out, float(spare)))
            tpot = Term(
                step.seconds.value,
                f"every step carries {step.prompt_tokens:,.0f} prompt tokens of the other "
                f"{batch - 1} requests ({batch - 1} x {w.input_tokens:,} / {out}, chunked "
                f"prefill): {step.seconds.explanation}",
            )
        pre = prefill_seconds(
            arch,
            gpu,
            est,
            input_tokens=w.input_tokens,
            decoding=max(0, batch - 1),
            context=mean_ctx,
            constants=c,
        )
        e2e = pre.value + (w.output_tokens - 1) * tpot.value
        return step, tpot, pre, e2e

    saturated = False
    if w.concurrency is not None:
        running = min(w.concurrency, slots)
        limit = "concurrency" if running == w.concurrency else slot_limit
        step, tpot, pre, e2e = at(running)
        if w.burst:
            spare = max(1, budget - running)
            full = decode_at(running, spare)
            rate = spare / full.seconds.value
            decode_s = (w.output_tokens - 1) * tpot.value
            ttft, ttft_why = _burst_ttft(w, running, rate, decode_s, pre)
        else:
            wait = (w.concurrency / running - 1) * e2e
            ttft = pre.value + wait
            ttft_why = pre.explanation + (
                f"; + queue {wait:.2f} s ({w.concurrency} requests for {running} slots: "
                f"({w.concurrency}/{running} - 1) x {e2e:.2f} s per request)"
                if wait > 0
                else ""
            )
        tok_s = running * w.output_tokens / e2e
        tok_why = (
            f"{running} running x {w.output_tokens} tokens / {e2e:.2f} s per request "
            f"(TTFT {pre.value:.3f} s + {w.output_tokens - 1} x TPOT) = {tok_s:,.1f} tok/s"
        )
    else:
        rate = float(w.request_rate or 0.0)
        step_max, tpot_max, pre_max, e2e_max = at(slots)
        max_rate = slots / e2e_max
        if rate >= max_rate:
            saturated = True
            running, limit = slots, "rate"
            step, tpot, pre, e2e = step_max, tpot_max, pre_max, e2e_max
            ttft = math.inf
            ttft_why = (
                f"saturated: {rate:g} req/s exceeds the {max_rate:.2f} req/s that {slots} "
                f"slots sustain; the queue grows without bound"
            )
            tok_s = max_rate * w.output_tokens
            tok_why = (
                f"at most {max_rate:.2f} req/s x {w.output_tokens} tokens = {tok_s:,.1f} tok/s"
            )
        else:
            n = 1.0
            for _ in range(60):
                e2e_n = at(max(1, math.ceil(n)))[3]
                n_next = min(float(slots), rate * e2e_n)
                if abs(n_next - n) < 0.01:
                    n = n_next
                    break
                n = 0.5 * (n + n_next)
            running, limit = max(1, math.ceil(n)), "rate"
            step, tpot, pre, e2e = at(running)
            ttft, ttft_why = pre.value, pre.explanation
            tok_s = rate * w.output_tokens
            tok_why = (
                f"{rate:g} req/s x {w.output_tokens} tokens = {tok_s:,.1f} tok/s "
                f"(Little's law: {rate:g} x {e2e:.2f} s = {rate * e2e:.1f} running)"
            )
    tpot_term = Term(tpot.value, f"{running} decoding: " + tpot.explanation)
    limit_why = {
        "concurrency": f"concurrency {running}",
        "max_num_seqs": f"max_num_seqs {est.max_num_seqs}",
        "kv_cache": f"the KV cache holds {int(kv_seqs.value)} requests",
        "token_budget": (
            f"max_num_batched_tokens {budget:,} per step holds {by_budget} decoding plus "
            f"the prompts replacing them ({budget:,} x {w.output_tokens} / {seq_tokens:,})"
        ),
        "rate": f"{running} in flight at the request rate",
    }[limit]
    return ServingPrediction(
        workload=w,
        running=Term(running, f"{running} sequences decode together ({limit_why})"),
        limit=limit,
        kv_sequences=kv_seqs,
        step=step,
        tpot_seconds=tpot_term,
        ttft_seconds=Term(ttft, ttft_why),
        output_tokens_per_second=Term(tok_s, tok_why),
        requests_per_second=Term(
            tok_s / w.output_tokens,
            f"{tok_s:,.1f} tok/s / {w.output_tokens} tokens per request",
        ),
        saturated=saturated,
    )
