"""The kinds each rule reports on (``rules/_kinds.py``) cover everything its check says.

The evaluator calls a rule only for objects of its listed kinds (issue 35). A listed set
that missed a kind would silently drop that kind's findings; here every rule runs
unfiltered over every fixture and field-corpus object, and must say nothing (no finding,
no "not evaluated", no crash) about an object of a kind it does not list. The same
inputs check :data:`POD_KINDS`: an object of any other kind has no pod spec.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from conftest import FIELD_CORPUS, FIELD_CORPUS_2, REPO, fixture_files

from gpustrata_policies.evaluate import all_rules, evaluate
from gpustrata_policies.findings import Outcome, Rule, RuleContext
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.rules._kinds import SUBJECT_KINDS
from gpustrata_policies.view.kinds import POD_KINDS
from gpustrata_policies.view.objects import K8sObject

_EVALUATE = importlib.import_module("gpustrata_policies.evaluate")
DATA = REPO / "tests" / "data"


def _inputs() -> list[list[Path]]:
    """Each fixture alone (as ``gpustrata check FILE``), each corpus as one folder, and
    every fixture together (the rules that relate objects see many candidates)."""
    fixtures = fixture_files()
    folders = [FIELD_CORPUS, FIELD_CORPUS_2, DATA / "launchers", DATA / "review-edges"]
    return [[p] for p in fixtures] + [[f] for f in folders if f.is_dir()] + [fixtures]


def _recording(rule: Rule, said: dict[str, set[str]]) -> Rule:
    """*rule*, noting the kind of every object it reports on or raises on."""

    def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
        try:
            out = list(rule.check(ctx, obj))
        except Exception:
            said[rule.meta.id].add(obj.kind)
            raise
        if out:
            said[rule.meta.id].add(obj.kind)
        return iter(out)

    return Rule(rule.meta, check)


def _said(inputs: Iterable[list[Path]], monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Rule id -> the kinds it said something about, every rule called for every kind."""
    monkeypatch.setattr(_EVALUATE, "subject_kinds", lambda rule_id: None)
    said: dict[str, set[str]] = defaultdict(set)
    rules = [_recording(r, said) for r in all_rules()]
    for paths in inputs:
        objects = load_paths([str(p) for p in paths])
        for environment in ("prod", "dev"):
            evaluate(objects, rules=rules, environment=environment)
    return said


def test_listed_kinds_cover_what_each_rule_says(monkeypatch: pytest.MonkeyPatch) -> None:
    said = _said(_inputs(), monkeypatch)
    assert said, "no rule said anything: the inputs were not read"
    missed = {
        rule: sorted(kinds - SUBJECT_KINDS[rule])
        for rule, kinds in said.items()
        if rule in SUBJECT_KINDS and kinds - SUBJECT_KINDS[rule]
    }
    assert not missed, f"rules report on kinds rules/_kinds.py does not list: {missed}"


def test_every_listed_rule_exists() -> None:
    ids = {r.meta.id for r in all_rules()}
    assert set(SUBJECT_KINDS) <= ids, sorted(set(SUBJECT_KINDS) - ids)


def test_a_filtered_rule_skips_other_kinds() -> None:
    """The evaluator calls a listed rule only for its kinds (and an unknown kind)."""
    seen: list[str] = []
    k009 = next(r for r in all_rules() if r.meta.id == "K009")

    def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
        seen.append(obj.kind)
        return iter(())

    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "b"},
        },
    ]
    evaluate(objects, rules=[Rule(k009.meta, check)])
    assert seen == ["VerticalPodAutoscaler"]


def test_objects_of_other_kinds_have_no_pods() -> None:
    with_pods = {
        obj.kind
        for paths in _inputs()[:-1]
        for obj in load_paths([str(p) for p in paths])
        if obj.kind not in POD_KINDS and obj.pods()
    }
    assert not with_pods, f"kinds with pod specs missing from POD_KINDS: {sorted(with_pods)}"
