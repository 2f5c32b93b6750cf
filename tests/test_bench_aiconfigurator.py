"""benchmarks/bench_aiconfigurator.py: which published runs AIConfigurator can express, the
clear skip when it is not installed (it is no gpustrata dependency), and gpustrata's
simulated column: bench_serving_loso.py's error of the same point with the same constants."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest
from _scripts import load_script

from gpustrata.catalog.serving import load_serving_calibration
from gpustrata.vllm.calibration import default_constants, predict_point


def _bench() -> ModuleType:
    return load_script("benchmarks/bench_aiconfigurator.py", "bench_aiconfigurator")


def test_skips_with_a_message_when_aiconfigurator_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _bench()
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "argv", ["bench_aiconfigurator.py"])
    assert mod.main() == 0
    out = capsys.readouterr().out
    assert "skipped: aiconfigurator is not installed" in out
    assert "pip install aiconfigurator" in out


def test_only_closed_loop_runs_of_bundled_models_on_known_gpus_are_expressed() -> None:
    mod = _bench()
    points = {p.id: p for p in load_serving_calibration()}
    bundled = {"Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-8B"}
    assert mod._why_not(points["tt-340-qwen3-30b-a3b-a100-128-128"], bundled) is None
    assert mod._why_not(points["gpustack-qwen3-8b-h100-sharegpt-c4"], bundled) is None
    burst = mod._why_not(points["gpustack-qwen3-14b-h100-4000-200-burst500"], bundled)
    assert burst is not None and burst.startswith("burst of 500 run")
    rate = mod._why_not(points["kvcached-331-qwen3-06b-h100-rate16"], bundled | {"Qwen/Qwen3-0.6B"})
    assert rate is not None and rate.startswith("request-rate run")
    missing = mod._why_not(points["tt-143-qwen25-72b-2xh100-128-128"], bundled)
    assert missing == "AIConfigurator bundles no config.json for Qwen/Qwen2.5-72B-Instruct"
    a100_40 = mod._why_not(
        points["musgrave-llama31-8b-a100-40gb-c1"], {"meta-llama/Llama-3.1-8B-Instruct"}
    )
    assert a100_40 == "AIConfigurator has no system for a100-sxm-40gb"


def test_the_simulated_column_is_the_held_out_benchmarks_error_of_the_point(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One expressible point, AIConfigurator's answer stood in for: the simulated cells are
    bench_serving_loso.py's figures and errors with the shipped constants, its TTFT (which
    the point leaves out of the fit) included, and the closed form's stay beside them."""
    mod = _bench()
    loso = load_script("benchmarks/bench_serving_loso.py", "bench_serving_loso")
    pid = "gpustack-qwen3-8b-h100-sharegpt-c4"
    p = next(q for q in load_serving_calibration() if q.id == pid)
    assert "ttft" in p.not_fitted
    monkeypatch.setattr(mod.shutil, "which", lambda name: "aiconfigurator")
    monkeypatch.setattr(mod, "_bundled_models", lambda: {p.model})
    monkeypatch.setattr(mod, "_aiconfigurator", lambda q, exe: mod.Figures(5.0, 50.0, 600.0))
    monkeypatch.setattr(sys, "argv", ["bench_aiconfigurator.py", "--points", pid])
    assert mod.main() == 0
    out = capsys.readouterr().out
    sim = loso.simulate(p, default_constants())
    assert sim is not None
    figures, errors = loso.figures(p, sim), loso.errors(p, sim, fitted_only=False)
    assert set(errors) == {"tpot", "ttft", "throughput"}
    # The fit's and the held-out medians' view leaves the TTFT out.
    assert loso.errors(p, sim) == {k: e for k, e in errors.items() if k != "ttft"}
    closed = predict_point(p, default_constants()).errors()
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith(pid)}
    for key, label in mod.FIGURES.items():
        cells = rows[label].split()
        assert cells[-2:] == [f"{figures[key]:,.1f}", f"{errors[key]:+.0%}"], key
        if key in closed:
            assert cells[-3] == f"{closed[key]:+.0%}", key
    assert "(not fitted: ttft)" in out
    summary = [line.split() for line in out.splitlines() if line.startswith("  simulated ")]
    tpot = next(cells for cells in summary if cells[1] == "tpot")
    assert tpot[2:4] == ["median", f"{abs(errors['tpot']):.1%}"] and "(1" in tpot
