"""Property: every rule, on any Kubernetes-shaped input, reports or says "not evaluated".

Seeds are every fixture file of every rule (so rules added later are covered by their
own fixtures) and the objects the reference stacks render. Each case mutates one or
more objects of a seed (missing fields, nulls, wrong types, huge lists, deep nesting,
another or an unknown kind, Pulumi unknowns and secrets) and runs *all* rules
(``all_rules()``) over the set. A rule that raises becomes an internal-error finding
in the engine; the property is that there is none. On a failure the crashing rule is
re-run directly so the report shows its traceback.

The second half checks the engine's own contract with an injected crashing rule.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from typing import Any

import pytest
import yaml
from _release import REFERENCE_IMAGE
from conftest import REPO, fixture_files, fixture_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustrata.core.unknown import PULUMI_UNKNOWN_SENTINELS, UNKNOWN, UnknownInput
from gpustrata_policies.evaluate import INTERNAL_ERROR, all_rules, evaluate
from gpustrata_policies.findings import NotEvaluated, Rule, RuleContext, RuleMeta
from gpustrata_policies.inputs.pulumi import objects_from_pulumi
from gpustrata_policies.view.kinds import KNOWN_KINDS
from gpustrata_policies.view.objects import K8sObject

sys.path.insert(0, str(REPO / "tests"))
from _fuzz import junk, mutated, pulumi_secret, record
from _stacks import STACKS


def _fixture_seeds() -> list[list[dict[str, Any]]]:
    seeds = []
    for path in fixture_files():
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        if docs and all(isinstance(d, dict) for d in docs):
            seeds.append(docs)
    return seeds


def _stack_seeds() -> list[list[dict[str, Any]]]:
    from gpustrata.planning.build import build_plan
    from gpustrata.render.from_plan import pool_object, workload_objects
    from gpustrata.spec.loader import read_stack_file

    seeds = []
    for env in STACKS:
        _, doc = read_stack_file(REPO / "stacks" / f"Pulumi.{env}.yaml")
        plan = build_plan(doc)
        seeds.append([pool_object(p) for p in plan.pools.values()] + workload_objects(plan))
    return seeds


SEEDS = _fixture_seeds() + _stack_seeds()
KINDS = sorted(KNOWN_KINDS)
ODD = junk(secrets=True, unknown=UNKNOWN) | st.sampled_from(sorted(PULUMI_UNKNOWN_SENTINELS))


@st.composite
def odd_object_sets(draw: st.DrawFn) -> tuple[list[Any], bool]:
    """A seed with some objects mutated; and whether to pass it through the Pulumi adapter."""
    objects = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(objects) - 1))
        obj = draw(mutated(objects[index], ODD, max_steps=4))
        if isinstance(obj, dict) and draw(st.integers(0, 5)) == 0:
            obj["kind"] = draw(st.sampled_from([*KINDS, "Widget", "", None, 7]))
        objects[index] = obj
    via_pulumi = draw(st.booleans())
    return objects, via_pulumi


def _as_pulumi(objects: list[Any]) -> list[dict[str, Any]]:
    """The objects as Pulumi resource inputs, converted back by the adapter (plan path)."""
    triples = []
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            continue
        kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "X"
        api = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else "v1"
        module = api if "/" in api else f"core/{api}"
        if kind == "GpuNodePool":
            triples.append(("gpustrata:index:GpuNodePool", f"pool-{i}", {"description": obj}))
        else:
            triples.append((f"kubernetes:{module}:{kind}", f"res-{i}", obj))
    return objects_from_pulumi(triples)


def _rerun_raw(objects: list[K8sObject], rule_id: str) -> None:
    """Run one rule without the engine's safety net, to show the traceback."""
    rule = next(r for r in all_rules() if r.meta.id == rule_id)
    from gpustrata_policies.evaluate import load_config

    ctx = RuleContext(rule.meta, load_config(None, "prod"), objects)
    for obj in objects:
        if obj.kind in KNOWN_KINDS:
            with contextlib.suppress(UnknownInput):
                list(rule.check(ctx, obj))


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=odd_object_sets())
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_every_rule_survives_odd_objects(case: tuple[list[Any], bool]) -> None:
    raw, via_pulumi = case
    mappings = _as_pulumi(raw) if via_pulumi else [o for o in raw if isinstance(o, dict)]
    objects = [K8sObject(o) for o in mappings]
    with record("rules-odd-objects"):
        for env in ("prod", "dev"):
            report = evaluate(objects, environment=env)
            crashed = [f for f in report.findings if f.internal]
            if crashed:
                _rerun_raw(objects, crashed[0].rule)  # raises with the rule's traceback
            assert not crashed, crashed
            for f in report.findings:
                assert isinstance(f.message, str) and f.message, f
            for n in report.not_evaluated:
                assert isinstance(n, NotEvaluated) and n.reason, n


# --- the engine's contract with a crashing rule ---------------------------------------------

SECRET = "hf_CrashTextMustNotLeak0123456789"


def _crashing_check(ctx: RuleContext, obj: K8sObject) -> Any:
    if obj.name == "first":
        yield ctx.violation(obj, "reported before the crash")
    if obj.name in ("first", "second"):
        raise ValueError(f"invalid literal: {SECRET!r}")
    yield ctx.violation(obj, "third is fine")


CRASHING = Rule(
    RuleMeta(
        id="Z999",
        name="crashes-on-purpose",
        title="A rule that crashes",
        layer="kubernetes",
        severity="high",
        default_enforcement={"dev": "advisory", "staging": "mandatory", "prod": "mandatory"},
        rationale="test",
        fix="test",
        references=("https://example.invalid",),
    ),
    _crashing_check,
)


def _pod(name: str, gpus: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": REFERENCE_IMAGE,
                    "resources": {"requests": {"nvidia.com/gpu": gpus}},
                }
            ]
        },
    }


@pytest.mark.parametrize(("env", "level"), [("prod", "mandatory"), ("dev", "advisory")])
def test_a_crashing_rule_is_an_internal_error_and_others_still_run(env: str, level: str) -> None:
    objects = [_pod("first"), _pod("second"), _pod("third")]
    k001 = next(r for r in all_rules() if r.meta.id == "K001")
    report = evaluate(objects, environment=env, rules=[CRASHING, k001])
    by_rule: dict[str, list[tuple[str, str, bool, str]]] = {}
    for f in report.findings:
        by_rule.setdefault(f.rule, []).append((f.resource, f.enforcement, f.internal, f.message))
    crashed = sorted(r for r, _, internal, _ in by_rule["Z999"] if internal)
    assert crashed == ["Pod/llm/first", "Pod/llm/second"]
    for _resource, enforcement, internal, message in by_rule["Z999"]:
        assert enforcement == level
        if internal:
            assert message.startswith(f"{INTERNAL_ERROR}: rule Z999 raised ValueError at ")
            assert "test_rule_robustness.py:" in message  # where it raised
            assert SECRET not in message  # the exception text is never shown
    # What the rule reported before it crashed is kept, and it still ran on the third Pod.
    plain = sorted((r, m) for r, _, internal, m in by_rule["Z999"] if not internal)
    assert plain == [
        ("Pod/llm/first", "reported before the crash"),
        ("Pod/llm/third", "third is fine"),
    ]
    # K001 (request without limit) still ran on every object.
    pods = [f"Pod/llm/{n}" for n in ("first", "second", "third")]
    assert sorted(r for r, *_ in by_rule["K001"]) == pods
    # Fail closed: a mandatory rule that could not check an object fails the run.
    alone = evaluate([_pod("second")], environment=env, rules=[CRASHING])
    assert alone.exit_code == (1 if level == "mandatory" else 0)


def test_internal_error_in_json_and_sarif_output() -> None:
    from gpustrata_policies.output.formats import render

    report = evaluate([_pod("second")], environment="prod", rules=[CRASHING])
    data = yaml.safe_load(render(report, "json"))
    assert [f["rule"] for f in data["findings"]] == ["Z999"]
    assert data["findings"][0]["message"].startswith(INTERNAL_ERROR)
    assert set(data["findings"][0]) == {
        "rule",
        "name",
        "severity",
        "enforcement",
        "resource",
        "message",
        "fix",
    }  # the output contract is unchanged
    sarif = yaml.safe_load(render(report, "sarif"))
    invocation = sarif["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert any(n["level"] == "error" for n in invocation["toolExecutionNotifications"])
    assert SECRET not in render(report, "sarif") + render(report, "text")


def test_unknown_input_keeps_what_the_rule_reported_first() -> None:
    def check(ctx: RuleContext, obj: K8sObject) -> Any:
        yield ctx.violation(obj, "seen before the unknown")
        raise UnknownInput("spec.replicas")

    rule = Rule(CRASHING.meta, check)
    report = evaluate([_pod("x")], environment="prod", rules=[rule])
    assert [f.message for f in report.findings] == ["seen before the unknown"]
    assert [n.reason for n in report.not_evaluated] == [
        "spec.replicas is unknown until the deployment runs"
    ]


def test_pulumi_secrets_reach_rules_only_as_a_placeholder() -> None:
    pod = _pod("p")
    pod["spec"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": pulumi_secret(SECRET)}]
    [obj] = objects_from_pulumi([("kubernetes:core/v1:Pod", "p", pod)])
    assert SECRET not in repr(obj)
    report = evaluate([obj], environment="prod")
    assert "K014" in {f.rule for f in report.findings}  # still a literal in the Pod spec
    assert SECRET not in repr(report)


def test_seeds_cover_every_rule_with_fixtures() -> None:
    """Guards the seed list: each rule's fixtures are seeds (new rules included)."""
    with_fixtures = {fixture_id(p).split("/")[0] for p in fixture_files()}
    assert {r.meta.id for r in all_rules()} <= with_fixtures | {"Z999"}
    assert len(SEEDS) >= len(with_fixtures)
