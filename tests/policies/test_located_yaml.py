"""The one-walk YAML reader (``manifests._located``) over the tag-caching loader
(``yamlio.new_loader``) gives what the general path over PyYAML's stock safe loader
gives: the same values, the same line of every key and item, the same errors; on every
YAML and JSON text the project holds, on generated documents and on damaged fixtures."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
import yaml
from _fuzz import damage, junk, record
from conftest import REPO, fixture_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustrata.cli.app import main
from gpustrata.core.errors import InputError
from gpustrata.core.yamlio import SAFE_LOADER
from gpustrata_policies.inputs import manifests

DOCS = [
    "kind: Pod\nmetadata: {name: a, labels: {x: 'y'}}\nspec:\n  containers:\n  - name: c\n",
    "a: 0x1F\nb: 0o17\nc: 1_000\nd: -12\ne: 1.5e3\nf: .inf\ng: .nan\nh: ~\ni: yes\nj: Off\n",
    "1: int key\n'2': str key\ntrue: bool key\n~: null key\n3.5: float key\n",
    "a:\n- - 1\n  - [2, 3]\n- {b: [c, {d: e}]}\n- ''\n- \"quoted\\n\"\n",
    "---\nkind: A\n---\n---\n- 1\n- 2\n---\nplain scalar\n",
    "base: &b {x: 1}\nuse: *b\n",  # an alias: the general path
    "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",  # a merge key
    "when: 2024-01-02\n",  # a timestamp
    "bin: !!binary aGVsbG8=\n",
    "s: !!set {a, b}\n",
    "a: 1\na: 2\n",  # a repeated key
    "1: a\n'1': b\n",  # the same key text, two tags
    "x: !Ref y\n",  # a tag the safe loader refuses
    "n: " + "9" * 5000 + "\n",  # an integer too long to read
    "a: &a [*a]\n",  # a self-referencing alias
    "[" * 3000 + "]" * 3000 + "\n",  # deeper than the interpreter's recursion
    "? [a, b]\n: complex key\n",
    # YAML 1.1 as go-yaml reads Kubernetes manifests: booleans, octals, sexagesimals.
    "on: yes\noff: No\ny: n\noct: 012\nbin: 0b101\nsexa: 1:30\nfl: 1:30.5\n",
    # One text plain, quoted and tagged in one document: the tag cache tells them apart.
    "a: yes\nb: 'yes'\nc: \"yes\"\nd: !!str yes\ne: 10\nf: '10'\ng: !!str 10\n",
    "yes: 1\n'yes': 2\n",  # the same key text plain and quoted: a repeated key
    "url: http://x/?a=1&b=2\nk: v\n---\nbase: &b {x: 1}\nuse: *b\n",  # `&` not an anchor
    "a: 1\n---\n&r {k: [*r]}\n",  # an anchor on a later document's root
    # The general path first, then the one walk, on the same paths: one id for each.
    "base: &b {x: 1}\nuse: *b\nk: [1]\n---\nbase: {x: 2}\nuse: {x: 3}\nk: [1, 2]\n",
]


def _load(text: str, name: str = "in.yaml") -> Any:
    try:
        objs = manifests.load_text(text, name)
    except InputError as exc:
        return ("error", str(exc))
    # Lines by path, in one order (the walks visit paths in different orders).
    return [(o.raw, o.line, sorted((o.lines or {}).items(), key=repr)) for o in objs]


@pytest.mark.parametrize("text", DOCS)
def test_same_as_the_general_path(text: str) -> None:
    _same_as_the_general_path(text)


def _same_as_the_general_path(text: str, name: str = "in.yaml") -> None:
    """The one-walk reader and the general path read *text* alike: values, the line of
    each object, the line of every key and item, and the error line, if any; the general
    path with PyYAML's stock safe loader (each scalar's tag resolved by PyYAML each time)
    as ``check`` read manifests before issue 35."""
    fast = _load(text, name)
    with pytest.MonkeyPatch.context() as patch:

        def slow(*_args: Any) -> Any:
            raise manifests._Slow

        patch.setattr(manifests, "_located", slow)
        patch.setattr(manifests, "new_loader", SAFE_LOADER)
        patch.setattr(manifests, "dispose_loader", lambda loader: loader.dispose())
        general = _load(text, name)
    assert repr(fast) == repr(general)  # repr: NaN is not equal to itself


def _corpus() -> list[tuple[str, str]]:
    """Every YAML and JSON text the project holds (field corpora, review edges, rule
    fixtures and their expected findings, stack files; JSON read as the YAML it also is)
    and each stack as `render` prints it."""
    files = sorted(
        p
        for folder in ("tests/data", "tests/fixtures", "policies", "stacks")
        for folder in [REPO / folder]
        for p in folder.rglob("*")
        if p.suffix in {".yaml", ".yml", ".json"} and "venv" not in p.parts
    )
    texts = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in files]
    for name, text in list(texts):  # each YAML file as `kubectl get -o json` prints it
        if name.startswith("tests/data") and name.endswith((".yaml", ".yml")):
            with contextlib.suppress(yaml.YAMLError):
                items = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
                listed = {"apiVersion": "v1", "kind": "List", "items": items}
                texts.append((name + ".json", json.dumps(listed, indent=4, default=str)))
    for stack in ("dev", "staging", "prod"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["render", "--stack", stack])
        texts.append((f"render --stack {stack}", out.getvalue()))
    return texts


def test_corpus_reads_as_the_general_path_reads_it() -> None:
    texts = _corpus()
    assert len(texts) > 100
    assert any(name.endswith(".json") for name, _ in texts)
    for name, text in texts:
        _same_as_the_general_path(text, name + ".yaml")


_STYLES = st.fixed_dictionaries(
    {
        "default_flow_style": st.sampled_from([False, True, None]),
        "indent": st.sampled_from([2, 4]),
        "width": st.sampled_from([20, 80, 10_000]),
        "explicit_start": st.booleans(),
        "explicit_end": st.booleans(),
        "allow_unicode": st.booleans(),
    }
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(junk(), min_size=1, max_size=4), style=_STYLES, lead=st.booleans())
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_generated_documents_read_as_the_general_path_reads_them(
    docs: list[Any], style: dict[str, Any], lead: bool
) -> None:
    """Any documents, dumped in any of PyYAML's styles (flow, block, long and short
    lines, explicit markers), with comments before a document or not."""
    with record("located-yaml-generated"):
        text = yaml.safe_dump_all(docs, sort_keys=False, **style)
        if lead:
            text = "# a comment\n\n" + text.replace("---", "# between\n---")
        _same_as_the_general_path(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_damaged_fixtures_read_as_the_general_path_reads_them(data: st.DataObject) -> None:
    """Rule fixtures with random edits (indents, anchors, tags, markers, line breaks)."""
    path = data.draw(st.sampled_from(fixture_files()))
    text = damage(data.draw, path.read_text(encoding="utf-8"))
    with record("located-yaml-damaged"):
        _same_as_the_general_path(text)


_TRICKY = st.sampled_from(
    [
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "n",
        "~",
        "null",
        "Null",
        "",
        "012",
        "0o12",
        "0x1F",
        "0b11",
        "1_000",
        "1:30",
        "-1:30:00.5",
        "+12",
        "1e3",
        "1.5E-3",
        ".inf",
        "-.Inf",
        ".NaN",
        "2024-01-02",
        "true",
        "TRUE",
        "True",
        "abc",
        "0",
        "-0",
        "09",
        "1.",
        "<<",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(_TRICKY, _TRICKY, st.sampled_from(["", "'", '"']), st.integers(0, 2)),
        min_size=1,
        max_size=12,
    )
)
def test_yaml_11_scalars_read_as_the_general_path_reads_them(
    rows: list[tuple[str, str, str, int]],
) -> None:
    """Keys and values spelled as YAML 1.1 reads them apart (booleans, octals, sexagesimal
    numbers, nulls, merge keys), plain or quoted, nested under one another."""
    lines = []
    for key, value, quote, depth in rows:
        lines.append(f"{'  ' * min(depth, len(lines))}k{key}: {quote}{value}{quote}")
        lines.append(f"{'  ' * min(depth, len(lines))}{key or 'e'}x: [{value or 'v'}]")
    with record("located-yaml-11"):
        _same_as_the_general_path("\n".join(lines) + "\n")


def test_equal_strings_of_one_input_share_one_str() -> None:
    """Equal string values of one input are one object (a cluster dump repeats its images
    and label values in every object); its values and lines are unchanged (above)."""
    image = "nvcr.io/nvidia/tritonserver:24.05-py3"
    text = "".join(
        f"---\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  image: {image[:-3]}py3\n"
        for i in range(3)
    )
    objs = manifests.load_text(text, "in.yaml")
    images = [o.raw["spec"]["image"] for o in objs]
    assert images == [image] * 3
    assert images[0] is images[1] is images[2]
    # Not across inputs: the shared texts are dropped after each input is read.
    again = manifests.load_text(text, "in.yaml")[0].raw["spec"]["image"]
    assert again == image and again is not images[0]
