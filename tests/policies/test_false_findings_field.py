"""Regressions for false findings seen on public manifests (issue 30, item 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import deployment_of

from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths


def _pod(tolerations: list[dict[str, Any]], resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.1.1",
        "args": ["--model", "Qwen/Qwen2.5-7B-Instruct"],
        "resources": {"limits": {resource: 1}},
    }
    return deployment_of({"tolerations": tolerations, "containers": [container]})


def _rules(tmp_path: Path, doc: dict[str, Any]) -> list[str]:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return [f.rule for f in evaluate(load_paths([str(path)])).findings]


@pytest.mark.parametrize(
    ("tolerations", "resource"),
    [
        # the site's own GPU taint (a kubeadm cluster's nodetype=gpu)
        ([{"key": "nodetype", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}], None),
        # a MIG resource key as the taint
        ([{"key": "nvidia.com/mig-1g.10gb", "operator": "Exists"}], "nvidia.com/mig-1g.10gb"),
    ],
)
def test_k004_says_nothing_without_pools_when_the_pod_tolerates_its_own_taint(
    tmp_path: Path, tolerations: list[dict[str, Any]], resource: str | None
) -> None:
    assert "K004" not in _rules(tmp_path, _pod(tolerations, resource or "nvidia.com/gpu"))


def test_k004_still_advises_a_pod_that_tolerates_nothing(tmp_path: Path) -> None:
    assert "K004" in _rules(tmp_path, _pod([]))


def test_v001_leaves_a_lone_serving_runtime_to_its_inference_service() -> None:
    """A ServingRuntime is a template: the InferenceService brings the GPUs (corpus 3,
    rh-aiservices-bu/llm-on-openshift: V001 said 'GPU limit is 0 ... fails at startup')."""
    corpus = Path(__file__).parents[1] / "data" / "field-corpus-3"
    report = evaluate(load_paths([str(corpus / "llm-on-openshift-vllm-servingruntime.yaml")]))
    assert not [f for f in report.findings if f.rule == "V001"]
    assert any("template with no GPU limit" in n.reason for n in report.not_evaluated)
