"""benchmarks/bench_sizing_accuracy.py: each point's simulated errors beside the closed
form's are bench_serving_loso.py's for the same point and constants, and each model's
medians are over its own errors."""

from __future__ import annotations

import pytest
from _scripts import load_script

from gpustrata.catalog.serving import load_serving_calibration
from gpustrata.vllm.calibration import default_constants, predict_point

POINTS = ("tt-340-qwen3-30b-a3b-a100-128-128", "gpustack-qwen3-8b-h100-sharegpt-c4")


def test_each_point_prints_the_held_out_benchmarks_simulated_error_beside_the_closed_form(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("benchmarks/bench_sizing_accuracy.py", "bench_sizing_accuracy")
    loso = load_script("benchmarks/bench_serving_loso.py", "bench_serving_loso")
    points = [p for p in load_serving_calibration() if p.id in POINTS]
    monkeypatch.setattr(mod, "load_serving_calibration", lambda: points)
    assert mod._serving() == 0
    out = capsys.readouterr().out
    c = default_constants()
    tpot: dict[str, list[float]] = {"closed form": [], "simulated": []}
    for p in points:
        row = next(line for line in out.splitlines() if line.startswith(p.id[:43])).split()
        closed = predict_point(p, c).errors()
        sim = loso.errors(p, loso.simulate(p, c))
        assert sim.keys() == closed.keys() and "ttft" not in sim  # not fitted on these
        # point, then per figure: measured/closed/simulated, closed error, simulated error
        for i, key in enumerate(mod.FIGURES):
            want = [f"{e[key]:+.0%}" if key in e else "n/f" for e in (closed, sim)]
            assert row[2 + 3 * i : 4 + 3 * i] == want, (p.id, key)
        tpot["closed form"].append(abs(closed["tpot"]))
        tpot["simulated"].append(abs(sim["tpot"]))
    for model, values in tpot.items():
        line = f"{model}, fitted: median |error| tpot: {sum(values) / 2:.1%} over 2 figures"
        assert line in out
