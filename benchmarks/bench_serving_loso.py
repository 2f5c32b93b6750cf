"""Leave-one-source-out accuracy of the simulated scheduler (gpustrata.vllm.simulate).

For each publisher of ``catalog/data/serving-calibration.yaml`` (GPUStack's performance
lab, tt-inference-server #143 and #340, vLLM #20469, kvcached #331, Musgrave, Dennis Lee's
vLLM-benchmarking), the simulator's constants are fitted on the OTHER publishers' points
and the held-out ones are predicted: TPOT, throughput and TTFT median and max |error| per
held-out source, beside the naive roofline (TPOT = weights per GPU / datasheet HBM
bandwidth) and the closed-form model (gpustrata.vllm.performance, what ``size`` ranks
candidates by) with the same fold's constants. A source is a publisher, not a page:
GPUStack's pages share one harness and one lab, so all of them are held out together
(session 15's 16 points from three more of its pages join that fold).

Every fit starts from benchmarks/data/serving-fit-start.yaml (serving-fit.yaml before the
simulator's own fit replaced it, session 21; fixed, so a refit of the shipped constants does
not move a fold's start). Fitted per fold (coordinate descent, x0.8/x0.9/x1.1/x1.25 around the
start value, one
sweep, loss = mean |log error| of TPOT and throughput + 0.5 x TTFT): memory_efficiency per
GPU generation (sm80: A100, sm90: H100/H200; each starts at the start's single value),
compute_efficiency_sm80, compute_efficiency_sm90, step_overhead_s, request_overhead_s; and
before them moe_tp_layer_floor_s, searched from zero (0-300 us) on the training sources' MoE
points at TP > 1 alone, so no fold sees the held-out source's floor (``--no-floor`` holds it
at 0: the model before session 17); then per_sequence_overhead_s (0-120 us) and
layer_floor_s (0-100 us per layer) together on a grid on the training sources (session 20;
``--shipped-per-sequence``: the start's per-sequence cost and no layer floor). Kept at the
start's values (session 15's closed-form fit on 21 points of 4 publishers: a leak this script
reports, not hides): allreduce_latency_s, moe_layer_overhead_s, and the memory and compute
efficiencies of generations no fold fits (Blackwell, Ada, Volta).

Each point is sized at the vLLM release it states, as ``gpustrata size --vllm-version X``
sizes it (its memory terms and default gpu_memory_utilization; an unread release between two
read ones as the one leaving less KV memory; a run that states none, or a release outside the
read ones, at the reference release's terms): the release column of ``--points`` says which.

Fit variants (session 18, issue 31): the loss takes each publisher's mean loss and then their
mean, so one publisher's many points do not set a constant (session 18's ``--balanced``, the
default since session 19, as in the shipped fit; ``--unbalanced`` weighs every point the
same); ``--shared-memory`` fits one memory efficiency for every generation; ``--prior W``
pulls each generation's memory efficiency towards the H200 microbenchmark's 0.765. A point
whose source leaves the GPU open (``gpu_variants``) is scored as its ``gpu``; ``--points``
prints it as the others too.

``--write-margin`` writes the held-out median |error| per figure (TPOT, TTFT, throughput),
with the command, day, publishers and points, to ``catalog/data/serving-margin.yaml``: the
SLO margin ``size`` and ``plan`` keep (``gpustrata.vllm.calibration.measured_margin``).
:func:`fit_all` is the same fit on every point: what ``benchmarks/fit_serving_model.py
--write`` ships (session 20).

Then the five worst held-out figures (point, figure, error to 0.1 %), and the points a
session added under the inclusion rule (``session`` in the calibration file) predicted with
the start's constants, which were fitted before those points existed (out of sample).

    python benchmarks/bench_serving_loso.py [--points] [--jobs N] [--no-floor] [--source NAME]
        [--unbalanced] [--shared-memory] [--prior W] [--shipped-per-sequence] [--write-margin]
    python benchmarks/bench_serving_loso.py --floor-check
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from gpustrata.catalog.serving import CalibrationPoint, load_serving_calibration
from gpustrata.vllm.calibration import (
    point_publisher,
    point_release,
    point_workload,
    predict_point,
    sized_point,
)
from gpustrata.vllm.performance import ServingConstants, decode_step
from gpustrata.vllm.simulate import SimulatedServing, simulate_serving

FITTED = (
    "memory_efficiency_sm80",
    "memory_efficiency_sm90",
    "compute_efficiency_sm80",
    "compute_efficiency_sm90",
    "step_overhead_s",
    "request_overhead_s",
)
STEPS = (0.8, 0.9, 1.1, 1.25)
FLOOR_GRID = tuple(round(i * 1e-5, 6) for i in range(31))
"""moe_tp_layer_floor_s searched per fold from zero (0-300 us per layer): a value fitted on
every source would leak the held-out one into its own prediction."""
PER_SEQUENCE_GRID = (0.0, 1e-5, 2e-5, 3e-5, 4e-5, 6e-5, 8e-5, 1.2e-4)
"""per_sequence_overhead_s searched per fold on the training sources, jointly with
layer_floor_s (session 20; session 19 searched it alone): kept from serving-fit.yaml (fitted
on every source, against the closed-form model, at small batches) it priced dennislee's
burst of 500 at 248 running sequences 30 ms a step of a measured 44.5."""
LAYER_FLOOR_GRID = tuple(round(i * 1e-5, 6) for i in range(11))
"""layer_floor_s searched per fold (0-100 us per layer, session 20) with
per_sequence_overhead_s: the least time a decoder layer takes, which a sub-1B model reaches
(kvcached's Qwen3-0.6B); alone, per_sequence_overhead_s takes that small model's missing
per-step time as 120 us per sequence and overprices every large batch."""
PER_SEQUENCE = True
"""Whether per_sequence_overhead_s and layer_floor_s are fitted per fold (the default since
session 20; ``--shipped-per-sequence``: the start's per-sequence cost and no layer
floor, the model before session 20)."""
FLOOR = True
"""Whether the per-layer MoE TP floor is fitted (``--no-floor``: held at 0, the model before
session 17)."""


_BY_ID = {p.id: p for p in load_serving_calibration()}

BALANCED = True
"""Whether the fit's loss weighs each publisher equally (the default since session 19, as
the shipped fit does; ``--unbalanced``: every point the same)."""
SHARED_MEMORY = False
"""Whether one memory efficiency serves every GPU generation (``--shared-memory``)."""


def simulate(
    p: CalibrationPoint, c: ServingConstants, gpu: str | None = None
) -> SimulatedServing | None:
    arch, gpu_model, est = sized_point(p, gpu)
    s = simulate_serving(arch, gpu_model, est, point_workload(p), c)
    return s if s.requests else None


def figures(p: CalibrationPoint, s: SimulatedServing) -> dict[str, float]:
    """The simulated means as ``p`` measures them: TPOT and TTFT in ms, output tokens/s
    (a ``decode`` throughput: running sequences / TPOT)."""
    tok = (
        s.mean_running / s.tpot_mean_s
        if p.throughput_kind == "decode" and s.tpot_mean_s
        else s.output_tokens_per_second
    )
    return {"tpot": s.tpot_mean_s * 1e3, "throughput": tok, "ttft": s.ttft_mean_s * 1e3}


def errors(
    p: CalibrationPoint, s: SimulatedServing | None, *, fitted_only: bool = True
) -> dict[str, float]:
    """predicted / measured - 1 of each measured figure (empty: not simulated); with
    ``fitted_only`` (the fit's and the medians' view) not those the point's ``not_fitted``
    leaves out."""
    if s is None:
        return {}
    predicted = figures(p, s)
    measured = {"tpot": p.tpot_ms, "throughput": p.output_tokens_per_second, "ttft": p.ttft_ms}
    return {
        key: predicted[key] / value - 1
        for key, value in measured.items()
        if value and not (fitted_only and key in p.not_fitted)
    }


@functools.cache
def _floor_can_bind(pid: str) -> bool:
    """Whether a layer floor up to LAYER_FLOOR_GRID's top can set a step of ``pid``: its
    lightest step (one sequence, no context, no floor) reads a layer in less time (with a
    margin). Points
    where it cannot share one simulation over the floor grid (the fit's memo below)."""
    p = _BY_ID[pid]
    arch, gpu, est = sized_point(p)
    c = dataclasses.replace(_start(), layer_floor_s=0.0, moe_tp_layer_floor_s=0.0)
    step = decode_step(arch, gpu, est, batch=1, context=0.0, constants=c)
    layers = max(est.kv.layers_per_stage or (arch.num_hidden_layers,))
    per_layer = max(step.memory_s.value, step.compute_s.value) / est.pipeline_parallel_size / layers
    # A fold moves the memory efficiencies up to max(STEPS) = x1.25 from the
    # start value this step is priced at, which shortens the step as much.
    return per_layer < max(STEPS) * max(LAYER_FLOOR_GRID)


def _point_loss_at(pid: str, c: ServingConstants) -> tuple[float, int]:
    """:func:`_point_loss` with ``layer_floor_s`` at 0 where it cannot bind (same result,
    one memo entry)."""
    if c.layer_floor_s and (
        not _floor_can_bind(pid)
        or (_moe_tp(_BY_ID[pid]) and c.moe_tp_layer_floor_s >= (c.layer_floor_s or 0.0))
    ):
        c = dataclasses.replace(c, layer_floor_s=0.0)
    return _point_loss(pid, c)


@functools.lru_cache(maxsize=200_000)
def _point_loss(pid: str, c: ServingConstants) -> tuple[float, int]:
    """Summed weighted |log error| of one point and how many figures it has (memoised: the
    folds try the same constants on the same points; the simulator is deterministic)."""
    p = _BY_ID[pid]
    e = errors(p, simulate(p, c))
    if not e:
        return 2.0, 1  # not simulated: a large, finite penalty
    total = 0.0
    for key, err in e.items():
        weight = 0.5 if key == "ttft" else 1.0
        total += weight * abs(math.log1p(max(err, -0.99)))
    return total, len(e)


def loss(points: list[CalibrationPoint], c: ServingConstants) -> float:
    """Mean weighted |log error| over ``points`` (``BALANCED``: each publisher's mean first,
    then their mean, so a publisher with many points weighs as much as one with few)."""
    groups: dict[str, list[tuple[float, int]]] = {}
    for p in points:
        group = point_publisher(p) if BALANCED else ""
        groups.setdefault(group, []).append(_point_loss_at(p.id, c))
    means = [sum(t for t, _ in g) / max(1, sum(n for _, n in g)) for g in groups.values()]
    return sum(means) / max(1, len(means))


MEMORY_PRIOR = 0.765
"""Prior of the per-generation memory efficiency (``--prior W``): the middle of the
0.75-0.78 of datasheet HBM bandwidth a Llama-3.1-8B decode step's GEMMs read on the H200
(benchmarks/data/h200-decode-microbench.json)."""
PRIOR_WEIGHT = 0.0
"""Weight of the squared log distance of each per-generation memory efficiency from
MEMORY_PRIOR added to the fit's loss (0: no prior)."""


def _prior_penalty(c: ServingConstants) -> float:
    if not PRIOR_WEIGHT:
        return 0.0
    effs = [c.memory_efficiency_sm80, c.memory_efficiency_sm90]
    return PRIOR_WEIGHT * sum(math.log(e / MEMORY_PRIOR) ** 2 for e in effs if e is not None)


def _fitted() -> tuple[str, ...]:
    """The constants the coordinate descent moves (``SHARED_MEMORY``: one memory efficiency
    for every generation instead of one per generation)."""
    if SHARED_MEMORY:
        return ("memory_efficiency", *FITTED[2:])
    return FITTED


def _moe_tp(p: CalibrationPoint) -> bool:
    """Whether the MoE TP layer floor can bind on ``p``."""
    arch = sized_point(p)[0]
    return arch.is_moe and p.tensor_parallel_size > 1


def fit(points: list[CalibrationPoint], start: ServingConstants) -> ServingConstants:
    """The floor first (its grid, on the points it can move), then the others."""
    floor = 0.0
    moved = [p for p in points if _moe_tp(p)]
    if FLOOR and moved:
        floor = min(
            FLOOR_GRID,
            key=lambda v: (loss(moved, dataclasses.replace(start, moe_tp_layer_floor_s=v)), v),
        )
    start = dataclasses.replace(start, moe_tp_layer_floor_s=floor)
    if PER_SEQUENCE:
        per_seq, layer_floor = min(
            ((s, f) for s in PER_SEQUENCE_GRID for f in LAYER_FLOOR_GRID),
            key=lambda v: (
                loss(
                    points,
                    dataclasses.replace(start, per_sequence_overhead_s=v[0], layer_floor_s=v[1]),
                ),
                v,
            ),
        )
        start = dataclasses.replace(
            start, per_sequence_overhead_s=per_seq, layer_floor_s=layer_floor
        )

    def objective(c: ServingConstants) -> float:
        return loss(points, c) + _prior_penalty(c)

    best, best_loss = start, objective(start)
    for _ in range(1):
        for name in _fitted():
            base = getattr(best, name)
            for f in STEPS:
                trial = dataclasses.replace(best, **{name: base * f})
                trial_loss = objective(trial)
                if trial_loss < best_loss:
                    best, best_loss = trial, trial_loss
    return best


def naive_tpot_error(p: CalibrationPoint) -> float | None:
    if not p.tpot_ms:
        return None
    _, gpu, est = sized_point(p)
    t = est.weights.bytes_per_gpu / (gpu.memory_bandwidth_gbs * 1e9)
    return t * 1e3 / p.tpot_ms - 1


def _fmt(values: list[float]) -> str:
    if not values:
        return "   -  /   -  "
    a = [abs(v) for v in values]
    return f"{statistics.median(a):5.0%} / {max(a):5.0%}"


START = Path(__file__).resolve().parent / "data/serving-fit-start.yaml"
"""Where every fit of this script starts (each fold's and :func:`fit_all`'s): serving-fit.yaml
as it stood before the simulator's fit replaced it, kept fixed so that refitting the shipped
constants does not move a fold's start towards the publisher it holds out."""


@functools.cache
def _start_file() -> ServingConstants:
    doc = yaml.safe_load(START.read_text(encoding="utf-8"))
    return ServingConstants(**doc["constants"], source=f"{START.name}: {doc['source']}")


def _start() -> ServingConstants:
    """The fit's start (``START``), each per-generation memory efficiency at the shared
    value (``SHARED_MEMORY``: unset), the MoE TP floor at 0 with ``--no-floor``."""
    d = _start_file()
    per_generation = None if SHARED_MEMORY else d.memory_efficiency
    return dataclasses.replace(
        d,
        memory_efficiency_sm80=per_generation,
        memory_efficiency_sm90=per_generation,
        moe_tp_layer_floor_s=d.moe_tp_layer_floor_s if FLOOR else 0.0,
    )


def _fold(src: str) -> tuple[str, ServingConstants, dict[str, dict[str, float]]]:
    """Fit without ``src``'s points, predict them: (source, constants, errors by point id)."""
    points = load_serving_calibration()
    train = [p for p in points if point_publisher(p) != src]
    c = fit(train, _start())
    return src, c, {p.id: errors(p, simulate(p, c)) for p in points if point_publisher(p) == src}


def fit_all() -> ServingConstants:
    """The fold with nothing held out: :func:`fit` on every point from ``START``,
    the procedure ``benchmarks/fit_serving_model.py --write`` ships (session 20)."""
    return fit(list(load_serving_calibration()), _start())


MARGIN = (
    Path(__file__).resolve().parents[1] / "components/gpustrata/catalog/data/serving-margin.yaml"
)


def _medians(held: dict[str, dict[str, float]]) -> dict[str, dict[str, float | int]]:
    out: dict[str, dict[str, float | int]] = {}
    for key in ("tpot", "ttft", "throughput"):
        values = [abs(e[key]) for e in held.values() if key in e]
        if values:
            out[key] = {"median": round(statistics.median(values), 4), "points": len(values)}
    return out


def write_margin(
    held: dict[str, dict[str, float]],
    closed: dict[str, dict[str, float]],
    publishers: list[str],
    command: str,
) -> str:
    """Write ``catalog/data/serving-margin.yaml``: the median |error| per figure over the
    held-out points, of the simulator (``errors``) and of the closed form ``size`` ranks
    by (``closed_form``), each fold's constants in both (the SLO margin ``size`` and
    ``plan`` read through ``gpustrata.vllm.calibration.measured_margin``); returns the text
    written."""
    doc = {
        "command": command,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "method": (
            "each publisher's points predicted with constants fitted on the other publishers' "
            "points (bench_serving_loso.py's fit, from benchmarks/data/serving-fit-start.yaml); "
            "median |predicted / measured - 1| per figure over every held-out point: errors by "
            "the simulator (gpustrata.vllm.simulate), closed_form by "
            "gpustrata.vllm.performance.predict_serving"
        ),
        "publishers": publishers,
        "points": sorted(held),
        "errors": _medians(held),
        "closed_form": _medians(closed),
    }
    text = (
        "# Written by benchmarks/bench_serving_loso.py --write-margin; do not edit by hand.\n"
        + yaml.safe_dump(doc, sort_keys=False, width=100)
    )
    MARGIN.write_text(text, encoding="utf-8")
    return text


def _sized_at(p: CalibrationPoint) -> str:
    """The release a point is sized at, and by which rule."""
    why = point_release(p)[1]
    if "not read; between" not in why:
        return why
    note = sized_point(p)[2].defaults.get("vllm_release", "")
    if ": " in note:  # a read release around it leaves less KV memory: sized as that one
        return f"{why}: {note.split(': ', 1)[1]}"
    return f"{why}: the reference release's terms, which leave no more KV memory than either"


def _floor_check() -> None:
    """``--floor-check``: held out by source, every constant but the floor at its start
    value; the floor 0 (before) and fitted per fold on the other sources' MoE TP points
    (after). Only the MoE points at TP > 1 can move; a cheap check of the one term."""
    points = load_serving_calibration()
    base = dataclasses.replace(_start(), moe_tp_layer_floor_s=0.0)
    moved = [p for p in points if _moe_tp(p)]
    floors = {}
    for src in sorted({point_publisher(p) for p in moved}):
        train = [p for p in moved if point_publisher(p) != src]
        floors[src] = min(
            FLOOR_GRID,
            key=lambda v: (loss(train, dataclasses.replace(base, moe_tp_layer_floor_s=v)), v),
        )
    print(
        "floor per held-out source: "
        + ", ".join(f"{s} {v * 1e6:.0f} us" for s, v in floors.items())
    )
    before = {p.id: errors(p, simulate(p, base)) for p in points}
    after = dict(before)
    for p in moved:
        c = dataclasses.replace(base, moe_tp_layer_floor_s=floors[point_publisher(p)])
        after[p.id] = errors(p, simulate(p, c))

    def cells(d: dict[str, dict[str, float]], ids: set[str]) -> str:
        out = []
        for k in ("tpot", "throughput", "ttft"):
            a = [abs(e[k]) for i, e in d.items() if i in ids and k in e]
            out.append(f"{statistics.median(a):6.1%} / {max(a):6.1%}" if a else f"{'-':>15}")
        return "  ".join(out)

    print(
        f"{'held-out source':14} {'':6}  {'TPOT med/max':>15}  {'tok/s med/max':>15}  "
        f"{'TTFT med/max':>15}"
    )
    for src in [*sorted({point_publisher(p) for p in points}), "all"]:
        ids = {p.id for p in points if src in ("all", point_publisher(p))}
        for name, d in (("before", before), ("after", after)):
            print(f"{src:14} {name:6}  {cells(d, ids)}")
    for p in moved:
        b = "  ".join(f"{k} {v:+6.1%}" for k, v in before[p.id].items())
        a = "  ".join(f"{k} {v:+6.1%}" for k, v in after[p.id].items())
        print(f"  {p.id:52} before {b:44} after {a}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", action="store_true", help="print every held-out point")
    ap.add_argument("--jobs", type=int, default=1, help="folds fitted in parallel")
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="hold moe_tp_layer_floor_s at 0 (the model before session 17)",
    )
    ap.add_argument(
        "--floor-check",
        action="store_true",
        help="only the per-layer MoE TP floor, held out by source, the rest at the start's values",
    )
    ap.add_argument(
        "--shipped-per-sequence",
        action="store_true",
        help="keep the start's per_sequence_overhead_s (120 us, benchmarks/data/"
        "serving-fit-start.yaml) and no layer floor (before session 20) instead of searching "
        "both per fold",
    )
    ap.add_argument(
        "--unbalanced",
        action="store_true",
        help="weigh every point the same in the fit's loss (before session 19); the default "
        "weighs each publisher equally (its points' mean, then the mean), as the shipped fit",
    )
    ap.add_argument(
        "--shared-memory",
        action="store_true",
        help="fit one memory efficiency for every GPU generation, not one per generation",
    )
    ap.add_argument(
        "--prior",
        type=float,
        default=0.0,
        metavar="W",
        help=f"add W x log(efficiency / {MEMORY_PRIOR})^2 per generation's memory efficiency",
    )
    ap.add_argument(
        "--write-margin",
        action="store_true",
        help="write the held-out median errors to catalog/data/serving-margin.yaml (the SLO "
        "margin of size and plan); refused with --source or a fit variant",
    )
    ap.add_argument(
        "--source",
        action="append",
        default=[],
        help="hold out only this publisher (repeatable; a quick check of one fold)",
    )
    args = ap.parse_args()
    global FLOOR, BALANCED, SHARED_MEMORY, PRIOR_WEIGHT, PER_SEQUENCE
    FLOOR = not args.no_floor
    PER_SEQUENCE = not args.shipped_per_sequence
    BALANCED, SHARED_MEMORY, PRIOR_WEIGHT = not args.unbalanced, args.shared_memory, args.prior
    if args.floor_check:
        _floor_check()
        return
    variant = (
        args.no_floor,
        args.shipped_per_sequence,
        args.unbalanced,
        args.shared_memory,
        args.prior,
        args.source,
    )
    if args.write_margin and any(variant):
        ap.error("--write-margin measures the shipped procedure on every publisher: no variant")
    t0 = time.perf_counter()
    points = load_serving_calibration()
    by_id = {p.id: p for p in points}
    sources = sorted({point_publisher(p) for p in points})
    if args.source:
        unknown = sorted(set(args.source) - set(sources))
        if unknown:
            raise SystemExit(f"--source {', '.join(unknown)}: not a publisher ({sources})")
        sources = [s for s in sources if s in args.source]
        points = [p for p in points if point_publisher(p) in sources]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            folds = list(pool.map(_fold, sources))
    else:
        folds = [_fold(src) for src in sources]
    print(
        f"{'held-out source':14} {'n':>3}  {'TPOT med/max':>13}  {'tok/s med/max':>13}  "
        f"{'TTFT med/max':>13}  {'naive TPOT':>13}  {'closed-form TPOT':>16}  fitted constants"
    )
    every: dict[str, list[float]] = {"tpot": [], "throughput": [], "ttft": [], "naive": []}
    held: dict[str, dict[str, float]] = {}
    closed_held: dict[str, dict[str, float]] = {}
    for src, c, errs in folds:
        test = [by_id[pid] for pid in errs]
        held.update(errs)
        got: dict[str, list[float]] = {"tpot": [], "throughput": [], "ttft": []}
        missing = sum(1 for e in errs.values() if not e)
        for e in errs.values():
            for k, v in e.items():
                got[k].append(v)
        naive = [e for p in test if (e := naive_tpot_error(p)) is not None]
        closed_errs = {p.id: predict_point(p, c).errors() for p in test}
        closed_held.update(closed_errs)
        closed = [e["tpot"] for e in closed_errs.values() if "tpot" in e]
        for k in got:
            every[k] += got[k]
        every["naive"] += naive
        consts = ", ".join(
            f"{n.split('_')[0][:4]}{'/' + n[-4:] if 'sm' in n else ''} {getattr(c, n):.3g}"
            for n in _fitted()
        ) + (f", floor {c.moe_tp_layer_floor_s * 1e6:.0f} us" if FLOOR else "")
        consts += (
            f", per-seq {c.per_sequence_overhead_s * 1e6:.0f} us, layer floor "
            f"{(c.layer_floor_s or 0.0) * 1e6:.0f} us"
            if PER_SEQUENCE
            else ""
        )
        print(
            f"{src:14} {len(test):3}  {_fmt(got['tpot']):>13}  {_fmt(got['throughput']):>13}  "
            f"{_fmt(got['ttft']):>13}  {_fmt(naive):>13}  {_fmt(closed):>16}  "
            f"{consts}" + (f"  ({missing} not simulated: KV too small)" if missing else "")
        )
    print(
        f"{'all held out':14} {len(points):3}  {_fmt(every['tpot']):>13}  "
        f"{_fmt(every['throughput']):>13}  {_fmt(every['ttft']):>13}  {_fmt(every['naive']):>13}"
    )
    print(
        "closed form (gpustrata.vllm.performance, what size ranks by) with each fold's "
        "constants, held out: "
        + ", ".join(
            f"{k} {_fmt([e[k] for e in closed_held.values() if k in e]).strip()}"
            for k in ("tpot", "throughput", "ttft")
        )
    )
    maxima = ", ".join(
        f"{k} {max(abs(v) for v in every[k]):.1%}"
        for k in ("tpot", "throughput", "ttft")
        if every[k]
    )
    print(f"exact held-out maxima: {maxima}")
    ranked = sorted(
        ((abs(v), pid, k, v) for pid, e in held.items() for k, v in e.items()), reverse=True
    )
    print("worst five held-out figures:")
    for _, pid, k, v in ranked[:5]:
        print(f"  {pid:52} {k:10} {v:+.1%}")
    sized_at: dict[str, int] = {}
    for p in points:
        how = _sized_at(p)
        sized_at[how] = sized_at.get(how, 0) + 1
    print("sized at: " + "; ".join(f"{how} ({n})" for how, n in sorted(sized_at.items())))
    if args.points:
        fold_of = {pid: c for _, c, errs in folds for pid in errs}
        for pid, e in sorted(held.items()):
            cells = "  ".join(f"{k} {v:+6.1%}" for k, v in e.items()) or "not simulated"
            print(f"  {pid:52} {cells:44} [{_sized_at(by_id[pid])}]")
            p = by_id[pid]
            for other in (g for g in p.gpu_variants if g != p.gpu):
                alt = errors(p, simulate(p, fold_of[pid], other))
                cells = "  ".join(f"{k} {v:+6.1%}" for k, v in alt.items()) or "not simulated"
                print(f"    as {other:49} {cells:44} [not scored: gpu_choice picks {p.gpu}]")
    new = [p for p in points if p.session is not None]
    for session in sorted({p.session for p in new if p.session is not None}):
        got = {"tpot": [], "throughput": [], "ttft": []}
        added = [p for p in new if p.session == session]
        for p in added:
            for k, v in errors(p, simulate(p, _start())).items():
                got[k].append(v)
        leak = (
            " (moe_tp_layer_floor_s was fitted on session 17's points: in sample for them)"
            if FLOOR and session >= 17
            else ""
        )
        print(
            f"{len(added)} points added in session {session}, the start's constants (fitted before "
            f"them): TPOT {_fmt(got['tpot'])}, tok/s {_fmt(got['throughput'])}, "
            f"TTFT {_fmt(got['ttft'])}{leak}"
        )
    if args.write_margin:
        command = "python " + shlex.join(["benchmarks/bench_serving_loso.py", *sys.argv[1:]])
        print(write_margin(held, closed_held, sources, command))
    print(f"({len(sources)} folds in {time.perf_counter() - t0:.1f} s, one run)")


if __name__ == "__main__":
    main()
