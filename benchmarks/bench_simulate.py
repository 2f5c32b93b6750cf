"""Speed of the event-level scheduler simulation (gpustrata.vllm.simulate), one run.

Simulates 2,000 requests of Llama-3.1-8B on one H100 for each arrival pattern (closed
loop, Poisson, burst) and prints the wall time, the engine steps and the p50/p90 figures.

    python benchmarks/bench_simulate.py
"""

from __future__ import annotations

import time

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.capacity import estimate_capacity
from gpustrata.vllm.performance import Workload
from gpustrata.vllm.simulate import simulate_serving

REQUESTS = 2000


def main() -> None:
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    gpu = load_hardware_catalog().gpu("h100-sxm-80gb")
    assert arch is not None and gpu is not None
    est = estimate_capacity(arch, gpu, max_model_len=4096)
    c = default_constants()
    for w in (
        Workload(1024, 256, concurrency=64),
        Workload(1024, 256, request_rate=20.0),
        Workload(2000, 200, concurrency=REQUESTS, burst=True),
    ):
        t0 = time.perf_counter()
        s = simulate_serving(arch, gpu, est, w, c, requests=REQUESTS)
        dt = time.perf_counter() - t0
        print(
            f"{w.load:>16}: {s.requests} requests, {s.steps} steps in {dt:.3f} s; "
            f"TTFT p50/p90 {s.ttft_p50_s:.2f}/{s.ttft_p90_s:.2f} s, TPOT p50/p90 "
            f"{s.tpot_p50_s * 1e3:.1f}/{s.tpot_p90_s * 1e3:.1f} ms, "
            f"{s.output_tokens_per_second:,.0f} tok/s, {s.preemptions} preemptions"
        )


if __name__ == "__main__":
    main()
