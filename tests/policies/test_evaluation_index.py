"""One index per evaluation (issue 32): what the view resolves about an object is a fact
of the evaluation's :class:`EvaluationIndex`, resolved once whichever rule asks first,
and dropped with the evaluation (issue 35: ``check`` frees the manifests before it writes
the report)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpustrata_policies
from gpustrata.core.unknown import UnknownInput
from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import all_rules, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.index import EvaluationIndex
from gpustrata_policies.view import engines
from gpustrata_policies.view.nodes import GpuPools, gpu_pools, targeted_pools
from gpustrata_policies.view.objects import K8sObject

RULES = Path(gpustrata_policies.__file__).parent / "rules"
# An engine that asks for GPUs, a described pool, and the pods that select it.
FIXTURES = [
    RULES / "v001_parallelism_matches_gpus" / "bad-parallelism.yaml",
    RULES / "k004_gpu_pod_tolerates_pool" / "bad-untolerated-pool-taint.yaml",
]


def _docs(*paths: Path) -> list[dict[str, Any]]:
    return [d for p in paths for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)]


def test_a_fact_is_resolved_once_per_object_and_name() -> None:
    a, b = K8sObject({"kind": "Pod"}), K8sObject({"kind": "Pod"})
    index = EvaluationIndex([a, b])
    calls: Counter[tuple[int, str]] = Counter()

    def resolve(obj: K8sObject, name: str) -> list[str]:
        calls[(id(obj), name)] += 1
        return [name]

    for _ in range(3):
        for obj in (a, b):
            for name in ("sites", "gpus"):
                assert index.fact(obj, name, lambda o=obj, n=name: resolve(o, n)) == [name]
    assert set(calls.values()) == {1}
    assert len(calls) == 4  # each object's facts are its own, equal objects included


def test_an_object_outside_the_evaluation_keeps_its_own_facts() -> None:
    index = EvaluationIndex([K8sObject({"kind": "Pod"})])
    apart = K8sObject({"kind": "Deployment"})
    first = index.fact(apart, "sites", list)
    assert index.fact(apart, "sites", lambda: ["again"]) is first
    assert index.fact(K8sObject({"kind": "Deployment"}), "sites", lambda: ["other"]) == ["other"]


def test_an_unknown_met_while_resolving_is_raised_to_every_reader() -> None:
    obj = K8sObject({"kind": "Pod"})
    index = EvaluationIndex([obj])
    calls = 0

    def resolve() -> int:
        nonlocal calls
        calls += 1
        raise UnknownInput("spec.image of Pod/x")

    for _ in range(2):
        with pytest.raises(UnknownInput, match=r"spec\.image"):
            index.fact(obj, "image", resolve)
    assert calls == 1


def test_engine_sites_are_resolved_once_per_object_whichever_rules_ask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: Counter[tuple[int, bool]] = Counter()
    real = engines._sites

    def counted(ctx: RuleContext, obj: K8sObject, ray_pods: bool) -> list[engines.EngineSite]:
        calls[(id(obj), ray_pods)] += 1
        return real(ctx, obj, ray_pods)

    monkeypatch.setattr(engines, "_sites", counted)
    report = evaluate(_docs(*FIXTURES))
    assert report.findings  # the rules ran and read the engines
    assert calls, "no rule asked for engine sites"
    assert max(calls.values()) == 1


def test_the_evaluation_drops_what_it_derived_from_its_objects() -> None:
    objects = to_objects(_docs(*FIXTURES))
    report = evaluate(objects)
    assert report.findings
    for obj in objects:
        assert not obj.memo, obj.resource
        assert not obj.claims, obj.resource
    again = evaluate(objects)  # read again from the objects: the same report
    assert again.findings == report.findings
    assert again.not_evaluated == report.not_evaluated


def test_pods_that_select_alike_share_one_match_held_with_the_pools() -> None:
    objects = to_objects(_docs(*FIXTURES))
    ctx = RuleContext(all_rules()[0].meta, load_config(None), objects)
    pools = gpu_pools(ctx)
    assert type(pools) is GpuPools and pools
    pods = [p for o in objects for p in o.pods() if p.node_selector()]
    assert len(pods) >= 1
    first = targeted_pools(pods[0], pools)
    assert targeted_pools(pods[0], pools) == first
    assert targeted_pools(pods[0], pools) is not first  # a copy: the caller may change it
    assert len(pools.matches) == len({repr(p.node_selector()) for p in pods[:1]})
    # A plain list of pools is matched each time, with the same answer.
    assert targeted_pools(pods[0], list(pools)) == first


def test_objects_of_a_kind_are_every_object_of_it_in_input_order() -> None:
    pool_a = K8sObject({"kind": "InferencePool", "metadata": {"name": "a"}})
    route = K8sObject({"kind": "HTTPRoute", "metadata": {"name": "r"}})
    pool_b = K8sObject({"kind": "InferencePool", "metadata": {"name": "b"}})
    seen = K8sObject({"kind": "InferencePool", "metadata": {"name": "from-context"}})
    index = EvaluationIndex([pool_a, route, pool_b], [seen])
    assert index.objects_of("InferencePool") == (pool_a, pool_b, seen)  # context included
    assert index.objects_of("HTTPRoute") == (route,)
    assert index.objects_of("Service") == ()
    assert index.objects_of("InferencePool") is index.objects_of("InferencePool")  # built once


def test_content_key_is_equal_for_equal_plain_data_and_tells_types_apart() -> None:
    from gpustrata.core.unknown import UNKNOWN
    from gpustrata_policies.index import content_key

    args = ["--model", "m", {"a": [1, 2.5, None, True]}]
    assert content_key("c", args) == content_key("c", [*args[:2], {"a": [1, 2.5, None, True]}])
    assert content_key("c", args) != content_key("c", ["--model", "m"])
    # 1 == 1.0 == True in Python: the key keeps them apart, and the shape of the nesting.
    assert len({content_key(1), content_key(1.0), content_key(True), content_key("1")}) == 4
    assert content_key(["a", "b"]) != content_key([["a"], "b"])
    assert content_key({"a": "b"}) != content_key(["a", "b"])
    assert content_key("c", ["--model", UNKNOWN]) is None  # unknown inputs are not shared


def _engine_pod(namespace: str, args: list[Any]) -> dict[str, Any]:
    container = {"name": "vllm", "image": "vllm/vllm-openai:latest", "args": args}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llm", "namespace": namespace},
        "spec": {"containers": [container]},
    }


def test_containers_with_equal_engine_inputs_share_one_engine_read() -> None:
    from gpustrata_policies.view.vllm_args import vllm_engine

    same = ["--model", "org/m", "--tensor-parallel-size", "2"]
    a, b, c = to_objects(
        [_engine_pod("a", same), _engine_pod("b", list(same)), _engine_pod("c", [*same[:2]])]
    )
    index = EvaluationIndex([a, b, c])
    ca, cb, cc = (next(o.containers()) for o in (a, b, c))
    first, second, other = (vllm_engine(x, index) for x in (ca, cb, cc))
    assert first is not None and other is not None
    assert first is second  # one read for both namespaces' copies
    assert other is not first and other.values.get("tensor_parallel_size") is None
    assert first.values["tensor_parallel_size"] == "2"
    # Without the index, a container is read on its own (and keeps it).
    lone = next(K8sObject(_engine_pod("d", same)).containers())
    assert vllm_engine(lone) is not first and vllm_engine(lone) is vllm_engine(lone)


def test_findings_of_copies_share_their_message_text() -> None:
    docs = _docs(*FIXTURES)
    copies = [
        {**d, "metadata": {**d.get("metadata", {}), "namespace": f"ns-{n}"}}
        for n in range(2)
        for d in docs
        if d.get("kind") not in ("GpuNodePool", "NodePool", "Node")
    ]
    pools = [d for d in docs if d.get("kind") in ("GpuNodePool", "NodePool", "Node")]
    report = evaluate([*pools, *copies])
    by_text: dict[tuple[str, str], list[str]] = {}
    for f in report.findings:
        by_text.setdefault((f.rule, f.message), []).append(f.message)
    repeated = [texts for texts in by_text.values() if len(texts) > 1]
    assert repeated, "the copies should repeat a finding"
    assert all(all(t is texts[0] for t in texts) for texts in repeated)
