"""How well the serving model predicts published vLLM runs, and the startup fit.

Prints every point of ``catalog/data/serving-calibration.yaml`` with the measured and
predicted TPOT, TTFT and throughput, the relative error of each, and the medians over the
fitted figures (goal: TPOT and throughput median <= 20 %, none beyond 40 %). Then every
startup log of ``catalog/data/startup-logs.yaml`` with the logged and predicted time
(goal: within a factor 1.5 for >= 80 %).

    python benchmarks/bench_sizing_accuracy.py
"""

from __future__ import annotations

import statistics
import sys

from gpustrata.catalog.serving import load_serving_calibration, load_serving_fit
from gpustrata.vllm.calibration import default_constants, predict_point


def _fmt(x: float | None, scale: float = 1.0, nd: int = 1) -> str:
    return "-" if x is None else f"{x * scale:,.{nd}f}"


def _serving() -> int:
    c = default_constants()
    print("serving model:", c.source, "\n")
    head = (
        f"{'point':44} {'TPOT ms':>15} {'err':>6} {'TTFT ms':>17} {'err':>6} "
        f"{'tok/s':>17} {'err':>6}"
    )
    print(head)
    fit = load_serving_fit()
    seen = {i for k in fit.constants.values() for i in k.fitted_on}
    # Out-of-sample: held out of the fit, or added to the calibration after it.
    held = {p.id for p in load_serving_calibration() if p.id not in seen} | set(fit.held_out)
    errs: dict[str, list[float]] = {"tpot": [], "throughput": [], "ttft": []}
    held_errs: dict[str, list[float]] = {"tpot": [], "throughput": [], "ttft": []}
    misses: list[str] = []
    for p in load_serving_calibration():
        pp = predict_point(p, c)
        pred = pp.prediction
        e = pp.errors()
        for k, v in e.items():
            (held_errs if p.id in held else errs)[k].append(abs(v))
            if k != "ttft" and abs(v) > 0.4:
                misses.append(f"{p.id} {k} {v:+.0%}")

        def cell(k: str, e: dict[str, float] = e) -> str:
            return f"{e[k]:+6.0%}" if k in e else "  n/f "

        mark = "*" if p.id in held else " "
        print(
            f"{p.id[:43]:43}{mark} {_fmt(p.tpot_ms):>7}/{pred.tpot_seconds.value * 1e3:<7.1f} "
            f"{cell('tpot')} {_fmt(p.ttft_ms):>8}/{pred.ttft_seconds.value * 1e3:<8.1f} "
            f"{cell('ttft')} {_fmt(p.output_tokens_per_second):>8}/{pp.throughput:<8.1f} "
            f"{cell('throughput')}"
        )
    print(
        "\n(n/f: not measured, or not fitted: see the point's notes; "
        "* not fitted on: held out or added after the fit)"
    )
    for label, table in (("fitted", errs), ("out-of-sample", held_errs)):
        for k, v in table.items():
            if v:
                print(
                    f"{label}: median |error| {k}: {statistics.median(v):.1%} over {len(v)} "
                    f"figures, max {max(v):.1%}"
                )
    print("beyond 40 % (TPOT/throughput):", ", ".join(misses) or "none")
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
