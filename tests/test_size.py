"""``gpustrata size``: the done-when 70B case really fits, output shapes, bad input."""

from __future__ import annotations

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
