"""Numbers at the edges of ``size`` and ``capacity`` flags (issue 33 item 11): exit 2 with
one short line, or a result that says why nothing fits; never Infinity in JSON, a
silently ignored flag or a 300-digit figure."""

from __future__ import annotations

import json

import pytest

from gpustrata.cli.app import main

SIZE = [
    "size",
    "--model",
    "Qwen/Qwen2.5-1.5B-Instruct",
    "--input-tokens",
    "100",
    "--output-tokens",
    "10",
    "--concurrency",
    "1",
]
CAPACITY = ["capacity", "--model", "Qwen/Qwen2.5-1.5B-Instruct", "--gpu", "l4"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([*SIZE, "--ttft", "inf"], "--ttft 'inf': use a positive number"),
        ([*SIZE, "--max-cost-per-hour", "nan"], "--max-cost-per-hour 'nan'"),
        ([*SIZE, "--price", "nosuch.type=1"], "'nosuch.type' is not in the instance catalogue"),
        ([*SIZE, "--price", "g6.xlarge=inf"], "--price 'inf'"),
        (
            [*SIZE, "--price", "g6f.xlarge=1"],
            "did you mean g6.xlarge or g6.2xlarge or g6.4xlarge?",
        ),
        ([*SIZE, "--tp", "1000000000"], "--tp '1000000000': expected an integer from 1 to 1,024"),
        ([*SIZE, "--replicas", "9" * 5000], "expected an integer from 1 to 1,000,000"),
        ([*CAPACITY, "--load-gbps", "1e-300"], "use a bandwidth from 0.001 to 1000 GB/s"),
        ([*CAPACITY, "--max-model-len", "9" * 5000], "--max-model-len '99999"),
    ],
)
def test_flags_at_the_edges_are_one_short_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and says in err and len(err) < 300, err


def test_a_tensor_parallel_size_no_instance_holds_is_a_listed_rejection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main([*SIZE, "--tp", "64", "--format", "json"])
    out = capsys.readouterr().out
    assert code == 1
    data = json.loads(out, parse_constant=pytest.fail)  # no Infinity or NaN
    reasons = [r["reason"] for r in data["rejected"]]
    assert any("TP 64 x PP 1 needs 64 GPUs per replica" in r for r in reasons), reasons


def test_a_stack_of_more_models_than_plan_serves_is_refused() -> None:
    """plan takes ~44 ms a model (10,000 did not finish in two minutes): at most 200."""
    from _stacks import stack_doc

    from gpustrata.core.errors import StackError
    from gpustrata.spec.loader import validate_stack
    from gpustrata.spec.stack import MAX_MODELS

    doc = stack_doc("dev")
    model = doc["models"][0]
    doc["models"] = [{**model, "name": f"m{i}"} for i in range(MAX_MODELS + 1)]
    with pytest.raises(StackError, match=r"models: a list is too long; .*at most 200"):
        validate_stack(doc, file="x.yaml")
