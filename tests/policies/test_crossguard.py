"""The CrossGuard pack, launched the way the Pulumi engine does, over gRPC.

`python -m pulumi.policy ENGINE_ADDR policies` starts the pack; it prints the port of
its Analyzer service. The Python pack never dials the engine address
(pulumi/policy/__main__.py only runs the program; PolicyPack serves on 127.0.0.1:0),
so a closed loopback port is passed. The same objects then go through all three
adapters (check on files, objects_from_pulumi + evaluate, the pack) and must give the
same findings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _grpc import (
    diagnostic_findings,
    policy_pack,
    resource_props,
    resource_token,
    resource_urn,
    to_struct,
)
from conftest import REPO, fixture, fixture_files

grpc = pytest.importorskip("grpc")
from google.protobuf import empty_pb2  # noqa: E402
from pulumi.runtime.proto import analyzer_pb2  # noqa: E402

from gpustrata_policies import all_rules, evaluate, objects_from_pulumi  # noqa: E402
from gpustrata_policies.inputs.manifests import load_paths  # noqa: E402


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    with policy_pack(REPO, {**os.environ, "GPUSTRATA_ENVIRONMENT": "prod"}) as stub:
        yield stub


def _as_stack(analyzer: Any, request: Any) -> list[Any]:
    """Diagnostics of one resource analysed as a stack: K007 is stack-scoped (it reads the
    KubeRay operator's release), so the pack reports it from AnalyzeStack."""
    resource = analyzer_pb2.AnalyzerResource(
        type=request.type, properties=request.properties, urn=request.urn, name=request.name
    )
    stack = analyzer_pb2.AnalyzeStackRequest(resources=[resource])
    return list(analyzer.AnalyzeStack(stack).diagnostics)


def test_analyzer_info(analyzer: Any) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpustrata" and info.supportsConfig
    by_name = {p.name: p for p in info.policies}
    assert set(by_name) == {r.meta.name for r in all_rules()}
    for rule in all_rules():
        policy = by_name[rule.meta.name]
        stack = rule.meta.scope == "stack"
        assert policy.policy_type == (
            analyzer_pb2.POLICY_TYPE_STACK if stack else analyzer_pb2.POLICY_TYPE_RESOURCE
        )
        level = (
            analyzer_pb2.MANDATORY
            if rule.meta.default_enforcement["prod"] == "mandatory"
            else analyzer_pb2.ADVISORY
        )
        assert policy.enforcementLevel == level
        assert "environment" in policy.configSchema.properties
    assert "minShmSize" in by_name["shm-for-multi-gpu"].configSchema.properties


def test_analyze_good_bad_and_unknown(analyzer: Any) -> None:
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    bad = load_paths([str(fixture("K001", "bad-request-without-limit.yaml"))])[0].raw
    token = "kubernetes:apps/v1:Deployment"
    resp = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type=token,
            properties=to_struct(dict(bad)),
            urn=resource_urn(token, "vllm"),
            name="vllm",
        )
    )
    assert {d.policyName for d in resp.diagnostics} == {"gpu-requests-equal-limits"}
    assert all(d.enforcementLevel == analyzer_pb2.MANDATORY for d in resp.diagnostics)
    assert (
        "K001",
        "Deployment/llm/vllm",
        "container 'vllm' requests nvidia.com/gpu: 1 but sets no limit; the API server rejects it "
        "(Limit must be set for non overcommitable resources)",
    ) in diagnostic_findings(resp.diagnostics)
    good = load_paths([str(fixture("K001", "good-limits-only.yaml"))])[0].raw
    resp = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type="kubernetes:core/v1:Pod",
            properties=to_struct(dict(good)),
            urn=resource_urn("p", "p"),
            name="p",
        )
    )
    assert list(resp.diagnostics) == []
    unknown = dict(bad)
    unknown["spec"] = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    resp = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type=token, properties=to_struct(unknown), urn=resource_urn(token, "u"), name="u"
        )
    )
    assert list(resp.diagnostics) == []


def test_configure_threshold_and_environment(analyzer: Any) -> None:
    good = load_paths([str(fixture("K007", "good-memory-shm.yaml"))])[0].raw  # 2Gi /dev/shm
    token = "kubernetes:apps/v1:StatefulSet"
    request = analyzer_pb2.AnalyzeRequest(
        type=token, properties=to_struct(dict(good)), urn=resource_urn(token, "s"), name="s"
    )
    assert _as_stack(analyzer, request) == []
    analyzer.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(
            policyConfig={
                "shm-for-multi-gpu": analyzer_pb2.PolicyConfig(
                    enforcementLevel=analyzer_pb2.ADVISORY,
                    properties=to_struct({"minShmSize": "4Gi", "environment": "dev"}),
                ),
            }
        )
    )
    diags = _as_stack(analyzer, request)
    assert [d.policyName for d in diags] == ["shm-for-multi-gpu"]
    assert diags[0].enforcementLevel == analyzer_pb2.ADVISORY and "at least 4Gi" in diags[0].message
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))


def test_three_adapters_agree(analyzer: Any, tmp_path: Path) -> None:
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    files = sorted(
        str(p)
        for p in fixture_files("bad")
        if p != fixture("K004", "bad-no-toleration-no-pool.yaml")
    )
    # One namespace-unique set: take the K004 pool fixture plus every bad fixture's objects
    # that do not collide by resource name.
    seen: set[str] = set()
    objects = []
    for obj in load_paths(files):
        if obj.resource not in seen:
            seen.add(obj.resource)
            objects.append(obj)
    merged = tmp_path / "all.yaml"
    import yaml

    merged.write_text(yaml.safe_dump_all([dict(o.raw) for o in objects]))
    via_check = {
        (f.rule, f.resource, f.message) for f in evaluate(load_paths([str(merged)])).findings
    }
    triples = [
        (
            resource_token(dict(o.raw)),
            o.name,
            resource_props(resource_token(dict(o.raw)), dict(o.raw)),
        )
        for o in objects
    ]
    via_plan = {
        (f.rule, f.resource, f.message) for f in evaluate(objects_from_pulumi(triples)).findings
    }
    via_pack: set[tuple[str, str, str]] = set()
    resources = []
    for token, name, props in triples:
        urn = resource_urn(token, name)
        resp = analyzer.Analyze(
            analyzer_pb2.AnalyzeRequest(type=token, properties=to_struct(props), urn=urn, name=name)
        )
        via_pack |= diagnostic_findings(resp.diagnostics)
        resources.append(
            analyzer_pb2.AnalyzerResource(
                type=token, properties=to_struct(props), urn=urn, name=name
            )
        )
    stack = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    assert all(d.urn for d in stack.diagnostics)  # stack findings point at the resource
    via_pack |= diagnostic_findings(stack.diagnostics)
    assert len(via_check) >= 10
    assert via_check == via_plan == via_pack
    # The pack reads a request's resources once for all stack policies: the same request
    # again gives the same findings, and a request without one resource reports nothing
    # for it (the previous request's reading is not reused).
    again = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    assert diagnostic_findings(again.diagnostics) == diagnostic_findings(stack.diagnostics)
    dropped = stack.diagnostics[0].urn
    rest = [r for r in resources if r.urn != dropped]
    fewer = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=rest))
    assert fewer.diagnostics and all(d.urn != dropped for d in fewer.diagnostics)


def test_a_new_request_with_the_same_urns_is_read_anew(analyzer: Any) -> None:
    """The stack policies share one reading per request (issue 18: keyed by the request
    the pack serves, not by a dump of its content): a later request naming the same URN
    with other properties is judged on its own properties."""
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))

    def stack_of(fixture_name: str) -> set[tuple[str, str, str]]:
        raw = dict(load_paths([str(fixture("K007", fixture_name))])[0].raw)
        token = resource_token(raw)
        resource = analyzer_pb2.AnalyzerResource(
            type=token,
            properties=to_struct(resource_props(token, raw)),
            urn=resource_urn(token, "same"),
            name="same",
        )
        reply = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[resource]))
        return {f for f in diagnostic_findings(reply.diagnostics) if f[0] == "K007"}

    assert stack_of("bad-tp4-no-shm.yaml")
    assert not stack_of("good-memory-shm.yaml")
    assert stack_of("bad-tp4-no-shm.yaml")
