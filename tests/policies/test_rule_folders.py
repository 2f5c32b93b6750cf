"""Every rule folder on its own fixtures: the one fixture runner.

``policies/gpustrata_policies/rules/<id>_<name>/`` holds ``meta.yaml`` (the rule's metadata),
``rule.py``, at least one ``good-*.yaml`` and one ``bad-*.yaml`` fixture, and
``expected.yaml``: for each fixture, the exact findings of the rule (resource, enforcement,
message, in report order), its "not evaluated" records, and for a good fixture the other rules
that cannot evaluate it. Each fixture is evaluated alone, as ``gpustrata check FILE`` would
(environment prod, default config). No rule finds anything in a good fixture.
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
from gpustrata_policies.findings import Report, Rule
from gpustrata_policies.inputs.manifests import load_paths

SECTIONS = ("findings", "not_evaluated", "others_not_evaluated")


def _folder(rule: Rule) -> Path:
    return Path(str(rule_folder(rule)))


def _fixtures(folder: Path, kind: str) -> list[str]:
    return sorted(p.name for p in folder.glob(f"{kind}-*.yaml"))


@cache
def _expected(folder: Path) -> dict[str, dict[str, Any]]:
    """The folder's expected.yaml; empty for a new rule that has none yet (``--update`` and
    ``tools/regen.py`` write it, the test then fails asking for it)."""
    path = folder / "expected.yaml"
    if not path.exists():
        return {}
    data: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    assert sorted(p.name for p in folder.glob("*.yaml")) == sorted(
        [*good, *bad, "expected.yaml", "meta.yaml"]
    )
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
    got = _outcome(rule_id, report)
    mine = got["findings"]
    assert mine == expected["findings"][path.name]
    assert got["not_evaluated"] == expected.get("not_evaluated", {}).get(path.name, [])
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
        assert got["others"] == expected.get("others_not_evaluated", {}).get(path.name, [])


def _outcome(rule_id: str, report: Report) -> dict[str, Any]:
    """What the runner compares for one fixture's report, in expected.yaml's shape: the
    rule's findings and "not evaluated" records, and the other rules that cannot judge it."""
    return {
        "findings": [
            {"resource": f.resource, "enforcement": f.enforcement, "message": f.message}
            for f in report.findings
            if f.rule == rule_id
        ],
        "not_evaluated": [
            {"resource": n.resource, "reason": n.reason}
            for n in report.not_evaluated
            if n.rule == rule_id
        ],
        "others": sorted({n.rule for n in report.not_evaluated if n.rule != rule_id}),
    }


class _Folded(str):
    """A long message written as a folded block (``>-``), as the hand-written files are."""


_HEADER = """\
# Expected outcome of rule {id} ({name}) on each fixture in this
# folder: what gpustrata_policies.evaluate() reports for the file alone (environment prod,
# default config). Checked by tests/policies/test_rule_folders.py; a change here is a change
# in the rule's behaviour.
#   findings:             every fixture: this rule's findings, in report order (none if good)
#   not_evaluated:        this rule's "not evaluated" records (a fixture not listed has none)
#   others_not_evaluated: good fixtures: the other rules that leave it "not evaluated";
#                         no other rule may find anything in a good fixture
"""
"""The header of a new rule's expected.yaml (an existing file keeps its own)."""


def _dump_expected(rule: Rule) -> str:
    """expected.yaml of *rule* as its fixtures evaluate now, with the standard header."""
    folder = _folder(rule)
    findings: dict[str, Any] = {}
    skipped: dict[str, Any] = {}
    others: dict[str, Any] = {}
    names = [*_fixtures(folder, "bad"), *_fixtures(folder, "good")]
    written = list(_expected(folder).get("findings") or {})  # keep the file's own order
    for name in sorted(
        names, key=lambda n: (n not in written, written.index(n) if n in written else 0, n)
    ):
        got = _outcome(rule.meta.id, evaluate(load_paths([str(folder / name)])))
        findings[name] = [{**f, "message": _Folded(f["message"])} for f in got["findings"]]
        if got["not_evaluated"]:
            skipped[name] = [{**n, "reason": _Folded(n["reason"])} for n in got["not_evaluated"]]
        if name.startswith("good-"):
            others[name] = got["others"]
    data: dict[str, Any] = {"findings": findings}
    if skipped:
        data["not_evaluated"] = skipped
    data["others_not_evaluated"] = others

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(
        _Folded, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", str(s), style=">")
    )
    Dumper.add_representer(
        list,
        lambda d, seq: d.represent_sequence(
            "tag:yaml.org,2002:seq",
            seq,
            flow_style=bool(seq)
            and all(isinstance(x, str) and not isinstance(x, _Folded) for x in seq),
        ),
    )
    path = folder / "expected.yaml"
    header = (
        path.read_text(encoding="utf-8").split("\nfindings:", 1)[0]
        if path.exists()
        else _HEADER.format(id=rule.meta.id, name=rule.meta.name).rstrip("\n")
    )
    body = yaml.dump(data, Dumper=Dumper, sort_keys=False, width=92, allow_unicode=True)
    return header + "\n" + body


if __name__ == "__main__":
    # python tests/policies/test_rule_folders.py --update V010 [V012 ...]: rewrite those
    # rules' expected.yaml from what their fixtures give now, for review in the diff.
    import sys

    from gpustrata_policies.evaluate import find_rule

    if sys.argv[1:2] != ["--update"] or not sys.argv[2:]:
        sys.exit("usage: python tests/policies/test_rule_folders.py --update RULE [RULE ...]")
    for key in sys.argv[2:]:
        found = find_rule(key)
        if found is None:
            sys.exit(f"no rule {key!r}")
        target = _folder(found) / "expected.yaml"
        target.write_text(_dump_expected(found), encoding="utf-8")
        print(f"wrote {target}")
