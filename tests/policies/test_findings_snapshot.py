"""Findings on the field corpus and every rule fixture, against a stored snapshot.

The snapshot (``tests/snapshots/findings.json``) was written from ``main`` before the
evaluation was made faster (issue 18): every finding with its file and line, every
"not evaluated" record and warning, for each field corpus checked as one folder, each
fixture checked alone (as ``gpustrata check FILE``), and all fixtures together (so the
rules that relate objects across a whole input see thousands of candidates). A change
in what the rules find, or where, shows up here as a diff.

Regenerate (only when findings change on purpose, and say so in the commit)::

    python tests/policies/test_findings_snapshot.py --update
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from conftest import FIELD_CORPUS, FIELD_CORPUS_2, REPO, fixture_files

from gpustrata_policies import evaluate
from gpustrata_policies.findings import Report
from gpustrata_policies.inputs.manifests import load_paths

SNAPSHOT = REPO / "tests" / "snapshots" / "findings.json"


def _relative(file: str | None) -> str | None:
    if file is None:
        return None
    path = Path(file).resolve()
    # corpus 1 first: its copy lives under REPO, and its label stays as before the copy
    for base, label in ((FIELD_CORPUS.resolve(), "field-corpus/"), (REPO, "")):
        if path.is_relative_to(base):
            return label + str(path.relative_to(base))
    return file


def _report(report: Report) -> dict[str, Any]:
    return {
        "findings": [
            # name, severity and fix are the rule's own (RuleMeta), not what it found
            [f.rule, f.enforcement, f.resource, f.message, _relative(f.file), f.line]
            for f in report.findings
        ],
        "not_evaluated": [[n.rule, n.resource, n.reason] for n in report.not_evaluated],
        "warnings": report.warnings,
    }


def current() -> dict[str, Any]:
    """What the rules report now, in the snapshot's shape."""
    fixtures = fixture_files()
    out: dict[str, Any] = {"field-corpus": _report(evaluate(load_paths([str(FIELD_CORPUS)])))}
    out["field-corpus-2"] = _report(evaluate(load_paths([str(FIELD_CORPUS_2)])))
    for path in fixtures:
        out[_relative(str(path)) or str(path)] = _report(evaluate(load_paths([str(path)])))
    out["all fixtures together"] = _report(evaluate(load_paths([str(p) for p in fixtures])))
    return out


def test_findings_match_the_snapshot() -> None:
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = current()
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert got[key] == expected[key], key


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(__doc__)
    SNAPSHOT.write_text(json.dumps(current(), indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}")


def test_not_evaluated_records_are_not_repeated() -> None:
    """A rule that walks pods x pools x containers gives the same reason for one object
    many times (O002: one unknown driver, once per container); the report keeps it once.
    All fixtures together held 2,130 records before, 1,714 of them repeats."""
    report = evaluate(load_paths([str(p) for p in fixture_files()]))
    records = [(n.rule, n.resource, n.reason) for n in report.not_evaluated]
    assert records and len(records) == len(set(records))
    assert any(rule == "O002" for rule, _, _ in records)


def test_o002_names_every_pool_of_an_unknown_driver_in_one_record(tmp_path: Path) -> None:
    """A pod that may land on several pools whose driver is unknown got one record per
    pool (36,907 of the 42,620 records on the 5,000-object benchmark corpus); now one
    record per object and driver source names every such pool."""
    pools = "".join(
        f"""---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}}
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance}]}}
"""
        for name, instance in (("l40s", "g6e.xlarge"), ("a10g", "g5.xlarge"), ("l4", "g6.xlarge"))
    )
    pod = """---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: llm}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          resources: {limits: {nvidia.com/gpu: 1}}
"""
    path = tmp_path / "pools.yaml"
    node_class = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: gpu}
spec:
  role: KarpenterNodeRole-llm
  amiSelectorTerms: [{alias: al2023@latest}]
"""
    path.write_text(node_class + pools + pod)
    report = evaluate(load_paths([str(path)]))
    unknown = [
        n.reason
        for n in report.not_evaluated
        if n.rule == "O002" and n.reason.startswith("the driver version of ")
    ]
    assert len(unknown) == 1, unknown
    assert unknown[0].startswith("the driver version of pools l40s, a10g and l4 is unknown")
