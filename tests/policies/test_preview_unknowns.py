"""During ``pulumi preview`` a rule whose input is unknown is not applicable, never violated.

Every node of every rule fixture, in turn, is made unknown (``tests/_unknown_sweep.py``):
in process over every node (whole subtrees too) of every good and bad fixture, and through
the real gRPC pack with Pulumi's unknown string sentinel at every leaf of every good
fixture. No trial may give a mandatory finding the all-known fixture does
not give (issue 19, item 16). Case counts are printed in the session summary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _fuzz import CASES, SECONDS, record
from _grpc import (
    diagnostic_findings,
    policy_pack,
    resource_props,
    resource_token,
    resource_urn,
    to_struct,
)
from _unknown_sweep import Trial, replaced, sweep, trials
from conftest import REPO, fixture, fixture_files

from gpustrata.core.unknown import UNKNOWN
from gpustrata_policies import all_rules, evaluate, objects_from_pulumi
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.objects import K8sObject

pytestmark = pytest.mark.slow  # minutes: see CONTRIBUTING.md, fast feedback

STRING_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""Pulumi's unknown string (pulumi/pulumi-policy sdk/python/lib/pulumi_policy/proxy.py)."""


@pytest.mark.parametrize("kind", ["good", "bad"])
def test_an_unknown_anywhere_adds_no_mandatory_finding(kind: str) -> None:
    """Every node of every fixture made unknown, in process: no new mandatory finding."""
    files = fixture_files(kind)
    start = time.perf_counter()
    result = sweep(files)
    suite = f"preview-unknown-nodes-{kind}"
    CASES[suite] += result.trials
    SECONDS[suite] += time.perf_counter() - start
    print(f"{suite}: {result.fixtures} fixtures, {result.trials} trials")
    assert result.fixtures == len(files) and result.trials > 1000
    shown = {label: sorted(found) for label, found in sorted((result.new or {}).items())[:20]}
    assert not result.new, f"{len(result.new or {})} trials give new findings: {shown}"


# --------------------------------------------------------------------------- classes of issue 19

CASES_OF_ISSUE = [
    # (rule, fixture rule, fixture, object index, path made unknown)
    ("K004", "K004", "good-tolerates-pool.yaml", 1, ("spec", "template", "spec", "tolerations", 0)),
    (
        "K004",
        "K004",
        "good-tolerates-pool.yaml",
        1,
        ("spec", "template", "spec", "tolerations", 0, "key"),
    ),
    ("K004", "K004", "good-tolerates-pool.yaml", 0, ("spec", "taints", 0, "key")),
    (
        "R003",
        "R003",
        "good-strict-pack-fits.yaml",
        0,
        ("spec", "rayClusterConfig", "workerGroupSpecs", 0),
    ),
    (
        "K009",
        "K009",
        "good-vpa-cpu-memory.yaml",
        1,
        ("spec", "resourcePolicy", "containerPolicies", 0, "controlledResources", 0),
    ),
    ("K010", "K010", "good-keda-with-its-hpa.yaml", 2, ("metadata", "ownerReferences", 0)),
    (
        "V003",  # the --tensor-parallel-size token: not the default of 1
        "V003",
        "good-70b-tp4-on-h100.yaml",
        0,
        ("spec", "template", "spec", "containers", 0, "command", 3),
    ),
    (
        "V004",  # --max-model-len=8192: not the model's full context
        "V004",
        "good-8k-context-on-l4.yaml",
        0,
        ("spec", "template", "spec", "containers", 0, "args", 2),
    ),
]


@pytest.mark.parametrize(
    ("rule", "owner", "name", "index", "path"),
    CASES_OF_ISSUE,
    ids=[f"{c[0]}-{'.'.join(map(str, c[4]))}" for c in CASES_OF_ISSUE],
)
def test_unknown_input_makes_the_rule_not_evaluated(
    rule: str, owner: str, name: str, index: int, path: tuple[str | int, ...]
) -> None:
    path_file = fixture(owner, name)
    known = load_paths([str(path_file)])
    trial = Trial(path_file, index, path)
    report = evaluate(trial.objects(known))
    assert [f.message for f in report.findings if f.rule == rule] == []
    reasons = [n.reason for n in report.not_evaluated if n.rule == rule]
    assert any("unknown until the deployment runs" in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("owner", "name", "index", "path", "rule"),
    [
        (
            "K004",
            "good-tolerates-pool.yaml",
            1,
            ("spec", "template", "spec", "tolerations"),
            "K004",
        ),
        (
            "R003",
            "good-strict-pack-fits.yaml",
            0,
            ("spec", "rayClusterConfig", "workerGroupSpecs"),
            "R003",
        ),
        (
            "V003",
            "good-70b-tp4-on-h100.yaml",
            0,
            ("spec", "template", "spec", "containers"),
            "V003",
        ),
    ],
)
def test_an_unknown_list_is_unknown_not_empty(
    owner: str, name: str, index: int, path: tuple[str | int, ...], rule: str
) -> None:
    path_file = fixture(owner, name)
    report = evaluate(Trial(path_file, index, path).objects(load_paths([str(path_file)])))
    assert not [f for f in report.findings if f.rule == rule]
    assert [n for n in report.not_evaluated if n.rule == rule]


def test_an_unknown_the_rule_does_not_read_keeps_its_violation() -> None:
    """Only unknowns a rule reads make it not applicable: an unknown annotation on every
    object of a K004 bad fixture leaves its violations as they are."""
    bad = fixture("K004", "bad-untolerated-pool-taint.yaml")
    objects = load_paths([str(bad)])
    before = [(f.resource, f.message) for f in evaluate(objects).findings if f.rule == "K004"]
    assert before
    marked = [
        K8sObject(
            replaced(o.raw, ("metadata",), {**o.raw["metadata"], "annotations": {"x": UNKNOWN}}),
            o.file,
            o.line,
            o.lines,
        )
        for o in objects
    ]
    report = evaluate(marked)
    assert [(f.resource, f.message) for f in report.findings if f.rule == "K004"] == before


# --------------------------------------------------------------------------- the gRPC pack


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    pytest.importorskip("grpc")
    with policy_pack(REPO, {**os.environ, "GPUSTRATA_ENVIRONMENT": "prod"}) as stub:
        yield stub


FindingKey = tuple[str, str, str]


def _pack_mandatory(
    analyzer: Any, triples: list[tuple[str, str, dict[str, Any]]]
) -> tuple[set[FindingKey], list[str]]:
    """Mandatory findings of the pack for *triples* (type token, name, inputs) sent as
    resources (each resource's own policies, then the stack policies); and the resource
    each becomes (``Kind/namespace/name``, as the pack reads it)."""
    from pulumi.runtime.proto import analyzer_pb2

    mandatory = analyzer_pb2.MANDATORY
    found: set[FindingKey] = set()
    resources = []
    for token, name, props in triples:
        urn = resource_urn(token, name)
        request = analyzer_pb2.AnalyzeRequest(
            type=token, properties=to_struct(props), urn=urn, name=name
        )
        diags = analyzer.Analyze(request).diagnostics
        found |= diagnostic_findings(d for d in diags if d.enforcementLevel == mandatory)
        resources.append(
            analyzer_pb2.AnalyzerResource(
                type=token, properties=to_struct(props), urn=urn, name=name
            )
        )
    stack = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    found |= diagnostic_findings(d for d in stack.diagnostics if d.enforcementLevel == mandatory)
    return found, [K8sObject(o).resource for o in objects_from_pulumi(triples)]


def _grpc_sweep(analyzer: Any, suite: str, interior: bool) -> dict[str, set[FindingKey]]:
    """Each trial of every good fixture sent through the gRPC pack (one pack process): a
    scalar leaf (*interior* False) or a mapping/list node (*interior* True) replaced by
    Pulumi's unknown string; the mandatory findings no known fixture gives, by trial."""
    from pulumi.runtime.proto import analyzer_pb2

    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    new: dict[str, set[FindingKey]] = {}
    for path in fixture_files("good"):
        objects = load_paths([str(path)])
        tokens = [resource_token(o.raw) for o in objects]
        names = [o.name for o in objects]

        def triples(
            raws: list[Any], tokens: list[str] = tokens, names: list[str] = names
        ) -> list[tuple[str, str, dict[str, Any]]]:
            return [
                (t, n, resource_props(t, r)) for t, n, r in zip(tokens, names, raws, strict=True)
            ]

        raws = [dict(o.raw) for o in objects]
        before, known_names = _pack_mandatory(analyzer, triples(raws))
        leaves = {(t.index, tuple(t.path)) for t in trials(path, objects, leaves_only=True)}
        chosen = [
            t
            for t in trials(path, objects, leaves_only=not interior)
            if not interior or ((t.index, tuple(t.path)) not in leaves and t.path)
        ]
        for trial in chosen:
            with record(suite):
                now = list(raws)
                now[trial.index] = replaced(raws[trial.index], trial.path, STRING_UNKNOWN)
                after, seen = _pack_mandatory(analyzer, triples(now))
                rename = (
                    dict(zip(seen, known_names, strict=True))
                    if len(seen) == len(known_names)
                    else {}
                )
                extra = {(r, rename.get(res, res), m) for r, res, m in after} - before
                if extra:
                    new[trial.label] = extra
    return new


def test_the_pack_reports_no_new_mandatory_violation_for_an_unknown_leaf(analyzer: Any) -> None:
    """Every leaf of every good fixture, each in turn sent as Pulumi's unknown string
    through the gRPC pack (one pack process; about 2,000 trials)."""
    suite = "preview-unknown-leaves-grpc-pack"
    new = _grpc_sweep(analyzer, suite, interior=False)
    fixtures = fixture_files("good")
    rules = {p.parent.name.split("_", 1)[0] for p in fixtures}
    print(f"{suite}: {len(fixtures)} fixtures of {len(rules)} rules, {CASES[suite]} trials")
    assert CASES[suite] >= 2000 and len(rules) == len(all_rules())
    assert not new, new


def test_the_pack_reports_no_new_mandatory_violation_for_an_unknown_interior_node(
    analyzer: Any,
) -> None:
    """Issue 33: the gRPC sweep at every node, not only leaves. Every mapping and list of
    every good fixture (a whole ``spec``, ``metadata``, a container list), each in turn
    sent as Pulumi's unknown string through the gRPC pack, with the other objects of the
    fixture beside it (cross-object: a finding on any resource counts)."""
    suite = "preview-unknown-interior-grpc-pack"
    new = _grpc_sweep(analyzer, suite, interior=True)
    print(f"{suite}: {CASES[suite]} trials")
    assert CASES[suite] > 500
    shown = dict(sorted(new.items())[:20])
    assert not new, f"{len(new)} trials give new findings: {shown}"


@pytest.mark.parametrize(
    ("owner", "name", "index"),
    [("R004", "bad-support-matrix.yaml", 0), ("O006", "bad-untolerated-taints.yaml", 2)],
)
def test_an_unknown_metadata_through_the_pack_adapter_keeps_its_fields_unknown(
    owner: str, name: str, index: int
) -> None:
    """Pulumi's sentinel as a whole ``metadata``: the pack names the object by its logical
    name, but its namespace and labels stay unknown (not ``default`` and none), so no
    message states them (R004 said ``HelmRelease/default/...``, O006 lost the version)."""
    objects = load_paths([str(fixture(owner, name))])
    tokens = [resource_token(o.raw) for o in objects]
    raws = [dict(o.raw) for o in objects]

    def mandatory(rs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        triples = [
            (t, o.name, resource_props(t, r)) for t, o, r in zip(tokens, objects, rs, strict=True)
        ]
        report = evaluate(objects_from_pulumi(triples))
        return {(f.rule, f.message) for f in report.findings if f.enforcement == "mandatory"}

    now = list(raws)
    now[index] = {**raws[index], "metadata": STRING_UNKNOWN}
    assert mandatory(now) - mandatory(raws) == set()


def _adapter_mandatory(
    triples: list[tuple[str, str, dict[str, Any]]],
) -> tuple[set[FindingKey], list[str]]:
    """Mandatory findings of the objects the pack's adapter makes of *triples* (what the
    pack evaluates, without the gRPC hop), and each object's resource name."""
    objects = [K8sObject(o) for o in objects_from_pulumi(triples)]
    report = evaluate(objects)
    found = {
        (f.rule, f.resource, f.message) for f in report.findings if f.enforcement == "mandatory"
    }
    return found, [o.resource for o in objects]


def test_the_pack_adapter_reports_no_new_mandatory_violation_for_an_unknown_node() -> None:
    """Every node (not only leaves) of every good fixture, each in turn Pulumi's unknown
    string as the engine sends it, read through the pack's adapter (``objects_from_pulumi``)
    and all rules: a violation on any object (not only the one holding the unknown) that
    the known fixture does not give fails. Issue 33: a Karpenter NodePool whose
    ``metadata.name`` was unknown got the logical name, and the Deployment selecting the
    real name had a mandatory K005."""
    suite = "preview-unknown-nodes-pack-adapter"
    new: dict[str, set[FindingKey]] = {}
    for path in fixture_files("good"):
        objects = load_paths([str(path)])
        tokens = [resource_token(o.raw) for o in objects]
        names = [f"resource-{i}" for i in range(len(objects))]  # logical names, not k8s names
        raws = [dict(o.raw) for o in objects]

        def triples(
            rs: list[Any], tokens: list[str] = tokens, names: list[str] = names
        ) -> list[tuple[str, str, dict[str, Any]]]:
            return [(t, n, resource_props(t, r)) for t, n, r in zip(tokens, names, rs, strict=True)]

        before, known = _adapter_mandatory(triples(raws))
        for trial in trials(path, objects):
            with record(suite):
                now = list(raws)
                now[trial.index] = replaced(raws[trial.index], trial.path, STRING_UNKNOWN)
                after, seen = _adapter_mandatory(triples(now))
                rename = dict(zip(seen, known, strict=False)) if len(seen) == len(known) else {}
                extra = {(r, rename.get(res, res), m) for r, res, m in after} - before
                if extra:
                    new[trial.label] = extra
    print(f"{suite}: {CASES[suite]} trials")
    assert CASES[suite] > 2000
    shown = dict(sorted(new.items())[:20])
    assert not new, f"{len(new)} trials give new findings: {shown}"
