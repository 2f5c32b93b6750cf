"""Meta-tests: every rule has complete, unique metadata and fixtures."""

from __future__ import annotations

import re

import pytest
from conftest import rule_dir

from gpustrata.core.environments import ENVIRONMENTS
from gpustrata_policies.evaluate import all_rules, find_rule
from gpustrata_policies.findings import ENFORCEMENTS, LAYERS, SEVERITIES

RULES = all_rules()
# RULES.md: "advisory for K003, K006, K008, K011, K012, K013, K015, K016, O004, R002, R006,
# R007, V008 (mandatory in production), V010 on the V1 engine, V012; mandatory for all
# others". (V010's V1 floor is advisory per finding; the rule's default stays mandatory.)
ADVISORY = {
    *("K003", "K006", "K008", "K011", "K012", "K013", "K015", "K016"),
    *("O004", "R002", "R006", "R007", "V012"),
}


def test_the_issue_rules_are_registered() -> None:
    ids = {r.meta.id for r in RULES}
    assert {
        "K001",
        "K002",
        "K004",
        "K007",
        "K009",
        "K010",
        "K011",
        "K012",
        "K013",
        "K014",
        "V011",
    } <= ids


def test_ids_and_names_are_unique() -> None:
    assert len({r.meta.id for r in RULES}) == len(RULES)
    assert len({r.meta.name for r in RULES}) == len(RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.meta.id)
def test_metadata_is_complete(rule) -> None:  # type: ignore[no-untyped-def]
    m = rule.meta
    assert re.fullmatch(r"[KORVG]\d{3}", m.id)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", m.name)
    assert m.layer in LAYERS and m.severity in SEVERITIES
    assert m.title and m.rationale.endswith((".", ")")) and m.fix
    assert m.references and all(u.startswith("https://") for u in m.references)
    assert set(m.default_enforcement) == set(ENVIRONMENTS)
    assert set(m.default_enforcement.values()) <= set(ENFORCEMENTS)
    expected = "advisory" if m.id in ADVISORY else "mandatory"
    assert m.default_enforcement["prod"] == expected
    *_, folder, module = rule.check.__module__.split(".")
    assert (folder, module) == (f"{m.id.lower()}_{m.name.replace('-', '_')}", "rule")
    assert find_rule(m.id) is rule and find_rule(m.name) is rule


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.meta.id)
def test_every_rule_has_good_and_bad_fixtures(rule) -> None:  # type: ignore[no-untyped-def]
    folder = rule_dir(rule.meta.id)
    assert sorted(folder.glob("good-*.yaml")), f"no good fixture in {folder}"
    assert sorted(folder.glob("bad-*.yaml")), f"no bad fixture in {folder}"
