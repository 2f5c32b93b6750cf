"""How well the serving model predicts published vLLM runs, and the startup fit.

Prints every point of ``catalog/data/serving-calibration.yaml`` with the measured TPOT, TTFT
and throughput and gpustrata's two predictions of each with the shipped constants: the
closed form (:func:`predict_point`, which screens candidates) and the event-level
simulation's means (what ``size`` and ``plan`` judge the SLOs by since session 22;
``benchmarks/bench_serving_loso.py``'s :func:`simulate` and :func:`errors`, each point
simulated once), the relative error of each, and per model the median and max |error| over
the fitted figures (goal: TPOT and throughput median <= 20 %, none beyond 40 %). Then every
startup log of ``catalog/data/startup-logs.yaml`` with the logged and predicted time
(goal: within a factor 1.5 for >= 80 %).

    python benchmarks/bench_sizing_accuracy.py
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterable

import bench_serving_loso as loso

from gpustrata.catalog.serving import load_serving_calibration, load_serving_fit
from gpustrata.vllm.calibration import default_constants, predict_point

FIGURES = ("tpot", "ttft", "throughput")
MODELS = ("closed form", "simulated")


def _fmt(x: float | None, scale: float = 1.0, nd: int = 1) -> str:
    return "-" if x is None else f"{x * scale:,.{nd}f}"


def _cells(
    key: str,
    measured: float | None,
    closed: float,
    simulated: float | None,
    errors: Iterable[dict[str, float]],
) -> str:
    """One figure's cells: measured/closed form/simulated, then each model's error."""
    values = f"{_fmt(measured)}/{closed:.1f}/{_fmt(simulated)}"
    width = 23 if key == "tpot" else 26
    errs = " ".join(f"{e[key]:+6.0%}" if key in e else "  n/f " for e in errors)
    return f"{values:>{width}} {errs}"


def _serving() -> int:
    c = default_constants()
    print("serving model:", c.source, "\n")
    print(
        f"{'point':44} {'TPOT ms meas/closed/sim':>23} {'closed':>6} {'sim':>6} "
        f"{'TTFT ms meas/closed/sim':>26} {'closed':>6} {'sim':>6} "
        f"{'tok/s meas/closed/sim':>26} {'closed':>6} {'sim':>6}"
    )
    fit = load_serving_fit()
    seen = {i for k in fit.constants.values() for i in k.fitted_on}
    # Out-of-sample: added to the calibration after the fit.
    held = {p.id for p in load_serving_calibration() if p.id not in seen}
    errs: dict[tuple[str, str], dict[str, list[float]]] = {
        (m, s): {k: [] for k in FIGURES} for m in MODELS for s in ("fitted", "out-of-sample")
    }
    misses: dict[str, list[str]] = {m: [] for m in MODELS}
    unsimulated: list[str] = []
    for p in load_serving_calibration():
        pp = predict_point(p, c)
        pred = pp.prediction
        sim = loso.simulate(p, c)
        if sim is None:
            unsimulated.append(p.id)
        closed_form = {
            "tpot": pred.tpot_seconds.value * 1e3,
            "ttft": pred.ttft_seconds.value * 1e3,
            "throughput": pp.throughput,
        }
        simulated = loso.figures(p, sim) if sim is not None else {}
        by_model = {"closed form": pp.errors(), "simulated": loso.errors(p, sim)}
        sample = "out-of-sample" if p.id in held else "fitted"
        for model, e in by_model.items():
            for k, v in e.items():
                errs[model, sample][k].append(abs(v))
                if k != "ttft" and abs(v) > 0.4:
                    misses[model].append(f"{p.id} {k} {v:+.0%}")
        measured = {"tpot": p.tpot_ms, "ttft": p.ttft_ms, "throughput": p.output_tokens_per_second}
        mark = "*" if p.id in held else " "
        row = " ".join(
            _cells(k, measured[k], closed_form[k], simulated.get(k), by_model.values())
            for k in FIGURES
        )
        print(f"{p.id[:43]:43}{mark} {row}")
    print(
        "\n(n/f: not measured, or not fitted: see the point's notes; or not simulated; "
        "* not fitted on: added after the fit)"
    )
    for (model, label), table in errs.items():
        for k, values in table.items():
            if values:
                print(
                    f"{model}, {label}: median |error| {k}: {statistics.median(values):.1%} "
                    f"over {len(values)} figures, max {max(values):.1%}"
                )
    for model, rows in misses.items():
        print(f"{model}, beyond 40 % (TPOT/throughput):", ", ".join(rows) or "none")
    print("not simulated (no request completes):", ", ".join(unsimulated) or "none")
    return 0


def _startup() -> int:
    from gpustrata.catalog.serving import load_startup_logs
    from gpustrata.vllm.timing import logged_startup_prediction

    logs = load_startup_logs()
    fit = load_serving_fit()
    seen = {i for c in fit.startup.values() for i in c.fitted_on}
    held = {log.id for log in logs if log.id not in seen} | set(fit.startup_held_out)
    print(
        f"\nstartup: {len(logs)} published logs (fitted constants; cited = the planner's "
        "defaults before any fit; * held out of the fit)"
    )
    share: dict[str, list[bool]] = {"in-sample": [], "out-of-sample": []}
    share_cited: list[bool] = []
    for log in logs:
        p = logged_startup_prediction(log)
        fitted, cited, logged, why = p.point_s, p.cited_s, p.logged_s, p.how
        ratio, ratio_cited = fitted / logged, cited / logged
        ok = 1 / 1.5 <= ratio <= 1.5
        ok_cited = 1 / 1.5 <= ratio_cited <= 1.5
        share["out-of-sample" if log.id in held else "in-sample"].append(ok)
        share_cited.append(ok_cited)
        mark = "*" if log.id in held else " "
        print(
            f"{log.id[:42]:42}{mark} logged {logged:7.1f} s fitted {fitted:7.1f} s "
            f"x{ratio:5.2f} {'ok  ' if ok else 'MISS'} cited {cited:7.1f} s x{ratio_cited:5.2f} "
            f"{'ok  ' if ok_cited else 'MISS'} {why}"
        )
    n = len(logs)
    every = share["in-sample"] + share["out-of-sample"]
    for label, rows in share.items():
        if rows:
            print(
                f"within a factor 1.5, {label}: {sum(rows)}/{len(rows)} = "
                f"{sum(rows) / len(rows):.0%}"
            )
    print(
        f"within a factor 1.5: fitted {sum(every)}/{n} = {sum(every) / n:.0%}, "
        f"cited defaults {sum(share_cited)}/{n} = {sum(share_cited) / n:.0%} (goal 80 %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(_serving() or _startup())
