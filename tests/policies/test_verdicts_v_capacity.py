"""The capacity rules V003, V004 and V012 split as ``judge -> Verdict`` worded by their
meta.yaml ``messages`` (issue 32): their decisions as data on their own rule-folder fixtures.
Each test asserts the decision, the reason and the figures the capacity planner gives for the
fixture; the prose stays pinned by each folder's ``expected.yaml``."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixture
from test_rule_verdicts import _verdicts

from gpustrata_policies.findings import RuleContext


def test_v003_70b_on_one_l4_does_not_fit() -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    [v] = _verdicts("V003", "bad-70b-on-one-l4.yaml", judge)["Deployment/llm/llama-70b"]
    assert (v.decision, v.reason) == ("violation", "weights-too-large")
    assert (v.values["model"], v.values["engine"]) == (
        "meta-llama/Llama-3.1-70B-Instruct",
        "container 'vllm'",
    )
    assert (v.values["tensor_parallel_size"], v.values["pipeline_parallel_size"]) == (1, 1)
    size = {k: v.values[f"{k}_bytes"] for k in ("weights", "requested", "activation")}
    size |= {k: v.values[f"{k}_bytes"] for k in ("cuda_graphs", "runtime_overhead")}
    assert all(isinstance(n, int) for n in size.values())
    sizes = {k: int(str(n)) for k, n in size.items()}
    weights = sizes.pop("weights")
    room = sizes.pop("requested") - sum(sizes.values())  # less activations, graphs, overhead
    assert weights > room  # the decision's figures: the weights exceed what is left
    assert round(weights / 2**30, 2) == 131.41
    assert v.values["utilization"] == 0.92
    # The alternatives are decided in the judge, with the planner: TP 8 holds the weights.
    assert str(v.values["fixes"]).startswith("use tensor_parallel_size 8 on NVIDIA L4")
    assert v.path == ("spec", "template", "spec", "containers", 0, "command")
    assert _verdicts("V003", "good-70b-tp4-on-h100.yaml", judge) == {}


def test_v004_full_context_on_l4_does_not_fit_the_kv_cache() -> None:
    from gpustrata_policies.rules.v004_context_fits_kv_cache.rule import judge

    [v] = _verdicts("V004", "bad-full-context-on-nodepool-l4.yaml", judge)[
        "Deployment/llm/llama-8b"
    ]
    assert (v.decision, v.reason) == ("violation", "context-too-long")
    assert v.values["max_model_len"] == 131072
    assert (v.values["kv_tokens"], v.values["blocks"], v.values["block_bytes"]) == (
        19520,
        8192,
        2097152,
    )
    assert v.values["needed_bytes"] == 8192 * 2097152  # one full sequence, 16 GiB
    assert v.values["largest_max_model_len"] == 19504
    assert v.values["utilization_to_start"] is None  # no utilization <= 1 holds it
    assert _verdicts("V004", "good-8k-context-on-nodepool-l4.yaml", judge) == {}


def test_v004_unknown_model_is_not_estimated_with_the_views_sentence(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v004_context_fits_kv_cache.rule import judge

    text = fixture("V004", "bad-full-context-on-nodepool-l4.yaml").read_text()
    assert "meta-llama/Llama-3.1-8B-Instruct" in text
    unknown = tmp_path / "unknown-model.yaml"
    unknown.write_text(text.replace("meta-llama/Llama-3.1-8B-Instruct", "acme/unknown-llm"))
    [v] = _verdicts("V004", unknown, judge)["Deployment/llm/llama-8b"]
    assert (v.decision, v.reason) == ("not_evaluated", "not-estimated")
    assert "acme/unknown-llm" in str(v.values["why"])


def test_v012_1024_seqs_on_l4_are_never_reached() -> None:
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    [v] = _verdicts("V012", "bad-1024-seqs-on-l4.yaml", judge)["Deployment/llm/llama-8b"]
    assert (v.decision, v.reason) == ("violation", "seqs-beyond-kv")
    assert v.thresholds == {"typical_sequence_tokens": 2048}
    assert (v.values["max_num_seqs"], v.values["length"]) == (1024, 2048)
    assert (v.values["held"], v.values["blocks"], v.values["best"]) == (6, 128, 10)
    assert (v.values["kv_tokens"], v.values["kv_blocks"], v.values["block_size"]) == (
        13520,
        845,
        16,
    )
    assert v.values["full_length_held"] == 1 and v.values["max_model_len"] == 8192
    assert _verdicts("V012", "good-seqs-within-kv.yaml", judge) == {}


def test_v012_unusable_typical_length_is_not_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config loader refuses such a value; a host passing it unchecked gets the record."""
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    monkeypatch.setattr(RuleContext, "threshold", lambda self, key: "long")
    [v] = _verdicts("V012", "bad-1024-seqs-on-l4.yaml", judge)["Deployment/llm/llama-8b"]
    assert (v.decision, v.reason) == ("not_evaluated", "typical-invalid")
    assert v.values["why"] == "typical_sequence_tokens 'long' is not a positive integer"
