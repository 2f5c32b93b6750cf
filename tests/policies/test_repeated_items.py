"""A JSON item that repeats an earlier one but for its namespace is not decoded again
(inputs/repeats.py RepeatedItems): it reads exactly as decoding it would, values and
lines, and anything else that differs is decoded as usual."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIELD_CORPUS, FIELD_CORPUS_2, fixture_files

from gpustrata.core import jsonio
from gpustrata_policies.inputs.manifests import load_text
from gpustrata_policies.inputs.repeats import RepeatedItems
from gpustrata_policies.view.objects import K8sObject


def _decoded(text: str, monkeypatch: pytest.MonkeyPatch) -> list[K8sObject]:
    """*text* read with every item decoded (none taken from an earlier one)."""
    with monkeypatch.context() as m:
        m.setattr(RepeatedItems, "read", lambda *a, **k: None)
        return load_text(text, "t.json")


def _read(objects: list[K8sObject]) -> list[tuple[Any, ...]]:
    return [
        (repr(o.raw), o.file, o.line, sorted((p, o.lines.get(p)) for p in o.lines or {}))
        for o in objects
    ]


def _repeats(text: str) -> int:
    """How many items of *text* were taken from an earlier one."""
    reader = RepeatedItems()
    jsonio.loads_located(text, reader)
    return len(reader.of)


def _listed(items: list[Any], indent: int | None = 4) -> str:
    """``kubectl get -A -o json``: one List."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=indent)


DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "vllm", "namespace": "NS", "labels": {"app": "vllm"}},
    "spec": {
        "replicas": 2,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.10.1",
                        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
                        "command": ["sh", "-c", 'echo "start"\nvllm serve'],
                    }
                ]
            }
        },
    },
}


def _in(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    return json.loads(json.dumps(doc).replace('"NS"', json.dumps(namespace)))


def test_an_item_repeated_in_other_namespaces_reads_as_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the command holds escapes (\n, \"): where the namespace key is is checked by locating it
    text = _listed([_in(DEPLOYMENT, ns) for ns in ("team-a", "team-b", "team-c")])
    objects = load_text(text, "t.json")
    assert [o.namespace for o in objects] == ["team-a", "team-b", "team-c"]
    found = [o.lines.get(("spec", "replicas")) for o in objects if o.lines]
    assert found[1] - found[0] == found[2] - found[1] > 0
    assert _read(objects) == _read(_decoded(text, monkeypatch))
    assert _repeats(text) == 2
    # a top-level array, and items written on one line each
    for listed in (
        json.dumps([_in(DEPLOYMENT, n) for n in ("a", "b")], indent=2),
        _listed([_in(DEPLOYMENT, n) for n in ("a", "b")], indent=None),
    ):
        assert _read(load_text(listed, "t.json")) == _read(_decoded(listed, monkeypatch))
        assert _repeats(listed) == 1


def _other_value(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "spec": {**doc["spec"], "replicas": 3}}


def _with_env(doc: dict[str, Any], value: str) -> dict[str, Any]:
    changed = json.loads(json.dumps(doc))
    changed["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": value}]
    return changed


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (_in(DEPLOYMENT, "team-a"), _other_value(_in(DEPLOYMENT, "team-b")), "another value"),
        (
            _in(DEPLOYMENT, "team-a"),
            _in(DEPLOYMENT, "Team_B"),
            "a name that is no DNS label",
        ),
        (
            _with_env(_in(DEPLOYMENT, "team-a"), "vllm.team-a.svc"),
            _with_env(_in(DEPLOYMENT, "team-b"), "vllm.team-b.svc"),
            "a DNS name naming the namespace",
        ),
        (
            {**_in(DEPLOYMENT, "team-a"), "kind": "DeploymentList"},
            {**_in(DEPLOYMENT, "team-b"), "kind": "DeploymentList"},
            "a list kind",
        ),
    ],
)
def test_an_item_that_differs_otherwise_is_decoded(
    first: dict[str, Any], second: dict[str, Any], why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _listed([first, second])
    assert _read(load_text(text, "t.json")) == _read(_decoded(text, monkeypatch)), why
    assert _repeats(text) == 0, why


def test_a_namespace_key_before_metadata_or_spelled_with_escapes_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # spec written first: its "namespace" key is found first, and it is not metadata's
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "spec": {"parentRefs": [{"name": "inference", "namespace": "gw"}]},
        "metadata": {"name": "vllm", "namespace": "NS"},
    }
    text = _listed([_in(route, "team-a"), _in(route, "team-b")])
    assert _repeats(text) == 0
    assert _read(load_text(text, "t.json")) == _read(_decoded(text, monkeypatch))
    # metadata.namespace written with an escape, another key spelled "namespace" holding
    # the name as written: the match is not metadata's, so nothing is taken from it
    tricky = (
        '{"kind": "List", "items": ['
        '{"kind": "Service", "metadata": {"name": "a", "namespace": "te\\u0061m-a"},'
        ' "spec": {"x\\"namespace": "team-a"}},'
        '{"kind": "Service", "metadata": {"name": "a", "namespace": "te\\u0061m-a"},'
        ' "spec": {"x\\"namespace": "team-b"}}]}'
    )
    objects = load_text(tricky, "t.json")
    assert [o.namespace for o in objects] == ["team-a", "team-a"]
    assert objects[1].raw["spec"] == {'x"namespace': "team-b"}
    assert _repeats(tricky) == 0
    assert _read(objects) == _read(_decoded(tricky, monkeypatch))


def test_bad_json_after_a_repeat_is_still_refused() -> None:
    good = _listed([_in(DEPLOYMENT, "team-a"), _in(DEPLOYMENT, "team-b")])
    broken = good[: good.rindex("]")] + ",]}"  # a trailing comma after the repeated item
    with pytest.raises(Exception, match=r"t\.json:\d+: invalid JSON"):
        load_text(broken, "t.json")
    duplicated = good.replace('"replicas": 2', '"replicas": 2, "replicas": 3')
    with pytest.raises(Exception, match="duplicate key 'replicas'"):
        load_text(duplicated, "t.json")


def test_the_corpora_and_fixtures_copied_into_namespaces_read_as_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items: list[Any] = []
    paths = [*FIELD_CORPUS.glob("*.yaml"), *FIELD_CORPUS_2.glob("*.yaml"), *fixture_files()]
    for path in paths:
        try:
            docs = list(yaml.safe_load_all(Path(path).read_text(encoding="utf-8")))
        except yaml.YAMLError:  # files PyYAML refuses are tested elsewhere
            continue
        for doc in docs:
            if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
                continue
            try:
                json.dumps(doc)
            except (TypeError, ValueError):  # dates and other values JSON cannot hold
                continue
            items.append(doc)
            ns = doc["metadata"].get("namespace")
            if isinstance(ns, str) and ns:
                items += [
                    {**doc, "metadata": {**doc["metadata"], "namespace": f"{ns}-{i}"}}
                    for i in (1, 2)
                ]
    text = _listed(items)
    assert _read(load_text(text, "t.json")) == _read(_decoded(text, monkeypatch))
    assert _repeats(text) > 100
