"""Issue 31, one workload everywhere: `plan` on each reference stack and `size` given the
same workload, instance type, TP and engine settings print the same predictions (the same
function, :meth:`gpustrata.planning.sizing.ReplicaShare.predict`, on the same inputs)."""

from __future__ import annotations

import json

import pytest
from _stacks import STACKS, stack_path

from gpustrata.cli.app import main
from gpustrata.planning.build import plan_spec
from gpustrata.planning.model_capacity import model_settings
from gpustrata.planning.plan_types import ModelPlan
from gpustrata.reports.capacity import SETTING_FLAGS
from gpustrata.spec.loader import load_stack_file

# The engine settings `size` takes as flags (capacity's, less --block-size and the weights);
# a stack that sets another one fails the test below (size would predict another engine).
_FLAGS = {k: v for k, v in SETTING_FLAGS.items() if k not in {"block_size"} and "." not in k}
_NOT_SERVING = {"weights_source", "load_gbps", "engine_init_s"}


def _size_argv(mp: ModelPlan) -> list[str]:
    assert mp.serving is not None
    w = mp.serving.workload
    argv = ["size", "--model", mp.spec.model, "--instance-type", mp.pool.instance.name]
    argv += ["--input-tokens", str(w.input_tokens), "--output-tokens", str(w.output_tokens)]
    if w.request_rate is not None:
        argv += ["--request-rate", repr(w.request_rate)]
    else:
        argv += ["--burst" if w.burst else "--concurrency", str(w.concurrency)]
    argv += ["--replicas", str(mp.serving.replicas), "--format", "json"]
    for key, value in model_settings(mp.spec).items():
        if value is None or key in _NOT_SERVING or (key == "enforce_eager" and not value):
            continue
        assert key in _FLAGS, f"{mp.name} sets {key}, which `size` has no flag for"
        argv += [_FLAGS[key], str(value)]
    return argv


@pytest.mark.parametrize("env", STACKS)
def test_plan_and_size_print_the_same_predictions(
    env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_stack_file(stack_path(env))
    plan = plan_spec(spec)
    derived = {d.key: d.value for d in plan.derived}
    predicted = [mp for mp in plan.models.values() if mp.serving is not None]
    assert predicted, f"{env}: no model predicted"
    for mp in predicted:
        assert mp.serving is not None
        stated = mp.spec.workload.model_fields_set
        if stated:  # the stack's own workload, not the reference one
            assert mp.serving.workload_why.startswith("workload:")
            assert mp.serving.workload.input_tokens == mp.spec.workload.input_tokens
        main(_size_argv(mp))
        doc = json.loads(capsys.readouterr().out)
        (cand,) = doc["candidates"]
        got = cand["predicted"]
        p = mp.serving.prediction
        key = f"models.{mp.name}.serving"
        # Exactly the same floats, and the same figures as each command prints them.
        assert got["tpot_seconds"]["value"] == p.tpot_seconds.value
        assert got["ttft_seconds"]["value"] == p.ttft_seconds.value
        assert got["running_per_replica"]["value"] == p.running.value
        assert derived[f"{key}.tpotMs"] == round(got["tpot_seconds"]["value"] * 1e3, 1)
        assert derived[f"{key}.ttftSeconds"] == round(got["ttft_seconds"]["value"], 2)
        # The event-level simulation too: the same function, the same replica and share.
        sim, top = mp.serving.simulated, doc["simulated_top"]
        assert sim is not None and top is not None
        assert (top["ttft_p90_seconds"], top["tpot_p50_seconds"]) == (
            sim.ttft_p90_s,
            sim.tpot_p50_s,
        )
        assert derived[f"{key}.simulated"].startswith(f"TTFT p50 {sim.ttft_p50_s:.2f} s")
        replicas = mp.serving.replicas
        assert got["output_tokens_per_second"]["value"] == pytest.approx(
            p.output_tokens_per_second.value * replicas, rel=1e-12
        )


def test_size_snippet_carries_the_workload_plan_reads_back(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """`size --snippet FILE` writes the model entry with its workload section; that entry
    validates as a stack model and states the same workload."""
    import yaml

    from gpustrata.spec.serving import ModelSpec

    out = tmp_path / "entry.yaml"  # type: ignore[operator]
    argv = ["size", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l40s"]
    argv += ["--input-tokens", "1000", "--output-tokens", "200", "--burst", "100"]
    argv += ["--tpot", "0.05", "--snippet", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    model = ModelSpec.model_validate(doc["models"][0])
    assert model.workload.burst == 100 and model.workload.tpot_seconds == 0.05
    assert (model.workload.input_tokens, model.workload.output_tokens) == (1000, 200)


def test_capacity_on_a_stack_model_predicts_the_stack_workload(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`capacity --stack prod --model-name llama-70b` predicts its current row at the
    model's workload: the same TPOT `plan` prints."""
    plan = plan_spec(load_stack_file(stack_path("prod")))
    mp = plan.models["llama-70b"]
    assert mp.serving is not None and mp.spec.workload.model_fields_set
    argv = ["capacity", "--file", str(stack_path("prod")), "--model-name", "llama-70b"]
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (current,) = [r for r in doc["what_if"] if r["current"]]
    assert current["predicted"]["tpot_seconds"] == round(
        mp.serving.prediction.tpot_seconds.value, 4
    )
    assert current["predicted"]["workload"] == mp.serving.workload_why


def test_capacity_and_size_agree_on_a_workload_given_as_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`capacity --input-tokens 2000 --output-tokens 200 --burst 100` and `size` with the
    same flags on the same GPU and settings predict the same TPOT and TTFT."""
    common = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "4096"]
    common += ["--tp", "1", "--input-tokens", "2000", "--output-tokens", "200", "--burst", "100"]
    assert main(["capacity", *common, "--gpu", "l40s", "--format", "json"]) == 0
    cap = json.loads(capsys.readouterr().out)
    (current,) = [r for r in cap["what_if"] if r["current"]]
    main(["size", *common, "--instance-type", "g6e.xlarge", "--replicas", "1", "--format", "json"])
    (cand,) = json.loads(capsys.readouterr().out)["candidates"]
    assert "a burst of 100" in current["predicted"]["workload"]
    tpot = cand["predicted"]["tpot_seconds"]["value"]
    assert current["predicted"]["tpot_seconds"] == round(tpot, 4)
