"""The pack's AnalyzeStack leaves no cyclic garbage of its stack policies' views (issue 18).

The pack module is loaded in this process with ``PolicyPack`` replaced by a recorder (the
real one serves forever); its policies then go through pulumi-policy's own servicer, as
``python -m pulumi.policy`` runs them. Each stack policy builds fresh K8sObjects whose
views form cycles (an object's pods point back at it); inside the request's frozen heap
those cycles were out of every collection until the request ended, 33 policies' views
at once.
"""

from __future__ import annotations

import gc
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from _grpc import resource_props, resource_token, resource_urn, to_struct
from conftest import REPO

pytest.importorskip("grpc")
import pulumi_policy
import pulumi_policy.policy
from pulumi.runtime.proto import analyzer_pb2

from gpustrata_policies.evaluate import all_rules
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef

CORPUS = REPO / "tests" / "data" / "field-corpus-1"  # a copy of ../shared/field-corpus


def _servicer(monkeypatch: pytest.MonkeyPatch, calls: list[int] | None = None) -> Any:
    """pulumi-policy's servicer over the pack's policies; *calls* records the number of
    rules of each evaluation the pack runs."""
    recorded: dict[str, Any] = {}

    class Recorder:
        def __init__(self, **kwargs: Any) -> None:
            recorded.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", Recorder)
    monkeypatch.setenv("GPUSTRATA_ENVIRONMENT", "prod")
    monkeypatch.setattr(
        pulumi_policy.policy._PolicyAnalyzerServicer,
        "AnalyzeStack",
        pulumi_policy.policy._PolicyAnalyzerServicer.AnalyzeStack,
    )
    spec = importlib.util.spec_from_file_location(
        "gpustrata_pack_under_test", REPO / "policies" / "__main__.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if calls is not None:
        from gpustrata_policies import pulumi_pack  # the pack's code, which __main__ serves

        evaluate = pulumi_pack.evaluate

        def counted(objects: Any, **kwargs: Any) -> Any:
            calls.append(len(kwargs["rules"]))
            return evaluate(objects, **kwargs)

        monkeypatch.setattr(pulumi_pack, "evaluate", counted)
    level = pulumi_policy.EnforcementLevel.ADVISORY
    return pulumi_policy.policy._PolicyAnalyzerServicer(
        recorded["name"], "0.0.1", recorded["policies"], level, *[None] * 7
    )


def _request(paths: list[Path]) -> Any:
    resources = []
    for path in paths:
        for i, obj in enumerate(yaml.safe_load_all(path.read_text())):
            if not isinstance(obj, dict) or not obj.get("apiVersion"):
                continue
            token = resource_token(obj)
            name = f"{path.stem}-{i}"
            resources.append(
                analyzer_pb2.AnalyzerResource(
                    type=token,
                    properties=to_struct(resource_props(token, obj)),
                    urn=resource_urn(token, name),
                    name=name,
                )
            )
    return analyzer_pb2.AnalyzeStackRequest(resources=resources)


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_stack_policies_free_their_views(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted(CORPUS.glob("*.yaml"))
    if not paths:
        pytest.skip(f"no field corpus at {CORPUS}")
    servicer = _servicer(monkeypatch)
    request = _request(paths)
    gc.collect()
    reply = servicer.AnalyzeStack(request, None)
    gc.set_debug(gc.DEBUG_SAVEALL)  # what is still garbage once the request is done
    try:
        gc.collect()
        left = [o for o in gc.garbage if type(o) in (K8sObject, PodRef, ContainerRef)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert reply.diagnostics, "the corpus files should give findings"
    assert left == [], f"{len(left)} view objects were left to the collector"


def test_one_evaluation_serves_every_stack_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """An AnalyzeStack evaluates every stack rule once, not once per stack policy (issue
    35), and each policy still reports its own rule's findings, as the corpus gives them."""
    paths = sorted(CORPUS.glob("*.yaml"))
    if not paths:
        pytest.skip(f"no field corpus at {CORPUS}")
    calls: list[int] = []
    servicer = _servicer(monkeypatch, calls)
    reply = servicer.AnalyzeStack(_request(paths), None)
    stack_rules = [r for r in all_rules() if r.meta.scope == "stack"]
    assert calls == [len(stack_rules)]
    by_policy = {d.policyName for d in reply.diagnostics}
    assert by_policy, "the corpus files should give findings"
    for diagnostic in reply.diagnostics:
        rule = next(r for r in stack_rules if r.meta.name == diagnostic.policyName)
        assert f"[{rule.meta.id}]" in diagnostic.message
