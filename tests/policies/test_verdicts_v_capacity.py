"""The capacity rules V003, V004 and V012 split as ``judge -> Verdict`` worded by their
meta.yaml ``messages`` (issue 32): their decisions as data on their own rule-folder fixtures.
Each test asserts the decision, the reason and the figures the capacity planner gives for the
fixture; the prose stays pinned by each folder's ``expected.yaml``."""

from __future__ import annotations

from pathlib import Path

from conftest import fixture
from test_rule_verdicts import _verdicts


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
