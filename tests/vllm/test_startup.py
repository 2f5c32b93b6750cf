"""The startup model: load paths, init terms, monotonicity, and the fit on published logs."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from _scripts import load_script

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.catalog.serving import LOAD_PATHS, load_serving_fit, load_startup_logs
from gpustrata.vllm.terms import CapacityError
from gpustrata.vllm.timing import (
    DEFAULT_CAPTURE_SIZES,
    PROCESS_START_S,
    fitted_engine_init,
    load_path_bandwidth,
    load_path_fixed_s,
    planner_load_paths,
    predict_logged_startup,
    startup_estimate,
)
from gpustrata.vllm.weights import WeightsEstimate, weights_estimate

ROOT = Path(__file__).resolve().parents[2]


def _arch(model: str) -> ModelArchitecture:
    a = load_model_catalog().get(model)
    assert a is not None
    return a


def _weights(model: str, tp: int = 1) -> tuple[ModelArchitecture, WeightsEstimate]:
    a = _arch(model)
    return a, weights_estimate(a, tensor_parallel_size=tp)


def _fit_module() -> ModuleType:
    return load_script("benchmarks/fit_startup_model.py", "fit_startup_model")


def test_startup_grows_with_model_size() -> None:
    small = startup_estimate(*_weights("meta-llama/Llama-3.1-8B-Instruct"))
    big = startup_estimate(*_weights("meta-llama/Llama-3.3-70B-Instruct", tp=4))
    assert big.load_s > small.load_s and big.init_s > small.init_s
    assert big.budget_s > small.budget_s
    # Init alone: more decoder layers compile and capture longer.
    assert (
        fitted_engine_init(80, enforce_eager=False)[0]
        > fitted_engine_init(32, enforce_eager=False)[0]
    )


def test_eager_is_faster_than_compile_and_a_warm_compile_cache_faster_than_cold() -> None:
    def init(**kw: object) -> float:
        return fitted_engine_init(32, **{"enforce_eager": False, **kw})[0]  # type: ignore[arg-type]

    assert init(enforce_eager=True) < init(torch_compile=False) < init()
    assert init(compile_cached=True) < init()
    fit = load_serving_fit().startup
    assert init(enforce_eager=True) == fit["init_base_s"].value


def test_graph_capture_scales_with_the_captured_sizes() -> None:
    def init(**kw: object) -> float:
        return fitted_engine_init(32, enforce_eager=False, **kw)[0]  # type: ignore[arg-type]

    per = load_serving_fit().startup["graph_capture_s_per_layer_size"].value
    assert init(capture_sizes=67) - init(capture_sizes=35) == pytest.approx(per * 32 * 32)
    assert init(engine="v0") == init(capture_sizes=DEFAULT_CAPTURE_SIZES["v0"])
    assert init(engine="v1") == init(capture_sizes=67)


def test_a_hub_start_downloads_once_then_every_rank_reads_the_whole_checkpoint() -> None:
    """vLLM's default loader has every rank read every tensor and keep its slice, so the
    read after the download does not shrink with TP; the download happens once."""
    a, tp1 = _weights("meta-llama/Llama-3.3-70B-Instruct")
    _, tp8 = _weights("meta-llama/Llama-3.3-70B-Instruct", tp=8)
    one, eight = startup_estimate(a, tp1), startup_estimate(a, tp8)

    def part(path: str) -> float:
        return tp1.total_bytes / (load_path_bandwidth(path)[0] * 1e9) + load_path_fixed_s(path)

    assert one.load_s == pytest.approx(part("hf-download") + part("disk"))
    assert eight.load_s == pytest.approx(one.load_s)
    assert planner_load_paths("huggingface") == (("hf-download", True), ("disk", True))
    fast = startup_estimate(a, tp8, hf_transfer=True)
    assert fast.load_s < eight.load_s
    assert fast.load_gbps == load_path_bandwidth("hf-download-fast")[0]
    # The fixed part of a download shows in the working when the fit has one.
    if load_path_fixed_s("hf-download"):
        assert f"+ {load_path_fixed_s('hf-download'):g} s (hf-download)" in one.explanation


def test_the_streamer_reads_the_whole_checkpoint_per_rank_unless_distributed() -> None:
    a, tp8 = _weights("meta-llama/Llama-3.3-70B-Instruct", tp=8)
    _, tp1 = _weights("meta-llama/Llama-3.3-70B-Instruct")
    plain = startup_estimate(a, tp8, weights_source="s3")
    assert plain.load_s == pytest.approx(startup_estimate(a, tp1, weights_source="s3").load_s)
    split = startup_estimate(a, tp8, weights_source="s3", streamer_distributed=True)
    fixed = load_path_fixed_s("s3-streamer")
    assert split.load_s - fixed == pytest.approx((plain.load_s - fixed) / 8, rel=0.01)
    assert planner_load_paths("s3", streamer_distributed=True) == (("s3-streamer", False),)


def test_process_start_counts_unless_the_stack_states_init() -> None:
    a, w = _weights("meta-llama/Llama-3.1-8B-Instruct")
    est = startup_estimate(a, w)
    assert est.process_s == PROCESS_START_S
    assert est.total_s == pytest.approx(PROCESS_START_S + est.load_s + est.init_s)
    stated = startup_estimate(a, w, engine_init_s=40)
    assert stated.process_s == 0 and stated.total_s == pytest.approx(stated.load_s + 40)
    with pytest.raises(CapacityError, match="weights source 'nfs'"):
        startup_estimate(a, w, weights_source="nfs")
    with pytest.raises(CapacityError, match="must be positive"):
        startup_estimate(a, w, load_gbps=0)


def test_every_fitted_constant_cites_logs_outside_the_held_out_set() -> None:
    fit = load_serving_fit()
    ids = {log.id for log in load_startup_logs()}
    held = set(fit.startup_held_out)
    assert held and held <= ids
    for name, c in fit.startup.items():
        assert set(c.fitted_on) <= ids - held, name
    paths = {log.load_path for log in load_startup_logs()}
    assert paths <= set(LOAD_PATHS)
    for path in paths:
        assert f"load_gbps_{path.replace('-', '_')}" in fit.startup


def test_the_shipped_fit_is_what_the_fit_script_computes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """serving-fit.yaml's startup section is written by the script, never edited by hand."""
    mod = _fit_module()
    monkeypatch.setattr(sys, "argv", ["fit_startup_model.py"])
    assert mod.main() == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    fit = load_serving_fit()
    assert doc["startup_held_out"] == fit.startup_held_out
    assert {k: v["value"] for k, v in doc["startup"].items()} == {
        k: c.value for k, c in fit.startup.items()
    }
    # The fit's goal: the value that puts the most figures within x1.5, not the mean.
    v = mod.best_value([1.0, 1.2, 10.0])
    assert 1.2 / 1.5 <= v <= 1.0 * 1.5


def test_published_logs_within_a_factor_1_5() -> None:
    """The bench's headline over the 54 published logs: at least 65 % within x1.5 in
    sample (30/45 = 67 %) and overall (36/54 = 67 %), and the fitted model beats the cited
    defaults it replaced (15/54). Before the 23 logs of 2026-12-02 the fit put 24/31 (77 %)
    within; with its constants unchanged those 23, out of sample, landed 10/23 (43 %):
    their default-loader "disk" reads run at 0.03-4.4 GB/s, storage the logs do not state,
    which no one fitted rate per load path covers (their notes say which)."""
    logs = load_startup_logs()
    held = set(load_serving_fit().startup_held_out)
    ok = cited_ok = fitted_ok = fitted_n = 0
    for log in logs:
        fitted, cited, logged, _ = predict_logged_startup(log)
        within = 1 / 1.5 <= fitted / logged <= 1.5
        ok += within
        cited_ok += 1 / 1.5 <= cited / logged <= 1.5
        if log.id not in held:
            fitted_n += 1
            fitted_ok += within
    assert fitted_ok / fitted_n >= 0.65
    assert ok / len(logs) >= 0.65
    assert ok > cited_ok
