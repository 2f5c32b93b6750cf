"""Issue 31, one workload everywhere: `plan` on each reference stack and `size` given the
same workload, instance type, TP and engine settings print the same predictions: the same
simulation (:meth:`gpustrata.planning.sizing.ReplicaShare.simulate`) judged the same way
(:func:`gpustrata.planning.sizing.judged`), and the same closed form beside it."""

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
        got, closed = cand["predicted"], cand["closed_form"]
        p, j = mp.serving.prediction, mp.serving.judged
        key = f"models.{mp.name}.serving"
        # Both judge by the simulation: the same function, the same replica and share.
        assert cand["judged_by"] == j.model == "simulation"
        sim = mp.serving.simulated
        assert sim is not None and cand["simulated"] is not None
        assert (cand["simulated"]["ttft_p90_seconds"], cand["simulated"]["tpot_p50_seconds"]) == (
            sim.ttft_p90_s,
            sim.tpot_p50_s,
        )
        # Exactly the same floats, and the same figures as each command prints them.
        assert got["tpot_seconds"]["value"] == j.tpot_seconds.value == sim.tpot_mean_s
        assert got["ttft_seconds"]["value"] == j.ttft_seconds.value == sim.ttft_mean_s
        assert got["running_per_replica"]["value"] == p.running.value
        assert derived[f"{key}.tpotMs"] == round(got["tpot_seconds"]["value"] * 1e3, 1)
        assert derived[f"{key}.ttftSeconds"] == round(got["ttft_seconds"]["value"], 2)
        assert derived[f"{key}.simulated"].startswith(f"TTFT p50 {sim.ttft_p50_s:.2f} s")
        # The closed form (size's screen) too.
        assert closed["tpot_seconds"]["value"] == p.tpot_seconds.value
        assert closed["ttft_seconds"]["value"] == p.ttft_seconds.value
        replicas = mp.serving.replicas
        assert got["output_tokens_per_second"]["value"] == pytest.approx(
            j.output_tokens_per_second.value * replicas, rel=1e-12
        )
        # The same SLO verdict where the stack states targets.
        if f"{key}.slo" in derived:
            assert (derived[f"{key}.slo"] == "met") == cand["meets_slo"]


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
    assert current["predicted"]["simulated"]["tpot_seconds"] == round(
        mp.serving.judged.tpot_seconds.value, 4
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
    assert current["predicted"]["tpot_seconds"] == round(
        cand["closed_form"]["tpot_seconds"]["value"], 4
    )
    assert current["predicted"]["simulated"]["tpot_seconds"] == round(
        cand["predicted"]["tpot_seconds"]["value"], 4
    )


def test_a_rayservice_tp_over_worker_pods_is_priced_over_the_network_by_plan_and_size(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """Staging's TP 4 RayService on 1-GPU g6e.4xlarge nodes: the engine spans four worker
    Pods, so NCCL sees four hosts (gpustrata.vllm.transport) and `plan` prices its
    all-reduces over the network; `size --tp-transport network` on the same inputs prints
    the same TPOT, and slower than the same engine within one Pod."""
    import yaml

    text = stack_path("staging").read_text(encoding="utf-8")
    doc = yaml.safe_load(text.replace("g6e.12xlarge", "g6e.4xlarge"))
    pool = doc["config"]["gpustrata:stack"]["node_pools"][0]
    pool["karpenter"].pop("instance_types", None)  # the 4-GPU fallback type
    model = doc["config"]["gpustrata:stack"]["models"][0]
    model.update(cpu="12", memory="100Gi", shm_size="8Gi")  # one Pod per 1-GPU node
    path = tmp_path / "Pulumi.staging.yaml"  # type: ignore[operator]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = plan_spec(load_stack_file(path))
    mp = plan.models["llama-70b-fp8"]
    assert mp.serving is not None and mp.capacity is not None
    assert mp.capacity.tp_transport == "network"
    assert "network transport" in mp.serving.prediction.step.allreduce_s.explanation
    argv = _size_argv(mp)
    main([*argv, "--tp-transport", "network"])
    (cand,) = json.loads(capsys.readouterr().out)["candidates"]
    assert cand["predicted"]["tpot_seconds"]["value"] == mp.serving.judged.tpot_seconds.value
    assert cand["closed_form"]["tpot_seconds"]["value"] == mp.serving.prediction.tpot_seconds.value
    assert cand["instances"] == 4 * mp.serving.replicas  # one node per rank: whole nodes
    main(argv)  # the default: within one Pod (the instance cannot hold it: no candidate)
    assert json.loads(capsys.readouterr().out)["candidates"] == []
    main([*argv[: argv.index("--instance-type")], *argv[argv.index("--instance-type") + 2 :]])
    within = json.loads(capsys.readouterr().out)["candidates"]
    one_pod = [c for c in within if c["gpu"] == "l40s" and c["tensor_parallel_size"] == 4]
    assert one_pod
    assert one_pod[0]["closed_form"]["tpot_seconds"]["value"] < (
        mp.serving.prediction.tpot_seconds.value
    )


def test_size_refuses_an_unknown_tp_transport(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["size", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l40s"]
    argv += ["--input-tokens", "100", "--output-tokens", "100", "--concurrency", "1"]
    assert main([*argv, "--tp-transport", "pcie"]) != 0
    err = capsys.readouterr().err
    assert "--tp-transport 'pcie' is not a transport" in err and "device, host, network" in err
