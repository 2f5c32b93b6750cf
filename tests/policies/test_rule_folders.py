"""Every rule folder on its own fixtures: the one fixture runner.

``policies/gpustrata_policies/rules/<id>_<name>/`` holds ``rule.py``, at least one
``good-*.yaml`` and one ``bad-*.yaml`` fixture, and ``expected.yaml``: for each fixture, the
exact findings of the rule (resource, enforcement, message, in report order), its "not
evaluated" records, and for a good fixture the other rules that cannot evaluate it. Each
fixture is evaluated alone, as ``gpustrata check FILE`` would (environment prod, default
config). No rule finds anything in a good fixture.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import RULES_DIR, fixture_id

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import all_rules, rule_folder
from gpustrata_policies.findings import Rule
from gpustrata_policies.inputs.manifests import load_paths

SECTIONS = ("findings", "not_evaluated", "others_not_evaluated")


def _folder(rule: Rule) -> Path:
    return Path(str(rule_folder(rule)))


def _fixtures(folder: Path, kind: str) -> list[str]:
    return sorted(p.name for p in folder.glob(f"{kind}-*.yaml"))


@cache
def _expected(folder: Path) -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = yaml.safe_load(
        (folder / "expected.yaml").read_text(encoding="utf-8")
    )
    return data


CASES = [
    pytest.param(rule, _folder(rule) / name, id=fixture_id(_folder(rule) / name))
    for rule in all_rules()
    for kind in ("bad", "good")
    for name in _fixtures(_folder(rule), kind)
]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.meta.id)
def test_rule_folder_has_fixtures_and_expected_yaml(rule: Rule) -> None:
    m = rule.meta
    folder = _folder(rule)
    assert folder.resolve() == RULES_DIR / f"{m.id.lower()}_{m.name.replace('-', '_')}"
    good, bad = _fixtures(folder, "good"), _fixtures(folder, "bad")
    assert good, f"no good fixture in {folder}"
    assert bad, f"no bad fixture in {folder}"
    # Nothing in the folder escapes the runner.
    assert sorted(p.name for p in folder.glob("*.yaml")) == sorted([*good, *bad, "expected.yaml"])
    expected = _expected(folder)
    assert set(expected) <= set(SECTIONS) and "findings" in expected
    assert sorted(expected["findings"]) == sorted([*good, *bad])
    assert set(expected.get("not_evaluated", {})) <= set(good) | set(bad)
    assert set(expected.get("others_not_evaluated", {})) <= set(good)


@pytest.mark.parametrize(("rule", "path"), CASES)
def test_fixture_gives_exactly_the_expected_outcome(rule: Rule, path: Path) -> None:
    rule_id = rule.meta.id
    expected = _expected(path.parent)
    report = evaluate(load_paths([str(path)]))

    mine = [
        {"resource": f.resource, "enforcement": f.enforcement, "message": f.message}
        for f in report.findings
        if f.rule == rule_id
    ]
    assert mine == expected["findings"][path.name]
    own_skips = [
        {"resource": n.resource, "reason": n.reason}
        for n in report.not_evaluated
        if n.rule == rule_id
    ]
    assert own_skips == expected.get("not_evaluated", {}).get(path.name, [])
    assert all(f.file == str(path) and f.line for f in report.findings)
    assert report.exit_code == (
        1 if any(f.enforcement == "mandatory" for f in report.findings) else 0
    )

    if path.name.startswith("bad-"):
        assert mine, f"{path.name} does not trigger {rule_id}"
    else:
        # A good fixture is clean for every rule. Other rules may say "not evaluated" (a
        # K001 fixture need not name a GPU model for V003 to size it): exactly those listed.
        assert [(f.rule, f.message) for f in report.findings] == []
        others = sorted({n.rule for n in report.not_evaluated if n.rule != rule_id})
        assert others == expected.get("others_not_evaluated", {}).get(path.name, [])
