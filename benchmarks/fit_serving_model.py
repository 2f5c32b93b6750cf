"""Fit the serving model's constants on every published run and write the fit.

The shipped constants are fitted by the same procedure as each fold of
``benchmarks/bench_serving_loso.py`` (its :func:`fit`), on every point of
``catalog/data/serving-calibration.yaml`` (the fold with nothing held out, ``fit_all``),
from the same fixed start (``benchmarks/data/serving-fit-start.yaml``). So what ``size`` and
``plan`` use is what the held-out benchmark measured, and that benchmark's errors
(``catalog/data/serving-margin.yaml``, its ``--write-margin``) are the shipped procedure's
error on publishers it was not fitted to. Writes ``catalog/data/serving-fit.yaml`` (the
``startup:`` section of ``benchmarks/fit_startup_model.py`` is kept as it is) with each value
and the ids of the points that constrain it. Re-run when points are added, then run the
held-out benchmark with ``--write-margin``:

    python benchmarks/fit_serving_model.py [--write]

Until session 20 this script searched a grid of the closed-form model
(gpustrata.vllm.performance) instead; ``git show 7810410:benchmarks/fit_serving_model.py``
has that search.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import bench_serving_loso as loso
import yaml

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.catalog.serving import CalibrationPoint, load_serving_calibration
from gpustrata.vllm.calibration import CONSTANT_NAMES, OPTIONAL_CONSTANT_NAMES
from gpustrata.vllm.performance import ServingConstants

_DATA = Path(__file__).resolve().parents[1] / "components/gpustrata/catalog/data/serving-fit.yaml"

KEPT = ("memory_efficiency", "compute_efficiency", "allreduce_latency_s", "moe_layer_overhead_s")
"""Constants the procedure does not move: they stay at the start's values."""

WHY = {
    "memory_efficiency": (
        "fraction of datasheet HBM bandwidth a decode step reaches on GPU generations no "
        "point of the fit runs on (Blackwell, Ada, Volta): not moved by the fit, the start's "
        "value (session 15's closed-form fit on 21 points); compare the 0.75-0.78 of "
        "benchmarks/data/h200-decode-microbench.json"
    ),
    "memory_efficiency_sm80": (
        "fraction of datasheet HBM bandwidth (2.0 TB/s on A100 80GB) a decode step reaches on "
        "compute capability 8.0; the KV cache is read at the same fraction"
    ),
    "memory_efficiency_sm90": (
        "the same on compute capability 9.0 (H100, H200, GH200); a Llama-3.1-8B decode step's "
        "GEMMs read 0.75-0.78 of the H200's 4.8 TB/s at batch 1-64 "
        "(benchmarks/data/h200-decode-microbench.json), before attention and launch gaps"
    ),
    "compute_efficiency": (
        "fraction of dense peak FLOP/s a prefill reaches on GPU generations no point of the "
        "fit runs on (Blackwell, Ada, Volta): not moved by the fit, the start's value (the "
        "lower of session 15's sm80 and sm90 values, so such a prediction was not more "
        "optimistic than any fitted generation then)"
    ),
    "compute_efficiency_sm80": (
        "fraction of dense BF16 peak (312 TFLOP/s on A100) a prefill or a step carrying prompt "
        "chunks reaches on compute capability 8.0; constrained by the steps that are "
        "compute-bound (long prompts, bursts, TTFT)"
    ),
    "compute_efficiency_sm90": (
        "the same on compute capability 9.0 (989 TFLOP/s on H100/H200); the H200 "
        "microbenchmark's bare prefill-shaped GEMMs reach 0.67-0.78, before attention, the "
        "mixed decode batch and launch gaps"
    ),
    "step_overhead_s": "fixed time per engine step (scheduler, sampler, launches)",
    "per_sequence_overhead_s": (
        "engine CPU time per running sequence per step (scheduling, input preparation, output "
        "update), in series with the GPU before vLLM 0.14.0 and overlapped with it from "
        "0.14.0 (asynchronous scheduling); only points with many sequences running constrain it"
    ),
    "allreduce_latency_s": (
        "fixed time of one TP all-reduce: not moved by the fit, the start's value (session "
        "15's closed-form fit on the TP 2 points)"
    ),
    "moe_layer_overhead_s": (
        "fixed time per MoE layer per step beyond the expert bytes: not moved by the fit, the "
        "start's value (session 15's closed-form fit on the MoE points)"
    ),
    "moe_tp_layer_floor_s": (
        "least time per decoder layer per step of an MoE model whose experts are split over "
        "TP > 1 GPUs (the layer's latency-bound kernel chain and its two all-reduces), taken "
        "as the larger of it and the bytes over HBM bandwidth; searched first, on the MoE "
        "points at TP > 1 alone"
    ),
    "layer_floor_s": (
        "least time a decoder layer takes per step, however few bytes it reads (its chain of "
        "kernels); binds only where a layer's bytes take less (a sub-1B model)"
    ),
    "request_overhead_s": (
        "fixed time added to each request's TTFT (HTTP, tokenisation, first token out)"
    ),
}
"""What each constant is, written beside its value."""


def _fitted_on(points: list[CalibrationPoint]) -> dict[str, list[str]]:
    """The points whose loss each constant moves (every point a constant's term can set)."""
    gpus = load_hardware_catalog()

    def on(cc: str) -> list[str]:
        return [p.id for p in points if (g := gpus.gpu(p.gpu)) and g.compute_capability == cc]

    ids = [p.id for p in points]
    # The constants the procedure keeps name the points of the fit that set their start
    # value (session 15's), as serving-fit.yaml has carried them since.
    shipped = yaml.safe_load(_DATA.read_text(encoding="utf-8"))["constants"]
    return {
        **{name: list(shipped[name]["fitted_on"]) for name in KEPT},
        "memory_efficiency_sm80": on("8.0"),
        "memory_efficiency_sm90": on("9.0"),
        "compute_efficiency_sm80": on("8.0"),
        "compute_efficiency_sm90": on("9.0"),
        "step_overhead_s": ids,
        "per_sequence_overhead_s": [
            p.id for p in points if (p.concurrency or 0) > 1 or p.request_rate
        ],
        "layer_floor_s": [p.id for p in points if loso._floor_can_bind(p.id)],
        "moe_tp_layer_floor_s": [p.id for p in points if loso._moe_tp(p)],
        "request_overhead_s": [p.id for p in points if p.ttft_ms and "ttft" not in p.not_fitted],
    }


def _dump(doc: object) -> str:
    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    return yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, width=100)


def document(
    c: ServingConstants, points: list[CalibrationPoint], seconds: float
) -> dict[str, object]:
    """serving-fit.yaml's serving part for the fitted ``c``."""
    fitted_on = _fitted_on(points)
    constants: dict[str, object] = {}
    for name in (*CONSTANT_NAMES, *OPTIONAL_CONSTANT_NAMES):
        value = getattr(c, name)
        constants[name] = {
            "value": round(float(value or 0.0), 9),
            "fitted_on": fitted_on[name] or [p.id for p in points],
            "explanation": WHY[name],
        }
    publishers = sorted({loso.point_publisher(p) for p in points})
    return {
        "method": (
            "benchmarks/bench_serving_loso.py's fit on every point (fit_all: the fold with "
            "nothing held out), from benchmarks/data/serving-fit-start.yaml: the simulator "
            "(gpustrata.vllm.simulate); moe_tp_layer_floor_s on a grid on the MoE TP > 1 "
            "points, then per_sequence_overhead_s and layer_floor_s jointly on a grid, then "
            "one sweep of coordinate descent (x0.8-1.25) over the per-generation memory and "
            "compute efficiencies, step_overhead_s and request_overhead_s; loss = each "
            "publisher's mean |log error| of TPOT and throughput + 0.5 x TTFT, then their "
            f"mean; {len(points)} points of {len(publishers)} publishers, fitted "
            f"{time.strftime('%Y-%m-%d', time.gmtime())} in {seconds:.0f} s. Its error held "
            "out by publisher: serving-margin.yaml"
        ),
        "constants": constants,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write serving-fit.yaml")
    args = parser.parse_args()
    points = list(load_serving_calibration())
    t0 = time.perf_counter()
    c = loso.fit_all()
    text = _dump(document(c, points, time.perf_counter() - t0))
    print(text)
    if args.write:
        old = _DATA.read_text(encoding="utf-8")
        startup = old[old.index("\nstartup:") :] if "\nstartup:" in old else ""
        header = (
            "# Written by benchmarks/fit_serving_model.py (serving constants) and\n"
            "# benchmarks/fit_startup_model.py (startup: section); do not edit by hand.\n"
        )
        _DATA.write_text(header + text + startup.lstrip("\n"), encoding="utf-8")
        print(f"wrote {_DATA}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
