"""The V rules and the capacity rules read one engine's flags the same way (vLLM's grammar).

``--max-model-len=8k --max-num-batched-tokens=8k`` is a spelling vLLM accepts
(``human_readable_int``: 8k = 8000): V005 must not call it "not a number" while the
capacity rules read 8000.
"""

from __future__ import annotations

from typing import Any

from _release import REFERENCE_IMAGE
from conftest import deployment_of

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule, load_config
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import capacity, engines
from gpustrata_policies.view.objects import K8sObject


def _deployment(*flags: str) -> dict[str, Any]:
    container = {
        "name": "vllm",
        "image": REFERENCE_IMAGE,
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", *flags],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    return deployment_of(
        {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}, "containers": [container]}
    )


def _ctx() -> RuleContext:
    rule = find_rule("V005")
    assert rule is not None
    return RuleContext(rule.meta, load_config(None), [])


def _outcomes(rule_id: str, manifest: dict[str, Any]) -> list[str]:
    rule = find_rule(rule_id)
    assert rule is not None
    report = evaluate([manifest], rules=[rule])
    return [f.message for f in report.findings] + [n.reason for n in report.not_evaluated]


FLAGS = ("--max-model-len=8k", "--max-num-batched-tokens=8k")


def test_both_readers_read_8k_as_8000() -> None:
    (site,) = list(engines.engine_sites(_ctx(), K8sObject(_deployment(*FLAGS))))
    assert engines.as_int(site.engine, "max_model_len") == 8000
    assert engines.as_int(site.engine, "max_num_batched_tokens") == 8000
    assert capacity._int(site.engine, "max_model_len") == 8000
    assert capacity._int(site.engine, "max_num_batched_tokens") == 8000


def test_v005_and_capacity_rules_agree_on_8k() -> None:
    manifest = _deployment(*FLAGS, "--max-num-seqs=16")
    for rule_id in ("V005", "V004", "V012"):
        for text in _outcomes(rule_id, manifest):
            assert "not a number" not in text and "not an integer" not in text, (rule_id, text)


def test_v005_quotes_the_values_vllm_reads() -> None:
    manifest = _deployment(
        "--max-model-len=8k", "--max-num-batched-tokens=4k", "--no-enable-chunked-prefill"
    )
    (message,) = _outcomes("V005", manifest)
    assert "max_num_batched_tokens 4000 below max_model_len 8000" in message
