"""benchmarks/bench_aiconfigurator.py: which published runs AIConfigurator can express, and
the clear skip when it is not installed (it is no gpustrata dependency)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpustrata.catalog.serving import load_serving_calibration

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    path = ROOT / "benchmarks/bench_aiconfigurator.py"
    spec = importlib.util.spec_from_file_location("bench_aiconfigurator", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_aiconfigurator"] = mod
    spec.loader.exec_module(mod)
    return mod


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
