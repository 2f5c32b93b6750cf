"""Issue 17 item 5: `plan` predicts each model's serving at its settings and its pool's cost,
the pull-request markdown shows what a change does to them, and `capacity`'s what-if table
carries the predicted columns."""

from __future__ import annotations

import json

import pytest
from _stacks import stack_path

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.planning.build import plan_spec
from gpustrata.planning.sizing import per_replica_workload
from gpustrata.reports.markdown import _cell, model_facts
from gpustrata.spec.loader import load_stack_file
from gpustrata.spec.serving import WorkloadSpec
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.performance import predict_serving


def _prod():  # type: ignore[no-untyped-def]
    return load_stack_file(stack_path("prod"))


def test_plan_predicts_each_model_at_its_settings_and_prices_the_pool() -> None:
    plan = plan_spec(_prod())
    mp = plan.models["llama-70b"]
    assert mp.serving is not None and mp.capacity is not None
    derived = {d.key: d for d in plan.derived}
    tpot = derived["models.llama-70b.serving.tpotMs"]
    # The headline is the simulation's mean (what the SLO verdict uses), the closed form beside.
    assert mp.serving.judged.model == "simulation" and mp.serving.simulated is not None
    assert tpot.value == round(mp.serving.simulated.tpot_mean_s * 1e3, 1)
    assert "simulated over" in tpot.why and "closed form" in tpot.why
    closed = derived["models.llama-70b.serving.closedForm"]
    assert f"TPOT {mp.serving.prediction.tpot_seconds.value * 1e3:.1f} ms" in closed.value
    assert "max(memory" in closed.why  # the roofline's working, not a bare number
    pool = mp.pool
    assert pool.instance.price is not None and pool.cost_per_hour is not None
    assert pool.cost_per_hour.value == pytest.approx(
        pool.spec.max_size * pool.instance.price.usd_per_hour
    )
    assert derived[f"pools.{pool.name}.costPerHour"].source == "catalogue"


def test_a_tp_change_shows_in_the_review_cells() -> None:
    spec = _prod()
    before = plan_spec(spec).models["llama-70b"]
    models = [
        m.model_copy(update={"engine": m.engine.model_copy(update={"tensor_parallel_size": 8})})
        if m.name == "llama-70b"
        else m
        for m in spec.models
    ]
    after = plan_spec(spec.model_copy(update={"models": models})).models["llama-70b"]
    assert before.serving is not None and after.serving is not None
    # More GPUs per replica read fewer weight bytes each: a shorter step at the same batch.
    old, new = before.serving.prediction, after.serving.prediction
    assert new.step.weight_bytes.value < old.step.weight_bytes.value
    cell = _cell(model_facts(after)["vllm"], model_facts(before)["vllm"])
    assert "predicted TPOT **" in cell and "(was " in cell


def test_capacity_what_if_rows_carry_predictions(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["capacity", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l40s"]
    assert main([*argv, "--tp", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = [r for r in doc["what_if"] if r["predicted"]]
    assert rows and all(r["predicted"]["tpot_seconds"] > 0 for r in rows)
    current = next(r for r in rows if r["current"])
    assert main([*argv, "--tp", "1"]) == 0
    text = capsys.readouterr().out
    assert "TPOT" in text and "reference workload" in text
    assert f"{current['predicted']['tpot_seconds'] * 1e3:.1f} ms" in text


def test_reference_workload_stays_within_max_model_len() -> None:
    """A stack that states no workload is predicted at the reference workload: 1,024 in /
    256 out (shrunk to fit max_model_len) at max_num_seqs per replica."""
    plan = plan_spec(_prod())
    unstated = [mp for mp in plan.models.values() if not mp.spec.workload.model_fields_set]
    assert unstated  # prod's llama-8b states no workload
    for mp in unstated:
        assert mp.capacity is not None and mp.serving is not None
        w = mp.serving.prediction.workload
        assert w.input_tokens + w.output_tokens <= mp.capacity.max_model_len
        assert w.concurrency == mp.capacity.max_num_seqs
        assert mp.serving.replicas == mp.max_replicas
        assert mp.serving.workload_why.startswith("reference workload")
    # The plan's figure is predict_serving's at one replica's share, nothing re-derived.
    mp = plan.models["llama-8b"]
    assert mp.serving is not None and mp.capacity is not None
    from gpustrata.catalog.architectures import load_model_catalog

    arch = load_model_catalog().get(mp.spec.model)
    assert arch is not None
    share = per_replica_workload(mp.serving.workload, mp.serving.replicas)
    again = predict_serving(arch, mp.pool.gpu, mp.capacity, share, default_constants())
    assert again.tpot_seconds.value == mp.serving.prediction.tpot_seconds.value


def test_a_stated_workload_longer_than_max_model_len_is_refused() -> None:
    spec = _prod()
    models = [
        m.model_copy(update={"workload": WorkloadSpec(input_tokens=16000, output_tokens=1000)})
        if m.name == "llama-8b"
        else m
        for m in spec.models
    ]
    with pytest.raises(
        StackError,
        match=r"models\[1\]\.workload: input_tokens 16000 .* 17000 "
        "is above max_model_len 16384",
    ):
        plan_spec(spec.model_copy(update={"models": models}))
