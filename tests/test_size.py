"""``gpustrata size``: the done-when 70B case really fits, output shapes, bad input."""

from __future__ import annotations

import itertools
import json

import pytest

from gpustrata.cli.app import main

_70B = [
    "size",
    "--model",
    "meta-llama/Llama-3.1-70B-Instruct",
    "--input-tokens",
    "2048",
    "--output-tokens",
    "256",
    "--concurrency",
    "64",
    "--ttft",
    "2",
    "--tpot",
    "0.05",
]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    rc = main([*argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def test_cheapest_slo_meeting_70b_candidate_starts_per_capacity(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, doc = _json(capsys, _70B)
    assert rc == 0
    top = doc["candidates"][0]
    assert top["meets_slo"] and top["cost_per_hour"]["value"] > 0
    assert top["predicted"]["tpot_seconds"]["value"] <= 0.05
    assert top["predicted"]["ttft_seconds"]["value"] <= 2
    costs = [
        c["cost_per_hour"]["value"]
        for c in doc["candidates"]
        if c["meets_slo"] and c["cost_per_hour"]
    ]
    assert top["cost_per_hour"]["value"] == min(costs)
    # `capacity` agrees that vLLM starts with that GPU, TP and max_model_len.
    rc = main(
        [
            "capacity",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--gpu",
            top["gpu"],
            "--tp",
            str(top["tensor_parallel_size"]),
            "--max-model-len",
            str(doc["max_model_len"]["value"]),
            "--format",
            "json",
        ]
    )
    cap = json.loads(capsys.readouterr().out)
    assert rc == 0 and cap["fits"]
    assert cap["kv_cache_tokens"]["value"] == top["kv_cache_tokens"]
    assert "tensor_parallel_size: " + str(top["tensor_parallel_size"]) in doc["snippet"]


def test_one_gpu_is_rejected_with_vllms_reason(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc = _json(capsys, [*_70B, "--gpu", "l4", "--tp", "1"])
    assert rc == 1 and not doc["candidates"]
    assert doc["rejected"] and "memory" in doc["rejected"][0]["reason"]


def test_fixed_configuration_is_evaluated_and_misses_are_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [*_70B, "--instance-type", "p5.48xlarge", "--tp", "8", "--replicas", "1"]
    rc, doc = _json(capsys, [*argv[:-6], "--tpot", "0.001", *argv[-6:]])
    assert rc == 1
    (c,) = doc["candidates"]
    assert c["replicas"] == 1 and c["tensor_parallel_size"] == 8
    assert any(m.startswith("TPOT") for m in c["misses"])


def test_markdown_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_70B, "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### Sizing") and "```yaml" in md
    assert main(_70B) == 0
    text = capsys.readouterr().out
    assert "stack snippet" in text and "TPOT" in text


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--gpu", "h1000"], "--gpu 'h1000'"),
        (["--price", "p5.48xlarge"], "--price"),
        (["--instance-type", "p9.huge"], "--instance-type"),
        # 2,048 in + 256 out do not fit: vLLM rejects every request (plan refuses it too).
        (["--max-model-len", "2000"], "--max-model-len 2000 is below --input-tokens 2048"),
    ],
)
def test_bad_input_names_the_flag(
    capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    argv = (
        [a for a in _70B if a not in ("--concurrency", "64")] if "--concurrency" in extra else _70B
    )
    assert main([*argv, *extra]) == 2
    assert needle in capsys.readouterr().err


def test_capacity_block_price_is_not_ranked_as_an_on_demand_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """p5e.48xlarge has only a capacity-block list price: the on-demand pool the snippet
    declares would not cost that, so the candidate is unpriced and the miss says why."""
    argv = [*_70B, "--instance-type", "p5e.48xlarge", "--max-cost-per-hour", "1000"]
    _, doc = _json(capsys, argv)
    assert doc["candidates"]
    for c in doc["candidates"]:
        assert c["cost_per_hour"] is None
        assert any("only a capacity-block price" in m for m in c["misses"])
    _, priced = _json(capsys, [*argv, "--price", "p5e.48xlarge=60"])
    assert all(c["cost_per_hour"] is not None for c in priced["candidates"])


_8B = ["size", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--input-tokens", "1000"]
_8B += ["--output-tokens", "200", "--concurrency", "10"]


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["--gpu", "a40"], "no catalogued instance type carries a40"),
        (["--gpu", "l40s", "--cloud", "gcp"], "l40s is carried only by instance types the"),
        (["--instance-type", "g6e.xlarge", "--tp", "8"], "largest: 1 on g6e.xlarge"),
        (["--instance-type", "p5.48xlarge", "--cloud", "azure"], "they are on aws"),
        (["--gpu", "l4", "--tp", "1", "--max-model-len", "120000"], "no configuration starts"),
    ],
)
def test_an_empty_answer_says_why(
    capsys: pytest.CaptureFixture[str], extra: list[str], reason: str
) -> None:
    rc, doc = _json(capsys, [*_8B, *extra])
    assert rc == 1 and doc["candidates"] == [] and reason in doc["empty_reason"]
    # With no instance type left, no per-TP line ("at most 0 GPUs") buries the reason.
    assert not any("at most 0" in r["reason"] for r in doc["rejected"]), doc["rejected"]
    assert main([*_8B, *extra]) == 1
    assert f"no candidate: {doc['empty_reason']}" in capsys.readouterr().out


def test_region_keeps_the_types_its_map_lists_priced_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.catalog.instance_regions import instance_regions

    hw, table = load_hardware_catalog(), instance_regions()
    _rc, doc = _json(capsys, [*_8B, "--region", "us-gov-east-1"])
    assert doc["candidates"]
    differs = 0
    for c in doc["candidates"]:
        inst = hw.instance(c["instance_type"])
        assert inst is not None and "us-gov-east-1" in table.offered_in(inst)
        here = table.instance_regions[inst.name]["us-gov-east-1"]
        per_instance = c["cost_per_hour"]["value"] / c["instances"]
        assert per_instance == pytest.approx(here)
        assert "on-demand us-gov-east-1, read 2026-07-20" in json.dumps(c["cost_per_hour"])
        assert inst.price is not None
        differs += here != inst.price.usd_per_hour  # instances.yaml: us-east-1
    assert differs  # GovCloud list prices are not us-east-1's
    # --price still wins over the region's price.
    name = doc["candidates"][0]["instance_type"]
    _rc, over = _json(capsys, [*_8B, "--region", "us-gov-east-1", "--price", f"{name}=0.01"])
    top = next(c for c in over["candidates"] if c["instance_type"] == name)
    assert top["cost_per_hour"]["value"] == pytest.approx(0.01 * top["instances"])


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["--region", "us-gov-east-1", "--gpu", "h100-sxm-80gb"], "regions that do offer it: "),
        (["--region", "westeuropa"], "'westeuropa' is in none of the catalogued price files"),
        (["--region", "us-east-1", "--cloud", "gcp"], "no per-region data for GCP"),
        (["--region", "WestEurope", "--gpu", "b200"], "--region westeurope: its price map"),
    ],
)
def test_region_empty_answers_name_the_filter(
    capsys: pytest.CaptureFixture[str], extra: list[str], reason: str
) -> None:
    rc, doc = _json(capsys, [*_8B, *extra])
    assert rc == 1 and doc["candidates"] == [] and reason in doc["empty_reason"]
    assert extra[1].lower() in doc["empty_reason"]


def test_a_hostile_region_is_clipped_and_an_empty_one_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _rc, doc = _json(capsys, [*_8B, "--region", "x" * 5000])
    assert doc["candidates"] == [] and "x" * 61 not in doc["empty_reason"]
    assert main([*_8B, "--region", " "]) == 2
    assert "--region is empty" in capsys.readouterr().err


def test_region_near_miss_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    _rc, doc = _json(capsys, [*_8B, "--region", "westeuropa"])
    assert "did you mean westeurope" in doc["empty_reason"]
    _rc, gcp = _json(capsys, [*_8B, "--region", "us-east-1", "--cloud", "gcp"])
    assert "drop --region to size the GCP types" in gcp["empty_reason"]


def test_region_prices_agree_with_instances_yaml() -> None:
    """One source, no drift: where instances.yaml cites a Karpenter map's region, the
    per-region file holds the same price."""
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.catalog.instance_regions import instance_regions

    table = instance_regions()
    checked = 0
    for inst in load_hardware_catalog().instances.values():
        p = inst.price
        if p is None or p.kind != "on-demand" or "karpenter-provider" not in p.source:
            continue
        assert table.instance_regions[inst.name][p.region] == p.usd_per_hour, inst.name
        checked += 1
    assert checked > 30
    assert not any(
        i.provider == "gcp"
        for i in load_hardware_catalog().instances.values()
        if i.name in table.instance_regions
    )


def test_cloud_keeps_only_that_providers_types(capsys: pytest.CaptureFixture[str]) -> None:
    _rc, doc = _json(capsys, [*_8B, "--cloud", "azure"])
    assert doc["candidates"]
    assert all(c["instance_type"].startswith("Standard_") for c in doc["candidates"])


def test_the_slo_margin_is_the_simulations_measured_error_and_a_candidate_keeps_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpustrata.vllm.calibration import measured_margin

    m = measured_margin("simulation")
    assert 0 < m.tpot < 1 and "simulator" in m.explanation and "held out" in m.explanation
    # One configuration: always at the head, so always judged by the simulation.
    one = [*_8B, "--instance-type", "p5.48xlarge", "--tp", "1", "--replicas", "1"]
    _rc, free = _json(capsys, [*one, "--margin", "0"])
    (c,) = free["candidates"]
    assert c["judged_by"] == "simulation"
    tpot = c["predicted"]["tpot_seconds"]["value"]
    assert tpot == c["simulated"]["tpot_mean_seconds"]
    assert tpot != c["closed_form"]["tpot_seconds"]["value"]
    # A target between the simulated TPOT and that TPOT plus the margin: met only without it.
    target = f"{tpot * (1 + m.tpot / 2):.9f}"
    _rc, doc = _json(capsys, [*one, "--tpot", target])
    assert doc["slo"]["tpot_margin"] == m.tpot
    (kept,) = doc["candidates"]
    assert not kept["meets_slo"]
    assert any(f"+ {m.tpot:.0%} margin" in miss for miss in kept["misses"])
    _rc, zero = _json(capsys, [*one, "--tpot", target, "--margin", "0"])
    assert zero["candidates"][0]["meets_slo"]


def test_the_head_is_simulated_and_the_rest_keep_the_screen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpustrata.planning.sizing import SIMULATED_TOP

    rc, doc = _json(capsys, _70B)
    assert rc == 0
    cands = doc["candidates"]
    head, rest = cands[:SIMULATED_TOP], cands[SIMULATED_TOP:]
    assert all(c["judged_by"] == "simulation" and c["simulated"] for c in head)
    assert rest and all(c["judged_by"] == "screen" and c["simulated"] is None for c in rest)
    # A screened row's verdict is the closed form's with no margin.
    for c in rest:
        assert c["predicted"]["tpot_seconds"] == c["closed_form"]["tpot_seconds"]
        t = c["predicted"]["tpot_seconds"]["value"]
        if c["meets_slo"]:
            assert t <= 0.05
    # The head's replicas are the fewest the simulation accepts: one fewer misses.
    top = head[0]
    assert top["meets_slo"]
    if top["replicas"] > 1:
        fewer = [
            *_70B,
            "--instance-type",
            top["instance_type"],
            "--tp",
            str(top["tensor_parallel_size"]),
            "--replicas",
            str(top["replicas"] - 1),
        ]
        _rc, less = _json(capsys, fewer)
        assert not less["candidates"][0]["meets_slo"]


def test_fewer_nodes_first_at_equal_cost() -> None:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.planning.sizing import SizingRequest, size
    from gpustrata.vllm.calibration import default_constants
    from gpustrata.vllm.performance import Workload

    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    assert arch is not None
    # p5.48xlarge (8 GPUs) priced as 8 x g-type of one GPU: one node vs eight at one cost.
    hw = load_hardware_catalog()
    req = SizingRequest(
        arch=arch,
        workload=Workload(1000, 200, concurrency=64),
        instance_types=("p5.48xlarge", "p5.4xlarge"),
        tensor_parallel_sizes=(1,),
        replicas=8,
        prices={"p5.48xlarge": 80.0, "p5.4xlarge": 10.0},
    )
    if hw.instance("p5.4xlarge") is None:
        pytest.skip("p5.4xlarge not catalogued")
    result = size(req, hw, default_constants())
    top, second = result.candidates[:2]
    assert top.cost_per_hour and second.cost_per_hour
    assert top.cost_per_hour.value == second.cost_per_hour.value == 80.0
    assert (top.instances, second.instances) == (1, 8)


def test_a_spent_simulation_budget_never_recommends_a_screened_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one simulation allowed, the one candidate simulated is the answer's top (or it
    misses): a screened candidate, whose verdict nothing confirmed, is ranked after it."""
    import gpustrata.planning.sizing as sizing
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.vllm.calibration import default_constants
    from gpustrata.vllm.performance import Workload

    arch = load_model_catalog().get("meta-llama/Llama-3.1-70B-Instruct")
    assert arch is not None
    req = sizing.SizingRequest(
        arch=arch, workload=Workload(2048, 256, concurrency=64), ttft_s=2.0, tpot_s=0.05
    )
    monkeypatch.setattr(sizing, "SIMULATION_BUDGET", 1)
    result = sizing.size(req, load_hardware_catalog(), default_constants())
    simulated = [c for c in result.candidates if not c.screened]
    assert len({(c.gpu.id, c.tensor_parallel_size) for c in simulated}) == 1
    top = result.candidates[0]
    assert not top.screened or not any(c.meets_slo for c in simulated)
    meeting = [c for c in result.candidates if c.meets_slo]
    assert meeting and all(not a.screened or b.screened for a, b in itertools.pairwise(meeting))


def test_a_screen_far_off_is_corrected_to_the_fewest_replicas_the_simulation_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Llama-3.1-405B at concurrency 64 with fixed lengths: the clients stay in waves whose
    prompts prefill together, so the simulated TTFT is several times the closed form's (which
    staggers arrivals). The head's replicas are searched up from the screen's (galloping,
    then bisecting) to the fewest the simulation accepts: one fewer misses."""
    argv = ["size", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--input-tokens", "2048"]
    argv += ["--output-tokens", "256", "--concurrency", "64", "--ttft", "2", "--tpot", "0.05"]
    argv += ["--instance-type", "p6-b200.48xlarge", "--tp", "8"]
    _rc, doc = _json(capsys, argv)
    (top,) = doc["candidates"]
    assert top["judged_by"] == "simulation" and top["meets_slo"]
    ttft = top["predicted"]["ttft_seconds"]["value"]
    assert ttft > 2 * top["closed_form"]["ttft_seconds"]["value"]  # the waves
    _rc, fewer = _json(capsys, [*argv, "--replicas", str(top["replicas"] - 1)])
    assert not fewer["candidates"][0]["meets_slo"]
    _rc, same = _json(capsys, [*argv, "--replicas", str(top["replicas"])])
    assert same["candidates"][0]["meets_slo"]
