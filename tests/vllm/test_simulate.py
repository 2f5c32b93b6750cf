"""The event-level scheduler simulation (issue 31): batching bounds, bursts, Poisson
arrivals and preemption behave as vLLM's scheduler does."""

from __future__ import annotations

import pytest

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.capacity import estimate_capacity
from gpustrata.vllm.performance import Workload, decode_step
from gpustrata.vllm.simulate import simulate_serving


def _engine(**settings):  # type: ignore[no-untyped-def]
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    gpu = load_hardware_catalog().gpu("h100-sxm-80gb")
    assert arch is not None and gpu is not None
    return arch, gpu, estimate_capacity(arch, gpu, max_model_len=4096, **settings)


def test_one_client_decodes_at_the_batch_one_step() -> None:
    arch, gpu, est = _engine()
    c = default_constants()
    s = simulate_serving(arch, gpu, est, Workload(512, 128, concurrency=1), c)
    assert s.preemptions == 0 and s.mean_running == pytest.approx(1.0)
    step = decode_step(arch, gpu, est, batch=1, context=512 + 64, constants=c)
    assert s.tpot_p50_s == pytest.approx(step.seconds.value, rel=0.02)
    # p50 == p90: every request sees the same engine.
    assert s.tpot_p90_s == pytest.approx(s.tpot_p50_s, rel=1e-6)


def test_a_burst_beyond_max_num_seqs_queues() -> None:
    """A burst of 64 on an engine of max_num_seqs 16: four waves, the last waiting for
    three others to decode their 200 tokens, and no step runs more than 16."""
    arch, gpu, est = _engine(max_num_seqs=16)
    s = simulate_serving(
        arch, gpu, est, Workload(1000, 200, concurrency=64, burst=True), default_constants()
    )
    assert s.requests == 64 and s.mean_running <= 16
    assert s.ttft_p90_s > 2.5 * 199 * s.tpot_p50_s
    assert s.ttft_p90_s > 1.5 * s.ttft_p50_s


def test_chunked_prefill_respects_the_token_budget() -> None:
    """One 4,000-token prompt with a 512-token budget takes 8 steps before its first token."""
    arch, gpu, est = _engine(max_num_batched_tokens=512)
    s = simulate_serving(
        arch, gpu, est, Workload(4000, 2, concurrency=1), default_constants(), requests=1
    )
    assert s.steps == 8 + 1  # ceil(4000 / 512) prefill steps, then one decode step


def test_poisson_arrivals_are_seeded() -> None:
    arch, gpu, est = _engine()
    w, c = Workload(256, 64, request_rate=20.0), default_constants()
    a = simulate_serving(arch, gpu, est, w, c, requests=100, seed=1)
    b = simulate_serving(arch, gpu, est, w, c, requests=100, seed=1)
    other = simulate_serving(arch, gpu, est, w, c, requests=100, seed=2)
    assert a == b and a.ttft_p90_s != other.ttft_p90_s


def test_a_small_kv_cache_preempts_and_still_finishes() -> None:
    """With KV for a few requests of 3,000 tokens, 32 concurrent long generations
    outgrow it: the scheduler preempts (recompute) and every request still completes."""
    arch, gpu, est = _engine(gpu_memory_utilization=0.27)
    assert 2 < est.kv.tokens // 3000 < 8
    s = simulate_serving(
        arch,
        gpu,
        est,
        Workload(200, 2800, concurrency=32, burst=True),
        default_constants(),
        reserve_prompt=True,
    )
    assert s.requests == 32 and s.preemptions > 0


def test_a_sliding_window_group_takes_blocks_from_the_shared_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gpt-oss-120b's sliding-window layers form a KV-cache group of their own that takes
    blocks from the one pool beside the full-attention group (vLLM's hybrid KV cache
    manager, session 20): a burst of 4,000-token prompts runs fewer requests at once than
    the full-attention blocks alone would allow."""
    from gpustrata.vllm import simulate

    arch = load_model_catalog().get("openai/gpt-oss-120b")
    gpu = load_hardware_catalog().gpu("h100-sxm-80gb")
    assert arch is not None and gpu is not None
    est = estimate_capacity(arch, gpu, max_model_len=32768)
    assert sorted(simulate._block_groups(est), key=str) == [(16, 128), (16, None)]
    w, c = Workload(4000, 200, concurrency=300, burst=True), default_constants()
    both = simulate_serving(arch, gpu, est, w, c)
    monkeypatch.setattr(simulate, "_block_groups", lambda e: [(e.kv.block_size, None)])
    full_only = simulate_serving(arch, gpu, est, w, c)
    assert both.mean_running < 0.95 * full_only.mean_running
    # A model of one full-attention group is priced as before.
    assert simulate._block_groups(_engine()[2]) == [(16, None)]
