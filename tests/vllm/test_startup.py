"""The startup model: load paths, init terms, monotonicity, and the fit on published logs."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from _scripts import load_script

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.catalog.serving import (
    LOAD_PATHS,
    FittedConstant,
    load_serving_fit,
    load_startup_logs,
)
from gpustrata.vllm.terms import CapacityError
from gpustrata.vllm.timing import (
    DEFAULT_CAPTURE_SIZES,
    PROCESS_START_S,
    capture_gc_frozen,
    disk_bandwidth,
    fitted_engine_init,
    load_path_bandwidth,
    load_path_fixed_s,
    logged_startup_prediction,
    planner_load_paths,
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
    # V1: the base and a cached compile are per decoder layer (one compiled piece per layer)
    assert init(enforce_eager=True) == pytest.approx(fit["init_base_s_per_layer"].value * 32)
    cached = init(compile_cached=True) - init(torch_compile=False)
    assert cached == pytest.approx(fit["compile_cached_s_per_layer"].value * 32)
    assert fitted_engine_init(48, enforce_eager=True)[0] > init(enforce_eager=True)


def test_graph_capture_scales_with_the_captured_sizes_at_the_release_s_rate() -> None:
    """Capture is per layer per captured size, at the rate of the release's side of the
    garbage-collector freeze (vllm PR 21146, from 0.10.0): the reference release captures
    at the frozen rate, 0.9 and V0 at the slower one; V0 has its own init base."""

    def init(**kw: object) -> float:
        return fitted_engine_init(32, enforce_eager=False, **kw)[0]  # type: ignore[arg-type]

    fit = load_serving_fit().startup
    frozen = fit["graph_capture_gc_frozen_s_per_layer_size"].value
    slow = fit["graph_capture_s_per_layer_size"].value
    assert frozen < slow
    assert init(capture_sizes=67) - init(capture_sizes=35) == pytest.approx(frozen * 32 * 32)
    old = {"vllm_release": "0.9.2"}
    assert init(capture_sizes=67, **old) - init(capture_sizes=35, **old) == pytest.approx(
        slow * 32 * 32
    )
    assert init(**old) > init() == init(capture_sizes=67)
    v0 = fit["init_base_v0_s"].value + fit["compile_s_per_layer"].value * 32
    assert init(engine="v0") == pytest.approx(v0 + slow * 32 * DEFAULT_CAPTURE_SIZES["v0"])
    assert capture_gc_frozen("0.10.1.1") and capture_gc_frozen(None)
    assert capture_gc_frozen("0.10.0") and not capture_gc_frozen("0.9.2")
    assert not capture_gc_frozen("0.9.x (V1)")
    assert not capture_gc_frozen("0.2x (2026-05)") and not capture_gc_frozen("not stated")
    assert not capture_gc_frozen("0.24.0", engine="v0")


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
    which no one fitted rate per load path covers (their notes say which). The 23 logs of
    2026-12-04 (the upb-cn A100/L40S sweeps, vllm#44881) were scored out of sample first
    (4/23 against the constants before them) and then joined the fit once the v0.10.0 wheel
    showed that release already freezes the garbage collector during capture."""
    held = set(load_serving_fit().startup_held_out)
    logs = load_startup_logs()
    ok = cited_ok = fitted_ok = fitted_n = 0
    for log in logs:
        p = logged_startup_prediction(log)
        fitted, cited, logged = p.point_s, p.cited_s, p.logged_s
        within = 1 / 1.5 <= fitted / logged <= 1.5
        ok += within
        cited_ok += 1 / 1.5 <= cited / logged <= 1.5
        if log.id not in held:
            fitted_n += 1
            fitted_ok += within
    assert fitted_ok / fitted_n >= 0.65
    assert ok / len(logs) >= 0.65
    assert ok > cited_ok


def test_disk_loads_of_a_stated_storage_use_its_own_rate_and_unstated_ones_a_range() -> None:
    """Each stated storage kind is fitted on its own logs (EBS: the Run:ai whitepaper's gp3
    and io2 reads, ~0.34 GB/s); a disk load of unstated storage keeps the pooled rate as
    its point and spans the slowest to the fastest kind."""
    fit = load_serving_fit().startup
    ebs = fit["load_gbps_disk_ebs"]
    assert set(ebs.fitted_on) == {
        log.id for log in load_startup_logs() if log.load_path == "disk" and log.storage == "ebs"
    }
    point, low, high, why = disk_bandwidth("ebs")
    assert point == low == high == ebs.value and "ebs" in why
    point, low, high, why = disk_bandwidth("not stated")
    assert point == fit["load_gbps_disk"].value
    assert low == min(ebs.value, point) and high == fit["load_gbps_disk_local_disk"].value
    assert low < point < high and "range" in why
    log = next(x for x in load_startup_logs() if x.id == "vllm-pr44106-three-shard-load")
    p = logged_startup_prediction(log)
    assert log.storage == "not stated" and p.low_s < p.point_s < p.high_s


def test_held_out_bench_predicts_each_log_with_constants_fitted_without_it() -> None:
    """bench_startup_loso's procedure: a log left out of the fit is named by no constant,
    and its prediction differs from the in-sample one where it moved a constant."""
    mod = _fit_module()
    logs = list(load_startup_logs())
    target = next(x for x in logs if x.id == "qwen3-1700-qwen3-4b-fp8-load")
    raw = mod.fit([x for x in logs if x.id != target.id])
    constants = {k: FittedConstant.model_validate(v) for k, v in raw.items()}
    assert all(target.id not in c.fitted_on for c in constants.values())
    held = logged_startup_prediction(target, constants)
    seen = logged_startup_prediction(
        target, {k: FittedConstant.model_validate(v) for k, v in mod.fit(logs).items()}
    )
    assert held.point_s != seen.point_s  # 4.4 GB/s was the fastest local-disk read
    assert held.logged_s == seen.logged_s == target.load_s


def test_storage_the_stack_states_sets_the_disk_read() -> None:
    """The stack's own gp3 cache volume caps a pvc load at gp3's 125 MiB/s baseline; local
    NVMe reads at the local-disk rate; a pvc of unstated storage keeps the cited point and
    spans the fitted storage kinds."""
    from gpustrata.catalog.inputs import GP3_BASELINE_MIBPS
    from gpustrata.spec.serving import WeightsSpec

    a, w = _weights("meta-llama/Llama-3.1-8B-Instruct")
    kind, cap = WeightsSpec(source="pvc", cache_size_gib=100).storage_facts()
    assert kind == "ebs" and cap == pytest.approx(GP3_BASELINE_MIBPS * (1 << 20) / 1e9)
    gp3 = startup_estimate(a, w, weights_source="pvc", storage=kind, storage_gbps=cap)
    assert gp3.load_gbps == pytest.approx(0.131, abs=1e-3)
    assert "capped at the volume's" in gp3.load_source
    assert gp3.fast_s == gp3.slow_s == gp3.total_s and gp3.optimistic_s is None
    unstated = startup_estimate(a, w, weights_source="pvc")
    assert unstated.load_gbps == 0.3 and unstated.storage == "not stated"
    assert unstated.fast_s < unstated.total_s <= unstated.slow_s
    assert WeightsSpec(source="local-nvme").storage_facts() == ("local-disk", None)
    nvme = startup_estimate(a, w, weights_source="local-nvme")
    assert nvme.load_gbps == load_serving_fit().startup["load_gbps_disk_local_disk"].value
    assert WeightsSpec(source="pvc").storage_facts() == (None, None)
    efs = WeightsSpec(source="pvc", storage="network-volume", volume_throughput_mibps=1000)
    assert efs.storage_facts() == ("network-volume", pytest.approx(1.048576))


def test_page_cache_reads_count_each_ranks_shard_and_loads_stop_at_the_storage() -> None:
    """From the page cache a TP rank copies only its shard (zero-copy get_tensor, then the
    weight_loader's narrow); a load is never predicted faster than its storage's stated
    throughput (the Run:ai whitepaper's gp3 volume at 1,000 MiB/s)."""
    logs = {log.id: log for log in load_startup_logs()}
    tp8 = logs["vllm-18446-qwen3-235b-a22b-8rank-load"]
    assert tp8.load_path == "page-cache" and tp8.tensor_parallel_size == 8
    assert tp8.reader_gib == pytest.approx(tp8.weights_gib / 8)  # type: ignore[operator]
    cold = logs["dennislee22-qwen2-7b-a100-tp2-cold-read"]
    assert cold.load_path == "disk" and cold.reader_gib == cold.weights_gib
    gp3 = logs["runai-bench-vllm055-llama3-8b-gp3-streamer"]
    assert gp3.storage_gbps == pytest.approx(1000 * (1 << 20) / 1e9)
    fit = load_serving_fit().startup
    assert fit["load_gbps_local_streamer"].value > gp3.storage_gbps
    # The streamer reads a stated volume at the fitted share of its throughput, up to its
    # own ceiling: never faster than the volume.
    eff = fit["local_streamer_efficiency"].value
    ceiling = fit["load_gbps_local_streamer_ceiling"].value
    rate = min(eff * gp3.storage_gbps, ceiling)  # type: ignore[operator]
    assert rate <= gp3.storage_gbps  # type: ignore[operator]
    assert f"/ {rate:g} GB/s" in logged_startup_prediction(gp3).how
    fast = logs["instanttensor-qwen3-30b-a3b-h200-runai-streamer"]
    assert f"/ {ceiling:g} GB/s" in logged_startup_prediction(fast).how  # "50GB/s storage"
    uncapped = logged_startup_prediction(gp3.model_copy(update={"storage_gbps": None}))
    assert uncapped.point_s < logged_startup_prediction(gp3).point_s


def test_capacity_reports_the_startup_range_where_the_storage_is_not_stated() -> None:
    """``capacity --format json`` carries the fastest and slowest startup over the fitted
    storage kinds; with a stated storage both are the startup itself."""
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.reports.capacity import capacity_document
    from gpustrata.vllm.capacity import estimate_capacity

    a = _arch("meta-llama/Llama-3.1-8B-Instruct")
    l40s = load_hardware_catalog().gpu("l40s")
    assert l40s is not None
    hub = capacity_document(estimate_capacity(a, l40s))
    fast, slow = hub["startup_fastest_seconds"]["value"], hub["startup_slowest_seconds"]["value"]
    assert fast < hub["startup_seconds"]["value"] < slow
    assert "state weights.storage" in hub["startup_fastest_seconds"]["explanation"]
    nvme = capacity_document(estimate_capacity(a, l40s, weights_source="local-nvme"))
    total = nvme["startup_seconds"]["value"]
    assert (
        nvme["startup_fastest_seconds"]["value"]
        == total
        == nvme["startup_slowest_seconds"]["value"]
    )


def test_storage_bound_loads_join_the_fit_capped_and_an_unfitted_path_borrows_its_nearest() -> None:
    """A load that ran at its storage's stated limit joins its path's fit with that limit as
    its cap (it agrees with any loader rate above it); a path with no fitted log of its own
    (s3-download held out) reads at the nearest fitted path's rate, not a cited default."""
    mod = _fit_module()
    fit = load_serving_fit().startup
    assert "runai-bench-vllm055-llama3-8b-gp3-streamer" in fit["load_gbps_local_streamer"].fitted_on
    assert "capped at their storage" in fit["load_gbps_local_streamer"].explanation
    logs = list(load_startup_logs())
    target = next(x for x in logs if x.id == "marin-7136-s3-download")
    raw = mod.fit([x for x in logs if x.id != target.id])
    assert "load_gbps_s3_download" not in raw
    constants = {k: FittedConstant.model_validate(v) for k, v in raw.items()}
    p = logged_startup_prediction(target, constants)
    assert f"/ {constants['load_gbps_s3_streamer'].value:g} GB/s" in p.how
    assert 1 / 2 < p.point_s / p.logged_s < 2  # the cited 0.3 GB/s default was x9.5


def test_ranks_sharing_a_host_copy_from_the_page_cache_at_their_own_fitted_rate() -> None:
    """Tensor-parallel ranks that load at once from one host's page cache copy each at the
    multi-rank rate (fitted on the TP > 1 page-cache logs only), slower than a single rank;
    a fold with no such log falls back to the single-rank rate."""
    mod = _fit_module()
    fit = load_serving_fit().startup
    multi, single = fit["load_gbps_page_cache_multi_rank"], fit["load_gbps_page_cache"]
    logs = list(load_startup_logs())
    held = set(load_serving_fit().startup_held_out)
    page = [x for x in logs if x.load_path == "page-cache" and x.load_gbps and x.id not in held]
    assert set(multi.fitted_on) == {x.id for x in page if x.tensor_parallel_size > 1}
    assert set(single.fitted_on) == {x.id for x in page if x.tensor_parallel_size == 1}
    assert multi.value < single.value
    tp8 = next(x for x in logs if x.id == "vllm-18446-qwen3-235b-a22b-8rank-load")
    assert f"/ {multi.value:g} GB/s" in logged_startup_prediction(tp8).how
    rest = [x for x in logs if x.load_path != "page-cache" or x.tensor_parallel_size == 1]
    raw = mod.fit(rest)
    assert "load_gbps_page_cache_multi_rank" not in raw
    constants = {k: FittedConstant.model_validate(v) for k, v in raw.items()}
    rate = constants["load_gbps_page_cache"].value
    assert f"/ {rate:g} GB/s" in logged_startup_prediction(tp8, constants).how


def test_a_storage_kind_known_from_one_log_is_its_point_with_a_range_to_the_pooled_rate() -> None:
    """Held out by log, each of the Run:ai whitepaper's two EBS reads leaves the other as
    the kind's only log: its rate is the point (0.34 GB/s, not the pooled unstated-disk
    rate), and the range reaches the pooled rate it would otherwise borrow."""
    mod = _fit_module()
    logs = list(load_startup_logs())
    target = next(x for x in logs if x.id == "runai-bench-vllm055-llama3-8b-gp3-safetensors")
    raw = mod.fit([x for x in logs if x.id != target.id])
    constants = {k: FittedConstant.model_validate(v) for k, v in raw.items()}
    ebs, pooled = constants["load_gbps_disk_ebs"], constants["load_gbps_disk"]
    assert ebs.fitted_on == ["runai-bench-vllm055-llama3-8b-io2-safetensors"]
    point, low, high, why = disk_bandwidth("ebs", constants)
    assert point == ebs.value and (low, high) == (ebs.value, pooled.value) and "1 published" in why
    p = logged_startup_prediction(target, constants)
    assert p.low_s < p.point_s == p.high_s and 1 / 1.5 <= p.point_s / p.logged_s <= 1.5
