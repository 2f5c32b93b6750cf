"""Fit the serving model's constants ONCE on the published runs and write the fit.

Reads ``catalog/data/serving-calibration.yaml``, searches a grid of the five constants of
:class:`gpustrata.vllm.performance.ServingConstants` (numpy), minimising the mean absolute
log error of TPOT and output throughput (each publisher's mean, then their mean: publisher-
balanced since session 19, as benchmarks/bench_serving_loso.py's folds) plus half the
largest, and half the median TTFT one (TTFT weighted half, since it carries the queueing
the runs do not all state), and writes ``catalog/data/serving-fit.yaml``
with each value and the ids it was fitted on. Re-run only when points are added:

    python benchmarks/fit_serving_model.py [--write]

``--only moe_tp_layer_floor_s`` searches that one constant with every other at its value in
serving-fit.yaml and (with ``--write``) rewrites only its entry: how session 17 added the
per-layer MoE TP floor without refitting constants fitted before its points existed.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import yaml

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.catalog.serving import CalibrationPoint, load_serving_calibration
from gpustrata.vllm.calibration import CONSTANT_NAMES, point_publisher, predict_point
from gpustrata.vllm.performance import ServingConstants

GRID = {
    "memory_efficiency": np.round(np.arange(0.60, 0.951, 0.01), 3),
    "compute_efficiency_sm80": np.round(np.arange(0.20, 0.801, 0.025), 3),
    "compute_efficiency_sm90": np.round(np.arange(0.20, 0.801, 0.025), 3),
    "step_overhead_s": np.round(np.arange(0.0, 0.00801, 0.00025), 5),
    "per_sequence_overhead_s": np.array([0.0, 1e-5, 2e-5, 4e-5, 8e-5, 1.2e-4, 1.6e-4, 2e-4]),
    "allreduce_latency_s": np.array([0.0, 5e-6, 1e-5, 2e-5]),
    "moe_layer_overhead_s": np.round(np.arange(0.0, 0.000121, 0.00001), 6),
    "moe_tp_layer_floor_s": np.round(np.arange(0.0, 0.000301, 0.00001), 6),
    "request_overhead_s": np.round(np.arange(0.0, 0.0601, 0.005), 4),
}
_DATA = Path(__file__).resolve().parents[1] / "components/gpustrata/catalog/data/serving-fit.yaml"


SEARCHED = tuple(n for n in CONSTANT_NAMES if n != "compute_efficiency")
"""The constants the grid searches; ``compute_efficiency`` (GPU generations without a
fitted value of their own) is the lower of the per-generation values: no published point
says more, and the lower one keeps ``size`` from promising a TTFT no run supports."""


def _constants(values: dict[str, float]) -> ServingConstants:
    """Constants from the searched values, the default compute efficiency derived."""
    fallback = min(values["compute_efficiency_sm80"], values["compute_efficiency_sm90"])
    return ServingConstants(**values, compute_efficiency=fallback, source="fit")


HELD_OUT: frozenset[str] = frozenset()
"""Points left out of the loss (set from --hold-out): their errors are out-of-sample."""


def _errors(
    c: ServingConstants, *, held_out: bool = False
) -> tuple[list[float], list[float], list[float], list[str]]:
    """Log errors of the fitted points (``held_out``: of the held-out points instead), and
    the publisher of each TPOT-or-throughput error, in order."""
    tpot, tput, ttft, tpot_by, tput_by = [], [], [], [], []
    for p in load_serving_calibration():
        if (p.id in HELD_OUT) != held_out:
            continue
        e = predict_point(p, c).errors()
        if "tpot" in e:
            tpot.append(math.log1p(e["tpot"]))
            tpot_by.append(point_publisher(p))
        if "throughput" in e:
            tput.append(math.log1p(e["throughput"]))
            tput_by.append(point_publisher(p))
        if "ttft" in e and math.isfinite(e["ttft"]):
            ttft.append(math.log1p(e["ttft"]))
    return tpot, tput, ttft, tpot_by + tput_by


def _balanced_mean(values: np.ndarray, by: list[str]) -> float:
    """Each publisher's mean of ``values``, then their mean (as bench_serving_loso.py's fit
    weighs them): one publisher's many points do not set a constant."""
    groups: dict[str, list[float]] = {}
    for v, pub in zip(values, by, strict=True):
        groups.setdefault(pub, []).append(float(v))
    return float(np.mean([np.mean(g) for g in groups.values()]))


def _loss(c: ServingConstants) -> float:
    """Publisher-balanced mean |log error| of TPOT and throughput, + 0.5 x the largest
    (an order statistic: no weights) + 0.5 x the median TTFT |log error|."""
    tpot, tput, ttft, by = _errors(c)
    a = np.abs(np.array(tpot + tput))
    t = np.abs(np.array(ttft))
    return float(_balanced_mean(a, by) + 0.5 * np.max(a) + 0.5 * np.median(t))


FLOOR_WHY = (
    "least time per decoder layer per step of an MoE model whose experts are split over "
    "TP > 1 GPUs (the layer's latency-bound kernel chain and its two all-reduces), taken "
    "as the larger of it and the bytes over HBM bandwidth; fitted alone, every other "
    "constant at its value here, on the MoE points at TP > 1: only the small-batch ones "
    "(a few GB read per GPU per step) reach it"
)


def _moe_tp(p: CalibrationPoint) -> bool:
    """Whether ``moe_tp_layer_floor_s`` can bind on ``p``: an MoE model at TP > 1."""
    arch = load_model_catalog().get(p.model)
    return bool(arch and arch.is_moe and p.tensor_parallel_size > 1)


def _dump(doc: object) -> str:
    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    return yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, width=100)


def _fit_one(name: str, points: list[CalibrationPoint], *, write: bool) -> int:
    """Search ``name``'s grid alone with the shipped values of the others; print (and with
    ``write`` store) its entry, naming the points whose loss it moves."""
    old = _DATA.read_text(encoding="utf-8")
    head, startup = old, ""
    if "\nstartup:" in old:
        head, startup = old[: old.index("\nstartup:")], old[old.index("\nstartup:") :]
    doc = yaml.safe_load(head)
    shipped = {k: float(v["value"]) for k, v in doc["constants"].items()}
    values = {n: shipped.get(n, 0.0) for n in SEARCHED}
    loss, value = min((_loss(_constants({**values, name: float(v)})), float(v)) for v in GRID[name])
    on = [p.id for p in points if _moe_tp(p)]
    entry = {"value": value, "fitted_on": on, "explanation": FLOOR_WHY}
    constants = {}
    for k, v in doc["constants"].items():
        if k != name:
            constants[k] = v
        if k == "moe_layer_overhead_s":
            constants[name] = entry
    constants.setdefault(name, entry)
    doc["constants"] = constants
    print(f"{name} = {value:g} (loss {loss:.4f}) on {len(on)} points: {', '.join(on)}")
    if write:
        header = "".join(line + "\n" for line in head.splitlines() if line.startswith("#"))
        _DATA.write_text(header + _dump(doc) + startup.lstrip("\n"), encoding="utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write serving-fit.yaml")
    parser.add_argument(
        "--hold-out",
        nargs="*",
        default=[],
        metavar="ID",
        help="point ids left out of the fit (their errors are reported out-of-sample)",
    )
    parser.add_argument(
        "--only",
        choices=["moe_tp_layer_floor_s"],
        help="search only this constant, the others fixed at serving-fit.yaml's values, and "
        "(with --write) rewrite only its entry",
    )
    args = parser.parse_args()
    global HELD_OUT
    known = {p.id for p in load_serving_calibration()}
    unknown = sorted(set(args.hold_out) - known)
    if unknown:
        parser.error(f"--hold-out: no such point: {', '.join(unknown)}")
    HELD_OUT = frozenset(args.hold_out)
    points = [p for p in load_serving_calibration() if p.id not in HELD_OUT]
    if args.only:
        return _fit_one(args.only, points, write=args.write)
    # Coordinate descent over the grid, from the middle: each pass minimises one constant
    # with the others fixed, until no constant moves (a handful of passes).
    current = {k: float(v[len(v) // 2]) for k, v in GRID.items()}
    loss = _loss(_constants(current))

    def descend(current: dict[str, float], loss: float) -> tuple[dict[str, float], float]:
        for _ in range(6):
            moved = False
            for name in SEARCHED:
                lv, value = min(
                    (_loss(_constants({**current, name: float(v)})), float(v)) for v in GRID[name]
                )
                if lv < loss:
                    moved = moved or value != current[name]
                    loss, current = lv, {**current, name: value}
            if not moved:
                break
        return current, loss

    current, loss = descend(current, loss)
    # Then jointly over the three that trade off against each other at concurrency 1
    # (bandwidth efficiency, per-step and per-MoE-layer overhead), and descend once more.
    for me, st, mo in itertools.product(
        GRID["memory_efficiency"][::2], GRID["step_overhead_s"][::2], GRID["moe_layer_overhead_s"]
    ):
        trial = {
            **current,
            "memory_efficiency": float(me),
            "step_overhead_s": float(st),
            "moe_layer_overhead_s": float(mo),
        }
        lt = _loss(_constants(trial))
        if lt < loss:
            loss, current = lt, trial
    current, loss = descend(current, loss)
    best = (loss, _constants(current))
    loss, c = best
    ids = [p.id for p in points]
    tpot_ids = [
        p.id
        for p in points
        if (p.tpot_ms or p.output_tokens_per_second) and "tpot" not in p.not_fitted
    ]
    ttft_ids = [p.id for p in points if p.ttft_ms and "ttft" not in p.not_fitted]
    batched = [p.id for p in points if (p.concurrency or 0) > 1 or p.request_rate]
    gpus = load_hardware_catalog()
    by_cc: dict[str, list[str]] = {"8.0": [], "9.0": []}
    for p in points:
        gpu = gpus.gpu(p.gpu)
        cc = gpu.compute_capability if gpu else ""
        if cc in by_cc and (p.id in ttft_ids or p.id in batched or p.input_tokens >= 4096):
            by_cc[cc].append(p.id)
    why = {
        "memory_efficiency": (
            "fraction of datasheet HBM bandwidth a decode step reaches; compare the measured "
            "0.75-0.78 of benchmarks/data/h200-decode-microbench.json (a Llama-3.1-8B decode "
            "step's GEMMs read 3.59-3.76 TB/s of the H200's 4.8 at batch 1-64) and the quoted "
            "'77% of the memory-bandwidth ceiling' of musgrave-llama31-8b-a100-40gb-c1; the "
            "KV cache is read at the same fraction: decode attention over a contiguous KV "
            "cache on the H200 reads 0.64-0.92 of 4.8 TB/s from one sequence at 8K-32K "
            "context up (benchmarks/data/h200-attention-microbench.jsonl), and a separate "
            "KV-read efficiency fitted to 0.48, contradicting that",
            tpot_ids,
        ),
        "compute_efficiency_sm80": (
            "fraction of dense BF16 peak (312 TFLOP/s on A100) a prefill or a step carrying "
            "prompt chunks reaches on compute capability 8.0; constrained by the A100 "
            "points whose steps are compute-bound (long prompts, bursts, TTFT)",
            by_cc["8.0"],
        ),
        "compute_efficiency_sm90": (
            "the same on compute capability 9.0 (989 TFLOP/s on H100/H200): vLLM's runs "
            "reach a smaller fraction of Hopper's datasheet peak than of Ampere's; the H200 "
            "microbenchmark's bare prefill-shaped GEMMs reach 0.67-0.78, before attention, "
            "the mixed decode batch and launch gaps",
            by_cc["9.0"],
        ),
        "compute_efficiency": (
            "GPU generations with no published point of their own (Ada, Blackwell, Volta, "
            "sm86): the lower of compute_efficiency_sm80 and compute_efficiency_sm90, so a "
            "prediction there is not more optimistic than any fitted generation",
            by_cc["8.0"] + by_cc["9.0"],
        ),
        "step_overhead_s": ("fixed time per engine step (scheduler, sampler, launches)", ids),
        "per_sequence_overhead_s": (
            "time per running sequence per step; only the batched points constrain it",
            batched or ids,
        ),
        "allreduce_latency_s": (
            "fixed time of one TP all-reduce; constrained by the TP 2 points",
            [p.id for p in points if p.tensor_parallel_size > 1] or ids,
        ),
        "request_overhead_s": (
            "fixed time added to each request's TTFT (HTTP, tokenisation, first token out)",
            ttft_ids,
        ),
        "moe_layer_overhead_s": (
            "fixed time per MoE layer per step beyond the expert bytes; constrained by the "
            "MoE points",
            [p.id for p in points if "a3b" in p.id.lower() or "moe" in p.id.lower()] or ids,
        ),
        "moe_tp_layer_floor_s": (FLOOR_WHY, [p.id for p in points if _moe_tp(p)] or ids),
    }
    tpot, tput, ttft, _ = _errors(c)
    out_tpot, out_tput, _, _ = _errors(c, held_out=True)
    held = ""
    if HELD_OUT:
        out = np.abs(np.expm1(np.array(out_tpot + out_tput)))
        held = (
            f"; {len(HELD_OUT)} points held out (median |error| of their TPOT and throughput "
            f"{np.median(out):.1%}, max {np.max(out):.1%}: out-of-sample)"
        )
    doc: dict[str, object] = {
        "method": (
            "coordinate descent on a grid (benchmarks/fit_serving_model.py), loss = mean "
            "|log error| of TPOT and throughput, each publisher's mean then their mean "
            "(publisher-balanced since session 19) + 0.5 x the largest + 0.5 x median TTFT "
            f"|log error|; {len(points)} points; medians after the fit: TPOT "
            f"{np.median(np.abs(np.expm1(tpot))):.1%}, throughput "
            f"{np.median(np.abs(np.expm1(tput))):.1%}, TTFT {np.median(np.abs(np.expm1(ttft))):.1%}"
            + held
        ),
        "constants": {
            name: {
                "value": float(getattr(c, name)),
                "fitted_on": why[name][1],
                "explanation": why[name][0],
            }
            for name in CONSTANT_NAMES
        },
    }
    if HELD_OUT:
        doc = {"method": doc["method"], "held_out": sorted(HELD_OUT), **doc}

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    text = yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, width=100)
    print(text)
    if args.write:
        old = _DATA.read_text(encoding="utf-8") if _DATA.exists() else ""
        startup = ""
        if "\nstartup:" in old:
            startup = old[old.index("\nstartup:") :]
        header = (
            "# Written by benchmarks/fit_serving_model.py (serving constants) and\n"
            "# benchmarks/fit_startup_model.py (startup: section); do not edit by hand.\n"
        )
        body = header + text + ("\n" + startup.lstrip("\n") if startup else "")
        _DATA.write_text(body, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
