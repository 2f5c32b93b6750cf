"""Decode-shaped GEMM, attention-over-KV and copy microbenchmarks on one GPU (torch only).

Grounds the serving model's efficiencies (gpustrata.vllm.performance): the fraction of
peak memory bandwidth a decode step's weight GEMMs and KV reads reach, the fraction of
peak BF16 FLOP/s a prefill GEMM reaches, and the fixed per-kernel cost. Never run by CI;
needs torch with CUDA. Prints one JSON object per measurement and writes them all to
``$OUT/microbench.json`` when OUT is set.

    python benchmarks/gpu_decode_microbench.py [--attention]

``--attention``: the copy and the attention-over-KV shapes only.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    results: list[dict[str, Any]] = []
    only_attention = "--attention" in sys.argv

    def timed(fn: Any, iters: int = 50) -> float:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        torch.cuda.synchronize()
        start.record()
        for _ in range(3):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end)) / 1000 / (3 * iters)

    def emit(row: dict[str, Any]) -> None:
        row["gpu"] = name
        results.append(row)
        print(json.dumps(row), flush=True)

    # 1. plain copy: the achievable share of the datasheet bandwidth
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    t = timed(lambda a=a, b=b: b.copy_(a), iters=10)
    emit({"kind": "copy", "bytes": 2 * n, "seconds": t, "gbs": 2 * n / t / 1e9})
    del a, b

    # 2. decode-shaped GEMMs: M tokens x (K x N) bf16 weights (Llama-3.1-8B / 70B-TP4 shapes)
    shapes = (
        {}
        if only_attention
        else {
            "8b_qkv": (4096, 6144),
            "8b_gate_up": (4096, 28672),
            "8b_down": (14336, 4096),
            "70b_tp4_gate_up": (8192, 14336),
            "70b_tp4_down": (7168, 8192),
        }
    )
    for label, (k, nn) in shapes.items():
        w = torch.randn(k, nn, dtype=torch.bfloat16, device=dev)
        for m in (1, 8, 32, 64, 128, 256, 512, 2048, 8192):
            x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
            y = torch.empty(m, nn, dtype=torch.bfloat16, device=dev)
            t = timed(lambda x=x, y=y, w=w: torch.matmul(x, w, out=y))
            byt = 2 * (k * nn + m * k + m * nn)
            emit(
                {
                    "kind": "gemm",
                    "shape": label,
                    "m": m,
                    "k": k,
                    "n": nn,
                    "seconds": t,
                    "gbs": byt / t / 1e9,
                    "tflops": 2 * m * k * nn / t / 1e12,
                }
            )
        del w

    # 3. attention of one query token per sequence over a KV cache (GQA 32 q / 8 kv heads)
    import torch.nn.functional as F

    # (batch, context, query heads): the decode shapes of the calibration points, down to
    # one sequence at 32K context (gpustack-qwen3-32b-*-32000-100-burst100: 64 q heads)
    attention_shapes = (
        (1, 2048, 32),
        (16, 2048, 32),
        (64, 2048, 32),
        (64, 4096, 32),
        (256, 1024, 32),
        (1, 8192, 32),
        (1, 32768, 64),
        (4, 32768, 64),
        (8, 4096, 64),
        (63, 4096, 40),
    )
    for batch, ctx, heads in attention_shapes:
        q = torch.randn(batch, heads, 1, 128, dtype=torch.bfloat16, device=dev)
        kk = torch.randn(batch, 8, ctx, 128, dtype=torch.bfloat16, device=dev)
        vv = torch.randn_like(kk)
        t = timed(
            lambda q=q, kk=kk, vv=vv: F.scaled_dot_product_attention(q, kk, vv, enable_gqa=True),
            iters=20,
        )
        byt = 2 * kk.numel() * 2
        emit(
            {
                "kind": "attention_decode",
                "batch": batch,
                "context": ctx,
                "query_heads": heads,
                "seconds": t,
                "gbs": byt / t / 1e9,
            }
        )
        del q, kk, vv

    if only_attention:
        return _write(results)
    # 4. one whole Llama-3.1-8B decode step's GEMMs (32 layers) in one graph: the per-step
    #    weight-read efficiency including many small kernels
    layers = [
        (
            torch.randn(4096, 6144, dtype=torch.bfloat16, device=dev),
            torch.randn(4096, 4096, dtype=torch.bfloat16, device=dev),
            torch.randn(4096, 28672, dtype=torch.bfloat16, device=dev),
            torch.randn(14336, 4096, dtype=torch.bfloat16, device=dev),
        )
        for _ in range(32)
    ]
    weight_bytes = sum(2 * w.numel() for ws in layers for w in ws)
    for m in (1, 16, 64, 128, 256):
        x = torch.randn(m, 4096, dtype=torch.bfloat16, device=dev)

        def step(x: Any = x) -> None:
            h = x
            for qkv, o, gu, d in layers:
                torch.matmul(h, qkv)
                h = torch.matmul(h, o)
                g = torch.matmul(h, gu)
                h = torch.matmul(g[:, :14336], d)

        t = timed(step, iters=5)
        emit(
            {
                "kind": "llama8b_step_gemms",
                "m": m,
                "weight_bytes": weight_bytes,
                "seconds": t,
                "gbs": weight_bytes / t / 1e9,
            }
        )

    return _write(results)


def _write(results: list[dict[str, Any]]) -> int:
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "microbench.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
