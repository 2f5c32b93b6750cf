"""A YAML document that repeats an earlier one but for its namespace is not built again
(inputs/repeats.py): it reads exactly as building it would, values and lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from _fuzz import record
from conftest import FIELD_CORPUS, FIELD_CORPUS_2, fixture_files
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustrata.core.errors import InputError
from gpustrata_policies.inputs import manifests
from gpustrata_policies.inputs.manifests import load_text
from gpustrata_policies.inputs.repeats import RepeatedDocuments, Replan
from gpustrata_policies.view.objects import K8sObject


def _built(text: str, monkeypatch: pytest.MonkeyPatch) -> list[K8sObject]:
    """*text* read with every document built (no repeat taken from an earlier one)."""
    with monkeypatch.context() as m:
        m.setattr(RepeatedDocuments, "_plan", lambda *a, **k: None)
        return load_text(text, "t.yaml")


def _read(objects: list[K8sObject]) -> list[tuple[Any, ...]]:
    return [
        (repr(o.raw), o.file, o.line, sorted((p, o.lines.get(p)) for p in o.lines or {}))
        for o in objects
    ]


def _repeats(text: str) -> int:
    """How many documents of *text* were taken from an earlier one."""
    taken = 0
    original = RepeatedDocuments.repeat

    def counting(self: RepeatedDocuments, *args: Any) -> Any:
        nonlocal taken
        found = original(self, *args)
        taken += found is not None
        return found

    RepeatedDocuments.repeat = counting  # type: ignore[method-assign]
    try:
        load_text(text, "t.yaml")
    finally:
        RepeatedDocuments.repeat = original  # type: ignore[method-assign]
    return taken


def _tenants(doc: str, namespaces: list[str]) -> str:
    return "---\n".join(doc.replace("NS", ns) for ns in namespaces)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: NS  # the tenant
  labels: {app: vllm}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        args: [--model, meta-llama/Llama-3.1-8B-Instruct]
"""


def test_a_document_repeated_in_other_namespaces_reads_as_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "# three tenants\n" + _tenants(DEPLOYMENT, ["team-a", "team-b", "team-c"])
    objects = load_text(text, "t.yaml")
    assert [o.namespace for o in objects] == ["team-a", "team-b", "team-c"]
    assert [o.lines.get(("spec", "replicas")) for o in objects if o.lines] == [9, 24, 39]
    assert _read(objects) == _read(_built(text, monkeypatch))
    assert _repeats(text) == 2


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (DEPLOYMENT.replace("replicas: 2", "replicas: 3"), "another value"),
        (DEPLOYMENT.replace("namespace: NS", 'namespace: "NS"'), "a quoted name"),
        (
            DEPLOYMENT.replace(
                "metadata:\n  name: vllm\n  namespace: NS  # the tenant\n  labels: {app: vllm}",
                "metadata: {name: vllm, namespace: NS, labels: {app: vllm}}",
            ),
            "flow-style metadata",
        ),
        (DEPLOYMENT.replace("NS", "on"), "a name YAML 1.1 reads as true"),
        (DEPLOYMENT.replace("NS", "0x10"), "a name YAML 1.1 reads as 16"),
        (
            DEPLOYMENT.replace("args:", "env: [{name: A, value: vllm.NS.svc}]\n        args:"),
            "a DNS name naming the namespace",
        ),
    ],
)
def test_a_document_that_differs_otherwise_is_built(
    second: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = DEPLOYMENT.replace("NS", "team-a") + "---\n" + second.replace("NS", "team-b")
    assert _read(load_text(text, "t.yaml")) == _read(_built(text, monkeypatch)), why
    if why not in ("a DNS name naming the namespace",):
        assert _repeats(text) == 0, why


def test_a_namespace_line_elsewhere_is_kept_and_a_directive_turns_repeats_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: vllm
  namespace: NS
spec:
  parentRefs:
  - name: inference
    namespace: GW
"""
    text = route.replace("NS", "team-a").replace("GW", "gw-1") + "---\n"
    text += route.replace("NS", "team-b").replace("GW", "gw-1") + "---\n"
    text += route.replace("NS", "team-c").replace("GW", "gw-2")  # another gateway
    objects = load_text(text, "t.yaml")
    assert [o.raw["spec"]["parentRefs"][0]["namespace"] for o in objects] == [
        "gw-1",
        "gw-1",
        "gw-2",
    ]
    assert _read(objects) == _read(_built(text, monkeypatch))
    assert _repeats(text) == 1
    # the route names its own namespace as its gateway's: which line is which is not known
    own = route.replace("GW", "NS")
    assert _repeats(_tenants(own, ["team-a", "team-b"])) == 0
    assert _repeats("%YAML 1.1\n---\n" + _tenants(DEPLOYMENT, ["team-a", "team-b"])) == 0


def _copied_text(paths: list[str]) -> str:
    """Each document of *paths* that has a namespace, then its copies in two more."""
    docs: list[str] = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")):
            if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
                continue
            ns = doc["metadata"].get("namespace")
            dumped = yaml.safe_dump(doc, sort_keys=False)
            docs.append(dumped)
            if isinstance(ns, str) and ns:
                docs += [
                    dumped.replace(f"namespace: {ns}\n", f"namespace: {ns}-{i}\n") for i in (1, 2)
                ]
    return "---\n".join(docs)


def test_the_corpora_and_fixtures_copied_into_namespaces_read_as_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = [str(p) for p in [*FIELD_CORPUS.glob("*.yaml"), *FIELD_CORPUS_2.glob("*.yaml")]]
    paths += [str(p) for p in fixture_files()]
    readable = []
    for path in paths:
        try:
            yaml.safe_load_all(Path(path).read_text(encoding="utf-8")).__next__()
            readable.append(path)
        except yaml.YAMLError:  # files PyYAML refuses are tested elsewhere
            continue
    text = _copied_text(readable)
    assert _read(load_text(text, "t.yaml")) == _read(_built(text, monkeypatch))
    assert _repeats(text) > 100


def test_lines_moved_keep_their_table() -> None:
    objects = load_text(_tenants(DEPLOYMENT, ["team-a", "team-b"]), "t.yaml")
    first, second = (o.lines for o in objects)
    assert isinstance(first, manifests._YamlLines) and isinstance(second, manifests._YamlLines)
    assert sorted(first) == sorted(second)
    assert all(second.get(p) == first.get(p) + 15 for p in first)


def _planned(text: str) -> int:
    """How many documents of *text* are planned as repeats (blanked before libyaml)."""
    return len(RepeatedDocuments(text, lambda _: True)._of)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (_tenants(DEPLOYMENT, ["team-a", "team-b"]).replace("---\n", "--- |\n  x\n---\n"), "---|"),
        (_tenants(DEPLOYMENT, ["team-a", "team-b"]) + "...\n", "an end marker"),
        (_tenants(DEPLOYMENT, ["team-a", "team-b"]).replace("\n", "\r\n"), "CRLF"),
        (_tenants(DEPLOYMENT, ["team-a", "team-b"]) + "# a lone \r break\n", "a lone CR"),
        ("%YAML 1.1\n---\n" + _tenants(DEPLOYMENT, ["team-a", "team-b"]), "a directive"),
        (_tenants(DEPLOYMENT.replace("kind: Deployment", "kind: List"), ["a", "b"]), "a List"),
    ],
)
def test_where_documents_start_is_not_plain_nothing_is_planned(
    text: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _planned(text) == 0, why
    try:
        built = _read(_built(text, monkeypatch))
    except InputError as exc:  # read as a whole, the same error
        with pytest.raises(InputError, match=re.escape(str(exc))):
            load_text(text, "t.yaml")
        return
    assert _read(load_text(text, "t.yaml")) == built, why


def test_comments_and_blank_lines_before_a_document_are_left_out_of_the_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Helm's `# Source:` line before each document, the first without a `---`
    text = "---\n".join(
        f"# Source: chart/templates/{ns}.yaml\n\n" + DEPLOYMENT.replace("NS", ns)
        for ns in ("team-a", "team-b", "team-c")
    )
    assert _planned(text) == 2
    objects = load_text(text, "t.yaml")
    assert [o.file for o in objects] == [f"chart/templates/team-{t}.yaml" for t in "abc"]
    assert _read(objects) == _read(_built(text, monkeypatch))


def test_a_plan_the_documents_do_not_fit_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    # a kind that is no string: not one object, never kept
    values = "kind: 42\noperator:\n  defaultRuntime: containerd\nmetadata:\n  namespace: NS\n"
    # flow-style metadata whose namespace line is another key's
    flow = DEPLOYMENT.replace(
        "metadata:\n  name: vllm\n  namespace: NS  # the tenant\n  labels: {app: vllm}",
        "metadata: {name: vllm, namespace: x, labels: {app: vllm}}\nextra:\n  namespace: NS",
    )
    original = RepeatedDocuments.repeat
    replans = 0

    def counting(self: RepeatedDocuments, *args: Any) -> Any:
        nonlocal replans
        try:
            return original(self, *args)
        except Replan:
            replans += 1
            raise

    for text in ("---\n" + _tenants(values, ["team-a", "team-b"]), _tenants(flow, ["a", "b"])):
        replans = 0
        with monkeypatch.context() as m:
            m.setattr(RepeatedDocuments, "repeat", counting)
            objects = load_text(text, "t.yaml")
        assert replans == 1
        assert _read(objects) == _read(_built(text, monkeypatch))


def test_an_error_after_a_repeat_reads_as_without_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = _tenants(DEPLOYMENT, ["team-a", "team-b", "team-c"]) + "---\nkey: [unclosed\n"
    assert _planned(text) == 2
    with monkeypatch.context() as m:
        m.setattr(RepeatedDocuments, "_plan", lambda *a, **k: None)
        with pytest.raises(InputError) as plain:
            load_text(text, "t.yaml")
    with pytest.raises(InputError) as planned:
        load_text(text, "t.yaml")
    assert str(planned.value) == str(plain.value)
    assert "t.yaml:47" in str(planned.value)


_PIECES = [
    DEPLOYMENT,
    DEPLOYMENT.replace("namespace: NS  # the tenant", 'namespace: "NS"'),
    "kind: ConfigMap\nmetadata:\n  name: c\n  namespace: NS\ndata:\n  a: |+\n    kept\n\n",
    "kind: Service\nmetadata:\n  name: s\n  namespace: NS\n"
    "spec:\n  x: &a {namespace: NS}\n  y: *a\n",
    "kind: HTTPRoute\nmetadata:\n  namespace: NS\n  name: r\nspec:\n  parentRefs:\n"
    "  - namespace: gw\n    name: g\n",
    "kind: List\nitems:\n- kind: Pod\n  metadata:\n    name: p\n    namespace: NS\n",
    "kind: Pod\nmetadata: {name: p, namespace: NS}\n",
    "kind: Pod\nmetadata:\n  name: p\n  namespace: NS\nspec: [unclosed\n",
    "# only a comment\n",
    "",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(range(len(_PIECES))),
            st.sampled_from(["team-a", "team-b", "on", "x1"]),
            st.sampled_from(["", "# c\n", "\n", "# Source: t.yaml\n"]),
            st.sampled_from(["---\n", "--- # m\n", "---\n\n"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["", "", "", "...\n", "\r\n"]),
)
def test_any_stream_reads_as_without_the_plan(
    docs: list[tuple[int, str, str, str]], end: str
) -> None:
    with record("yaml-repeats-plan"):
        text = (
            "".join(
                (marker if i else "") + lead + _PIECES[piece].replace("NS", ns)
                for i, (piece, ns, lead, marker) in enumerate(docs)
            )
            + end
        )

        def read(plan: bool) -> Any:
            try:
                return (
                    _read(manifests._load_yaml(text, "t.yaml")) if plan else _read(_unplanned(text))
                )
            except InputError as exc:
                return str(exc)

        assert read(True) == read(False)


def _unplanned(text: str) -> list[K8sObject]:
    original = RepeatedDocuments._plan
    RepeatedDocuments._plan = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        return manifests._load_yaml(text, "t.yaml")
    finally:
        RepeatedDocuments._plan = original  # type: ignore[method-assign]
