"""Issue 30 (session 19): would judging a KServe LLMInferenceService under every catalogued
KServe release (session 18's per-release candidates) decide more of the field corpora?

Measured here on the corpora's three services: stating any catalogued release changes no
rule's verdict, only the text of the object's own record (the preset's command is handed
only to the rules that need no vLLM release, V001 to V004 and V007, since session 20; the preset's
llm-d image maps to no release under any KServe release). So no per-release candidates are built for
KServe; if this test fails, a rule now reads the preset's Pods per release and the idea
should be revisited (docs/field-corpus-3.md, "Session 19")."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustrata.catalog.profile import ClusterProfile
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view import catalogs

DATA = Path(__file__).resolve().parents[1] / "data"
SERVICES = [
    DATA / "field-corpus-1" / "kserve-kserve-llmisvc-qwen2-7b-gpu.yaml",
    DATA / "field-corpus-1" / "kserve-kserve-llmisvc-dp-ep-deepseek-r1.yaml",
    DATA / "field-corpus-3" / "kserve-llmisvc-agentic-single-gpu.yaml",
]


def _verdicts(path: Path, release: str | None) -> tuple[list[str], list[str], list[str]]:
    profile = ClusterProfile.model_validate({"versions": {"kserve": release}}) if release else None
    report = evaluate(load_paths([str(path)]), profile=profile)
    findings = sorted(f"{f.rule}:{f.severity}" for f in report.findings)
    records = [n.reason for n in report.not_evaluated if n.rule == "*"]
    return findings, sorted(n.rule for n in report.not_evaluated), records


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: p.name)
def test_no_kserve_release_changes_a_verdict_on_the_corpus_services(path: Path) -> None:
    unstated, unstated_rules, (unstated_record,) = _verdicts(path, None)
    assert "set versions.kserve in the cluster profile" in unstated_record
    releases = list(catalogs.kserve_releases())
    assert len(releases) >= 5  # 0.16.0 ... 0.20.0 (kserve-presets.yaml)
    for release in releases:
        findings, rules, (record,) = _verdicts(path, release)
        assert (findings, rules) == (unstated, unstated_rules), release
        # 0.17.1 and 0.18.1 share their minor's presets (kserve-presets.yaml)
        assert "read over KServe's presets kserve/kserve@v" in record, release
        # session 20: V001-V004 and V007 judge the preset's engine; release-dependent rules do not
        assert "V001 to V004 and V007 judge that engine" in record
        assert "V005, V006 and V008 to V013 (release-dependent) are not evaluated on it" in record
