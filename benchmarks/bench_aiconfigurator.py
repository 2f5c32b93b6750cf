"""NVIDIA AIConfigurator beside gpustrata on the published vLLM runs both can express.

AIConfigurator (``pip install aiconfigurator``; not a gpustrata dependency) estimates TTFT,
TPOT and throughput offline from operator timings it ships per GPU and backend. For every
point of ``catalog/data/serving-calibration.yaml`` it can express (a model whose config.json
it bundles, a GPU it has vLLM data for, closed-loop concurrency: its ``estimate`` mode is a
static batch of that many requests), this prints the measured TPOT, TTFT and output
tokens/s, AIConfigurator's (``aiconfigurator cli estimate --backend vllm --estimate-mode
agg``, its default vLLM data version) and gpustrata's twice, with the shipped constants:
the event-level simulation's means (what ``size`` and ``plan`` judge the SLOs by since
session 22; ``benchmarks/bench_serving_loso.py``'s :func:`simulate` and :func:`errors`, the
held-out benchmark's own workload per point) and the closed form (:func:`predict_point`,
which now only screens candidates). Each with its error, then median and max |error| per
tool over the figures all three predict and the run measured.
Each point says whether gpustrata's constants were fitted on it (``serving-fit.yaml``):
on those its figure is in sample, AIConfigurator's never is; a figure the point leaves out
of every fit (``not_fitted``) is named.
Points it cannot express are listed with the reason (request-rate and burst runs; a
model or GPU it has no data for).

    python benchmarks/bench_aiconfigurator.py [--points ID ...]

Skips with a message (exit 0) when aiconfigurator is not installed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import bench_serving_loso as loso

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.serving import (
    CalibrationPoint,
    load_serving_calibration,
    load_serving_fit,
)
from gpustrata.vllm.calibration import default_constants, predict_point

GPUS = {
    "a100-sxm-80gb": "a100_sxm",
    "h100-sxm-80gb": "h100_sxm",
    "h200-sxm-141gb": "h200_sxm",
    "l40s": "l40s",
}
"""gpustrata GPU ids -> AIConfigurator system names (same GPU, same memory)."""

FIGURES = {"tpot": "tpot", "ttft": "ttft", "throughput": "tok/s"}
"""The figures compared (the keys of :func:`bench_serving_loso.errors`) and their labels."""


@dataclass(frozen=True)
class Figures:
    tpot_ms: float
    ttft_ms: float
    tokens_per_s: float
    note: str = ""


def _bundled_models() -> set[str]:
    """Model ids whose config.json AIConfigurator ships (it needs no Hub access for them)."""
    import aiconfigurator_core

    folder = Path(aiconfigurator_core.__file__).parent / "model_configs"
    return {
        p.name.removesuffix("_config.json").replace("--", "/", 1)
        for p in folder.glob("*_config.json")
    }


def _why_not(p: CalibrationPoint, models: set[str]) -> str | None:
    if p.concurrency is None or p.burst:
        kind = f"burst of {p.concurrency}" if p.burst else "request-rate"
        return f"{kind} run: AIConfigurator's estimate is a static batch at a concurrency"
    if p.model not in models:
        return f"AIConfigurator bundles no config.json for {p.model}"
    if p.gpu not in GPUS:
        return f"AIConfigurator has no system for {p.gpu}"
    return None


def _aiconfigurator(p: CalibrationPoint, exe: str) -> Figures | str:
    assert p.concurrency is not None
    cmd = [
        exe,
        "cli",
        "estimate",
        "--model-path",
        p.model,
        "--system",
        GPUS[p.gpu],
        "--backend",
        "vllm",
        "--estimate-mode",
        "agg",
        "--isl",
        str(p.input_tokens),
        "--osl",
        str(p.output_tokens),
        "--batch-size",
        str(p.concurrency),
        "--tp",
        str(p.tensor_parallel_size),
        "--no-color",
    ]
    arch = load_model_catalog().get(p.model)
    if arch is not None and arch.is_moe:
        # vLLM without --enable-expert-parallel shards every expert over the TP ranks
        cmd += ["--moe-tp-size", str(p.tensor_parallel_size), "--moe-ep-size", "1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    text = run.stdout + run.stderr

    def num(label: str) -> float | None:
        m = re.search(rf"^\s*{label}:\s*([\d,.]+)", text, re.MULTILINE)
        return float(m.group(1).replace(",", "")) if m else None

    tpot, ttft, tps = num("TPOT"), num("TTFT"), num("tokens/s")
    if run.returncode != 0 or tpot is None or ttft is None or tps is None:
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["no output"]
        return f"aiconfigurator failed (exit {run.returncode}): {last[0][:160]}"
    backend = re.search(r"Backend:\s*(\S+ \([^)]*\))", text)
    return Figures(tpot, ttft, tps, backend.group(1) if backend else "")


def _err(pred: float, measured: float | None) -> float | None:
    return None if not measured else pred / measured - 1


def _cell(e: float | None) -> str:
    return "    -" if e is None else f"{e:+5.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", nargs="*", help="calibration point ids (default: all)")
    args = parser.parse_args()
    exe = shutil.which("aiconfigurator")
    try:
        models = _bundled_models()
    except ImportError:
        exe = None
    if exe is None:
        print(
            "skipped: aiconfigurator is not installed (pip install aiconfigurator; it is not "
            "a gpustrata dependency)"
        )
        return 0
    constants = default_constants()
    fit = load_serving_fit()
    fitted_on = {i for c in fit.constants.values() for i in c.fitted_on}
    points = [p for p in load_serving_calibration() if not args.points or p.id in args.points]
    tools = ("aiconfigurator", "closed form", "simulated")
    errs: dict[str, dict[str, list[float]]] = {t: {f: [] for f in FIGURES} for t in tools}
    skipped: list[str] = []
    print(
        f"{'point':40} {'fig':5} {'measured':>9} {'AIC':>9} {'err':>5} {'closed':>9} "
        f"{'err':>5} {'simulated':>9} {'err':>5}"
    )
    for p in points:
        why = _why_not(p, models)
        if why is not None:
            skipped.append(f"{p.id}: {why}")
            continue
        aic = _aiconfigurator(p, exe)
        if isinstance(aic, str):
            skipped.append(f"{p.id}: {aic}")
            continue
        pp = predict_point(p, constants)
        closed = {
            "tpot": pp.prediction.tpot_seconds.value * 1e3,
            "ttft": pp.prediction.ttft_seconds.value * 1e3,
            "throughput": pp.throughput,
        }
        sim = loso.simulate(p, constants)
        simulated = loso.figures(p, sim) if sim is not None else {}
        sim_errors = loso.errors(p, sim, fitted_only=False)
        measured = {"tpot": p.tpot_ms, "ttft": p.ttft_ms, "throughput": p.output_tokens_per_second}
        theirs = {"tpot": aic.tpot_ms, "ttft": aic.ttft_ms, "throughput": aic.tokens_per_s}
        for fig, label in FIGURES.items():
            m = measured[fig]
            e = (_err(theirs[fig], m), _err(closed[fig], m), sim_errors.get(fig))
            if None not in e:
                for tool, err in zip(tools, e, strict=True):
                    assert err is not None
                    errs[tool][fig].append(abs(err))
            shown = "-" if m is None else f"{m:,.1f}"
            g = simulated.get(fig)
            print(
                f"{p.id[:40]:40} {label:5} {shown:>9} {theirs[fig]:9,.1f} {_cell(e[0])} "
                f"{closed[fig]:9,.1f} {_cell(e[1])} "
                f"{'-' if g is None else f'{g:9,.1f}':>9} {_cell(e[2])}"
            )
        seen = "in gpustrata's fit" if p.id in fitted_on else "held out of gpustrata's fit"
        if p.not_fitted:
            seen += f" (not fitted: {', '.join(p.not_fitted)})"
        print(f"{'':40} (AIConfigurator vllm data: {aic.note}; {seen})")
    print("\nover the figures all three predict (|error|):")
    for tool, table in errs.items():
        for fig, values in table.items():
            if values:
                print(
                    f"  {tool:15} {FIGURES[fig]:5} median {statistics.median(values):6.1%}  "
                    f"max {max(values):6.1%}  ({len(values)} points)"
                )
    print(f"\nnot expressible ({len(skipped)}):")
    for s in skipped:
        print(f"  {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
