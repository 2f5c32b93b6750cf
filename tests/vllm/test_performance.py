"""The serving performance model: a roofline a number can falsify, monotonicity, provenance."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import GpuModel, load_hardware_catalog
from gpustrata.catalog.serving import load_serving_calibration, load_serving_fit
from gpustrata.vllm.calibration import CONSTANT_NAMES, OPTIONAL_CONSTANT_NAMES, default_constants
from gpustrata.vllm.capacity import estimate_capacity
from gpustrata.vllm.performance import (
    ServingConstants,
    Workload,
    decode_step,
    predict_serving,
)
from gpustrata.vllm.terms import CapacityError
from gpustrata.vllm.timing import fitted_engine_init
from tests._scripts import ROOT

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
BARE = ServingConstants(
    memory_efficiency=1.0,
    compute_efficiency=1.0,
    step_overhead_s=0.0,
    per_sequence_overhead_s=0.0,
    allreduce_latency_s=0.0,
    moe_layer_overhead_s=0.0,
    request_overhead_s=0.0,
    source="test: the bare roofline",
)


def _setup(model: str = LLAMA_8B, gpu: str = "h100-sxm-80gb", **settings: object):  # type: ignore[no-untyped-def]
    arch = load_model_catalog().get(model)
    g = load_hardware_catalog().gpu(gpu)
    assert arch is not None and g is not None
    est = estimate_capacity(arch, g, max_model_len=8192, **settings)
    return arch, g, est


def test_batch_one_decode_is_weights_over_bandwidth() -> None:
    """At batch 1 with no overheads, a step reads the weights once: 16.06 GB / 3350 GB/s."""
    arch, gpu, est = _setup()
    step = decode_step(arch, gpu, est, batch=1, context=1, constants=BARE)
    weights = est.weights.bytes_per_gpu
    assert 16.0e9 < weights < 16.2e9  # Llama-3.1-8B in BF16
    assert step.seconds.value == pytest.approx((weights + step.kv_bytes.value) / 3350e9)
    assert step.seconds.value == pytest.approx(0.0048, rel=0.01)
    assert "memory-bound" in step.seconds.explanation


def test_large_batch_decode_turns_compute_bound() -> None:
    """2 x 8B FLOPs per token: 8192 tokens x 15 GFLOP = 123 TFLOP > 16 GB / 3.35 TB/s."""
    arch, gpu, est = _setup()
    step = decode_step(arch, gpu, est, batch=8192, context=1, constants=BARE)
    assert step.compute_s.value > step.memory_s.value
    assert step.seconds.value == pytest.approx(step.flops.value / (gpu.dense_bf16_tflops * 1e12))


def test_decode_is_monotonic_in_batch_tp_and_bandwidth() -> None:
    c = default_constants()
    arch, gpu, est = _setup()
    times = [
        decode_step(arch, gpu, est, batch=b, context=2048, constants=c).seconds.value
        for b in (1, 8, 64, 256)
    ]
    assert times == sorted(times) and times[0] < times[-1]
    arch70, _, _ = _setup(LLAMA_70B)
    by_tp = []
    for tp in (2, 4, 8):
        _, _, est70 = _setup(LLAMA_70B, tensor_parallel_size=tp)
        by_tp.append(
            decode_step(arch70, gpu, est70, batch=16, context=2048, constants=c).seconds.value
        )
    assert by_tp == sorted(by_tp, reverse=True)
    faster: GpuModel = gpu.model_copy(update={"memory_bandwidth_gbs": 2 * gpu.memory_bandwidth_gbs})
    slow = decode_step(arch, gpu, est, batch=8, context=2048, constants=c).seconds.value
    fast = decode_step(arch, faster, est, batch=8, context=2048, constants=c).seconds.value
    assert fast < slow


def test_throughput_grows_and_tpot_worsens_with_concurrency() -> None:
    c = default_constants()
    arch, gpu, est = _setup()
    preds = [
        predict_serving(arch, gpu, est, Workload(1024, 256, concurrency=n), c) for n in (1, 16, 64)
    ]
    tput = [p.output_tokens_per_second.value for p in preds]
    tpot = [p.tpot_seconds.value for p in preds]
    assert tput == sorted(tput) and tpot == sorted(tpot)


def test_queueing_when_the_batch_is_bounded_by_max_num_seqs() -> None:
    c = default_constants()
    arch, gpu, est = _setup(max_num_seqs=8)
    free = predict_serving(arch, gpu, est, Workload(512, 128, concurrency=8), c)
    queued = predict_serving(arch, gpu, est, Workload(512, 128, concurrency=32), c)
    assert queued.limit == "max_num_seqs" and queued.running.value == 8
    assert queued.ttft_seconds.value > 3 * free.ttft_seconds.value
    assert queued.output_tokens_per_second.value == pytest.approx(
        free.output_tokens_per_second.value
    )


def test_request_rate_above_capacity_saturates() -> None:
    c = default_constants()
    arch, gpu, est = _setup()
    calm = predict_serving(arch, gpu, est, Workload(512, 128, request_rate=1.0), c)
    assert not calm.saturated and calm.requests_per_second.value == pytest.approx(1.0)
    flood = predict_serving(arch, gpu, est, Workload(512, 128, request_rate=10_000.0), c)
    assert flood.saturated and "saturated" in flood.ttft_seconds.explanation


def test_moe_reads_only_the_touched_experts() -> None:
    arch, gpu, est = _setup("Qwen/Qwen3-30B-A3B")
    one = decode_step(arch, gpu, est, batch=1, context=1, constants=BARE).weight_bytes.value
    many = decode_step(arch, gpu, est, batch=256, context=1, constants=BARE).weight_bytes.value
    assert one < 0.2 * est.weights.bytes_per_gpu
    assert many == pytest.approx(est.weights.bytes_per_gpu, rel=0.01)


def test_fp8_weights_halve_the_bytes_and_double_the_peak() -> None:
    arch, gpu, bf16 = _setup(LLAMA_70B, tensor_parallel_size=4)
    _, _, fp8 = _setup(LLAMA_70B, tensor_parallel_size=4, quantization="fp8")
    a = decode_step(arch, gpu, bf16, batch=4096, context=1, constants=BARE)
    b = decode_step(arch, gpu, fp8, batch=4096, context=1, constants=BARE)
    assert b.weight_bytes.value < 0.55 * a.weight_bytes.value
    assert b.compute_s.value == pytest.approx(a.compute_s.value / 2)


def test_fp8_on_ampere_is_weight_only_marlin() -> None:
    """A100 has no FP8 tensor cores: vLLM runs FP8 checkpoints through Marlin (weights read
    at 8 bits, GEMMs at the 16-bit rate), so FP8 halves the bytes but not the compute."""
    arch, gpu, bf16 = _setup(LLAMA_70B, "a100-sxm-80gb", tensor_parallel_size=4)
    _, _, fp8 = _setup(LLAMA_70B, "a100-sxm-80gb", tensor_parallel_size=4, quantization="fp8")
    assert not gpu.fp8
    a = decode_step(arch, gpu, bf16, batch=4096, context=1, constants=BARE)
    b = decode_step(arch, gpu, fp8, batch=4096, context=1, constants=BARE)
    assert b.weight_bytes.value < 0.55 * a.weight_bytes.value
    assert b.compute_s.value == pytest.approx(a.compute_s.value)
    assert "weight-only through Marlin" in b.compute_s.explanation
    assert "Marlin" not in a.compute_s.explanation


def test_fp8_moe_experts_run_at_the_16_bit_rate() -> None:
    """On Hopper an FP8 MoE's routed-expert GEMMs run in Triton's fused_moe, no faster than
    BF16 (vllm-project/vllm#23280): FP8 doubles only the rest of the step's FLOP rate, so
    its compute time lies between half the BF16 one and the BF16 one, by the expert share."""
    arch, gpu, bf16 = _setup("Qwen/Qwen3-30B-A3B")
    _, _, fp8 = _setup("Qwen/Qwen3-30B-A3B", quantization="fp8")
    a = decode_step(arch, gpu, bf16, batch=4096, context=1, constants=BARE)
    b = decode_step(arch, gpu, fp8, batch=4096, context=1, constants=BARE)
    assert a.compute_s.value / 2 < b.compute_s.value < a.compute_s.value
    assert "fused_moe at the 16-bit rate" in b.compute_s.explanation
    assert "fused_moe" not in a.compute_s.explanation
    # the expert share: 2 x tokens x k x one expert's parameters over all layers
    e, k = arch.num_experts or 0, arch.num_experts_per_tok or 0
    expert = 2 * 4096 * k * (arch.params_total_b - arch.params_active_b) * 1e9 / (e - k)
    rate = gpu.dense_bf16_tflops * 1e12
    assert b.compute_s.value == pytest.approx(
        expert / rate + (b.flops.value - expert) / (2 * rate), rel=1e-9
    )


def test_moe_at_tp_has_a_per_layer_floor_only_where_bytes_are_few() -> None:
    """An MoE split over TP > 1 GPUs steps no faster than ``moe_tp_layer_floor_s`` per
    decoder layer: DeepSeek-R1 (AWQ) on 8 x H100 at batch 1 reads ~1 ms of bytes per GPU,
    so 61 layers x the floor set the step (tt-inference-server#356 measures 16.1 ms); a
    dense model at TP 8, an MoE on one GPU and a large MoE batch keep their roofline."""
    floor = dataclasses.replace(BARE, moe_tp_layer_floor_s=170e-6)
    arch, gpu, est = _setup("deepseek-ai/DeepSeek-R1", tensor_parallel_size=8, quantization="awq")
    bare = decode_step(arch, gpu, est, batch=1, context=1, constants=BARE)
    one = decode_step(arch, gpu, est, batch=1, context=1, constants=floor)
    assert bare.seconds.value < 0.005
    assert one.seconds.value == pytest.approx(
        arch.num_hidden_layers * 170e-6 + bare.allreduce_s.value, rel=1e-9
    )
    assert "layer-floor-bound" in one.seconds.explanation
    assert "170 us x 61 layers" in one.seconds.explanation
    many = decode_step(arch, gpu, est, batch=4096, context=1, constants=floor)
    assert many.seconds.value == pytest.approx(
        decode_step(arch, gpu, est, batch=4096, context=1, constants=BARE).seconds.value
    )
    for model, tp in ((LLAMA_70B, 8), ("Qwen/Qwen3-30B-A3B", 1)):
        a, g, e = _setup(model, tensor_parallel_size=tp)
        with_floor = decode_step(a, g, e, batch=1, context=1, constants=floor)
        assert with_floor.seconds.value == pytest.approx(
            decode_step(a, g, e, batch=1, context=1, constants=BARE).seconds.value
        ), model
        assert "layer floor" not in with_floor.seconds.explanation


def test_published_runs_are_sized_at_the_release_they_state() -> None:
    """The calibration path sizes a run as ``size --vllm-version X`` would: gpt-oss-120b on
    one H100 at GPUStack's 0.10.2 gets that release's KV cache (about one 32K sequence, as
    the run decoded), not the reference release's; a run that states no release gets the
    reference release's terms, and says so."""
    from gpustrata.catalog.vllm_releases import reference_release
    from gpustrata.vllm.calibration import point_release, sized_point

    points = {p.id: p for p in load_serving_calibration()}
    run = points["gpustack-gpt-oss-120b-h100-32000-100-burst100"]
    arch, gpu, est = sized_point(run)
    assert point_release(run) == ("0.10.2", "0.10.2 (read)")
    at_release = estimate_capacity(
        arch, gpu, vllm_release="0.10.2", max_model_len=32768, tensor_parallel_size=1
    )
    reference = estimate_capacity(arch, gpu, max_model_len=32768, tensor_parallel_size=1)
    assert est.kv.tokens == at_release.kv.tokens < reference.kv.tokens
    assert 1 <= est.kv.max_concurrency < 2
    unstated = next(p for p in points.values() if p.vllm_version == "not stated")
    release, why = point_release(unstated)
    assert release is None and reference_release() in why


def test_workload_needs_one_load() -> None:
    with pytest.raises(CapacityError):
        Workload(10, 10)
    with pytest.raises(CapacityError):
        Workload(10, 10, concurrency=1, request_rate=1.0)


def test_every_constant_cites_the_points_it_was_fitted_on() -> None:
    fit = load_serving_fit()
    ids = {p.id for p in load_serving_calibration()}
    shipped = set(fit.constants)
    assert set(CONSTANT_NAMES) <= shipped <= set(CONSTANT_NAMES) | set(OPTIONAL_CONSTANT_NAMES)
    for name, c in fit.constants.items():
        assert c.fitted_on and set(c.fitted_on) <= ids, name
        assert c.explanation
    assert len(ids) >= 15
    c = default_constants()
    assert all(f"{n} " in c.source for n in shipped)
    fields = {f.name for f in dataclasses.fields(ServingConstants)} - {"source"}
    assert shipped <= fields
    # A constant the shipped fit does not set (before session 20's refit: per-generation
    # memory efficiency and the layer floor, fitted only per fold in
    # benchmarks/bench_serving_loso.py) is unset: no unfitted value is used.
    assert all(getattr(c, n) is None for n in fields - shipped)


def test_every_prediction_carries_its_working() -> None:
    c = default_constants()
    arch, gpu, est = _setup()
    p = predict_serving(arch, gpu, est, Workload(2048, 256, concurrency=64), c)
    for term in (p.tpot_seconds, p.ttft_seconds, p.output_tokens_per_second, p.running):
        assert term.explanation and term.value > 0


def test_every_startup_constant_cites_published_logs() -> None:
    from gpustrata.catalog.serving import load_startup_logs

    ids = {log.id for log in load_startup_logs()}
    startup = load_serving_fit().startup
    assert {
        "init_base_s_per_layer",
        "compile_s_per_layer",
        "graph_capture_s_per_layer_size",
    } <= set(startup)
    for name, c in startup.items():
        assert c.fitted_on and set(c.fitted_on) <= ids, name

    # More layers compile longer; eager skips compile and graphs; MoE adds its warm-up.
    def init(layers: int, **kw: bool) -> float:
        return fitted_engine_init(layers, **{"enforce_eager": False, **kw})[0]

    assert init(80) > init(32)
    assert init(80, enforce_eager=True) < init(32)
    assert init(32, is_moe=True) > init(32)
    assert init(32, compile_cached=True) < init(32)


def test_planner_startup_uses_the_fitted_model() -> None:
    """The planner's startup estimate is the fitted one: HF download bandwidth and init."""
    from gpustrata.vllm.timing import startup_estimate

    arch, _, est = _setup()
    fit = load_serving_fit().startup
    s = startup_estimate(arch, est.weights, weights_source="huggingface")
    assert s.load_gbps == fit["load_gbps_hf_download"].value
    assert s.init_s == fitted_engine_init(arch.num_hidden_layers, enforce_eager=False)[0]
    assert "fitted" in s.load_source and "fitted" in s.init_source
    pvc = startup_estimate(arch, est.weights, weights_source="pvc")
    assert "gpustrata default" in pvc.load_source  # no published PVC log yet


def test_the_step_token_budget_bounds_the_running_batch() -> None:
    """A100s get max_num_batched_tokens 2048: 2048 x 100 // (2000 + 100) = 97 requests
    decode while the prompts replacing them fill the rest of each step."""
    c = default_constants()
    arch, gpu, est = _setup(gpu="a100-sxm-80gb")
    assert est.max_num_batched_tokens == 2048
    p = predict_serving(arch, gpu, est, Workload(2000, 100, concurrency=500), c)
    assert p.limit == "token_budget" and p.running.value == 97
    assert p.step.prompt_tokens <= 2048 - 97
    _, _, wide = _setup(gpu="a100-sxm-80gb", max_num_batched_tokens=8192)
    q = predict_serving(arch, gpu, wide, Workload(2000, 100, concurrency=500), c)
    assert q.running.value > p.running.value
    assert q.output_tokens_per_second.value > p.output_tokens_per_second.value


def test_prompt_chunks_are_not_hidden_under_the_memory_roofline() -> None:
    """8 running, 4,000-token prompts: over 200 output steps the other 7 prompts arrive as 7
    whole chunks, so TPOT = (193 decode-only steps + 7 compute-bound steps) / 200, not one
    step carrying 140 averaged prompt tokens under the weights' read time."""
    arch, gpu, est = _setup()
    p = predict_serving(arch, gpu, est, Workload(4000, 200, concurrency=8), BARE)
    ctx = 4000 + 100
    plain = decode_step(arch, gpu, est, batch=8, context=ctx, constants=BARE)
    loaded = decode_step(
        arch,
        gpu,
        est,
        batch=8,
        context=ctx,
        constants=BARE,
        prompt_tokens=4000,
        prompt_context=2000,
    )
    expected = (193 * plain.seconds.value + 7 * loaded.seconds.value) / 200
    assert p.tpot_seconds.value == pytest.approx(expected)
    averaged = decode_step(
        arch,
        gpu,
        est,
        batch=8,
        context=ctx,
        constants=BARE,
        prompt_tokens=7 * 4000 / 200,
        prompt_context=2000,
    )
    assert p.tpot_seconds.value > 1.2 * averaged.seconds.value


def test_compute_efficiency_is_per_gpu_generation() -> None:
    """sm80 and sm90 have their own fitted fraction; other generations the default."""
    c = dataclasses.replace(
        BARE, compute_efficiency=0.1, compute_efficiency_sm80=0.5, compute_efficiency_sm90=0.25
    )
    for gpu_id, eff in (("a100-sxm-80gb", 0.5), ("h100-sxm-80gb", 0.25), ("l40s", 0.1)):
        arch, gpu, est = _setup(gpu=gpu_id)
        step = decode_step(arch, gpu, est, batch=8192, context=1, constants=c)
        assert step.compute_s.value == pytest.approx(
            step.flops.value / (gpu.dense_bf16_tflops * 1e12 * eff)
        ), gpu_id
    fitted = default_constants()
    assert fitted.compute_efficiency_sm80 is not None
    assert fitted.compute_efficiency_sm90 is not None
    # Other generations keep the fit's start (no point of the fit runs on them, and every
    # held-out fold predicted its Blackwell point with that value: session 21).
    start = yaml.safe_load((ROOT / "benchmarks/data/serving-fit-start.yaml").read_text())
    assert fitted.compute_efficiency == start["constants"]["compute_efficiency"]
    assert fitted.memory_efficiency == start["constants"]["memory_efficiency"]


def test_a_burst_drains_in_waves() -> None:
    """32 short requests at once, 8 slots: request i waits floor(i / 8) decodes of the
    requests ahead of it (prefill is negligible), a mean of 1.5 decodes; a steady closed
    loop of 32 waits (32 / 8 - 1) = 3 whole requests."""
    c = default_constants()
    arch, gpu, est = _setup(max_num_seqs=8)
    burst = predict_serving(arch, gpu, est, Workload(16, 128, concurrency=32, burst=True), c)
    loop = predict_serving(arch, gpu, est, Workload(16, 128, concurrency=32), c)
    decode_s = 127 * burst.tpot_seconds.value
    pre = burst.ttft_seconds.value - 1.5 * decode_s
    assert 0 < pre < 0.1
    assert burst.ttft_seconds.value < 0.6 * loop.ttft_seconds.value
    assert burst.output_tokens_per_second.value == pytest.approx(
        loop.output_tokens_per_second.value
    )
    with pytest.raises(CapacityError):
        Workload(16, 128, request_rate=1.0, burst=True)


@pytest.mark.parametrize("transport", ["host", "network"])
def test_tp_all_reduces_priced_by_their_transport(transport: str) -> None:
    """The same TP 2 engine: over the GPU link (custom all-reduce, the fitted latency, here
    0) each all-reduce costs its bytes over NVLink; through host memory (NCCL SHM) or across
    Pods (NCCL NET) it costs the transport's cited latency plus its bytes over the
    transport's bus bandwidth, 2 x layers times a step."""
    from gpustrata.vllm.transport import transport_figures

    arch, gpu, device = _setup(LLAMA_70B, tensor_parallel_size=4)
    _, _, other = _setup(LLAMA_70B, tensor_parallel_size=4, tp_transport=transport)
    assert other.tp_transport == transport and device.tp_transport == "device"
    figures = transport_figures(other.tp_transport)
    assert figures is not None and figures.source
    fast = decode_step(arch, gpu, device, batch=64, context=1024, constants=BARE)
    slow = decode_step(arch, gpu, other, batch=64, context=1024, constants=BARE)
    msg = 64 * arch.hidden_size * 2
    one = figures.latency_s + 2 * 3 / 4 * msg / (figures.bus_gbs * 1e9)
    assert slow.allreduce_s.value == pytest.approx(2 * arch.num_hidden_layers * one)
    assert slow.allreduce_s.value > 10 * fast.allreduce_s.value
    assert f"NCCL {transport} transport" in slow.allreduce_s.explanation
    assert slow.memory_s.value == fast.memory_s.value  # only the communication changes


def test_an_unknown_tp_transport_is_refused_by_name() -> None:
    with pytest.raises(CapacityError, match="'nvlink' is not one of device, host, network"):
        _setup(tensor_parallel_size=2, tp_transport="nvlink")


def test_a_calibration_point_states_its_transport_with_a_quote() -> None:
    """The dennislee22 TP 2 runs say in their logs that the custom all-reduce was off for
    lack of GPU peer access (NCCL through host memory); a transport other than the GPU
    link needs such a quote."""
    import pydantic

    from gpustrata.catalog.serving import CalibrationPoint

    host = [p for p in load_serving_calibration() if p.tp_transport == "host"]
    assert host and all(p.id.startswith("dennislee-qwen2-7b-2xa100") for p in host)
    assert all("Custom allreduce is disabled" in (p.tp_transport_quote or "") for p in host)
    raw = host[0].model_dump()
    with pytest.raises(pydantic.ValidationError, match="quote what says so"):
        CalibrationPoint.model_validate({**raw, "tp_transport_quote": None})
    with pytest.raises(pydantic.ValidationError, match="tensor_parallel_size 1"):
        CalibrationPoint.model_validate({**raw, "tensor_parallel_size": 1})


def test_a_pcie_nvlink_bridge_joins_two_gpus_and_larger_tp_crosses_pcie() -> None:
    """A100 PCIe's NVLink bridge joins 2 GPUs (datasheet): TP 2 reduces over it like the SXM
    part; a TP 4 ring's other hops cross PCIe Gen4, so each all-reduce moves its bytes at
    PCIe speed, while TP 4 on SXM (NVSwitch) stays on NVLink."""
    from gpustrata.vllm.performance import PCIE4_GBS, link_gbs

    pcie = load_hardware_catalog().gpu("a100-pcie-80gb")
    sxm = load_hardware_catalog().gpu("a100-sxm-80gb")
    assert pcie is not None and sxm is not None and pcie.nvlink_peers == 2
    assert sxm.nvlink_peers is None
    assert link_gbs(pcie, 2) == link_gbs(sxm, 2) == 300.0
    assert link_gbs(pcie, 4) == PCIE4_GBS and link_gbs(sxm, 8) == 300.0
    steps = {}
    for gpu in ("a100-pcie-80gb", "a100-sxm-80gb"):
        arch, g, est = _setup(LLAMA_70B, gpu, tensor_parallel_size=4)
        steps[gpu] = decode_step(arch, g, est, batch=64, context=1024, constants=BARE)
    slow, fast = steps["a100-pcie-80gb"].allreduce_s, steps["a100-sxm-80gb"].allreduce_s
    assert slow.value == pytest.approx(fast.value * 300.0 / PCIE4_GBS)
    assert "one NVLink bridge joins" in slow.explanation


def test_a_point_whose_source_leaves_the_part_open_names_every_variant() -> None:
    """GPUStack's pages say "NVIDIA A100 GPUs": each such point lists the parts that fit
    and is scored as one of them with the reason; a variant outside the list is refused."""
    import pydantic

    from gpustrata.catalog.serving import CalibrationPoint
    from gpustrata.vllm.calibration import sized_point

    open_part = [p for p in load_serving_calibration() if p.gpu_variants]
    assert open_part and all(p.id.startswith("gpustack-") and "a100" in p.id for p in open_part)
    hardware = load_hardware_catalog()
    for p in open_part:
        assert p.gpu in p.gpu_variants and p.gpu_choice
        assert all(hardware.gpu(g) is not None for g in p.gpu_variants)
    tp8 = next(p for p in open_part if p.tensor_parallel_size == 8)
    assert sized_point(tp8, "a100-sxm-80gb")[1].id == "a100-sxm-80gb"
    assert sized_point(tp8)[1].id == tp8.gpu
    with pytest.raises(CapacityError, match="not among"):
        sized_point(tp8, "h100-sxm-80gb")
    raw = tp8.model_dump()
    with pytest.raises(pydantic.ValidationError, match="say why it is the one scored"):
        CalibrationPoint.model_validate({**raw, "gpu_choice": None})
    with pytest.raises(pydantic.ValidationError, match="list gpu"):
        CalibrationPoint.model_validate({**raw, "gpu": "h100-sxm-80gb"})


def test_a_publisher_is_a_harness_not_a_page() -> None:
    """The serving fit and its held-out check weigh and hold out by publisher: GPUStack's
    pages are one, tenstorrent's issues are one each, and no point is left without one."""
    from gpustrata.vllm.calibration import point_publisher

    points = load_serving_calibration()
    by = {point_publisher(p) for p in points}
    gpustack = {p.id.split("-")[1] for p in points if p.id.startswith("gpustack-")}
    assert len(gpustack) > 1  # several models' pages ...
    assert {point_publisher(p) for p in points if p.id.startswith("gpustack-")} == {"gpustack"}
    assert {"tt-143", "tt-340"} <= by  # ... but tenstorrent's issues stay apart
    assert all(by)


def test_async_scheduling_overlaps_the_engines_cpu_work_with_the_gpus() -> None:
    """Without asynchronous scheduling (vLLM before 0.14.0) a step costs its GPU work plus
    the engine's CPU work; with it (0.14.0 on), the larger of the two (session 20)."""
    c = default_constants()
    arch, gpu, serial = _setup(vllm_release="0.10.2")
    _, _, overlapped = _setup(vllm_release="0.14.0")
    assert not serial.async_scheduling and overlapped.async_scheduling
    cpu = lambda b: c.step_overhead_s + c.per_sequence_overhead_s * b  # noqa: E731
    for batch in (1, 64, 256):
        s = decode_step(arch, gpu, serial, batch=batch, context=1024, constants=c)
        a = decode_step(arch, gpu, overlapped, batch=batch, context=1024, constants=c)
        gpu_s = s.seconds.value - cpu(batch)
        assert a.seconds.value == pytest.approx(max(gpu_s, cpu(batch)))
        assert "async scheduling" in a.seconds.explanation
    # An explicit setting overrides the release's default.
    _, _, forced = _setup(vllm_release="0.14.0", async_scheduling=False)
    assert not forced.async_scheduling
