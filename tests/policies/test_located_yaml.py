"""The one-walk YAML reader (``manifests._located``) gives what the general path gives:
the same values, the same line of every key and item, the same errors; on every YAML
text the project holds, on generated documents and on damaged fixtures."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
import yaml
from _fuzz import damage, junk, record
from conftest import REPO, fixture_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustrata.cli.app import main
from gpustrata.core.errors import InputError
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
    each object, the line of every key and item, and the error line, if any."""
    fast = _load(text, name)
    with pytest.MonkeyPatch.context() as patch:

        def slow(*_args: Any) -> Any:
            raise manifests._Slow

        patch.setattr(manifests, "_located", slow)
        general = _load(text, name)
    assert repr(fast) == repr(general)  # repr: NaN is not equal to itself


def _corpus() -> list[tuple[str, str]]:
    """Every YAML text the project holds (field corpora, review edges, rule fixtures and
    their expected findings, stack files) and each stack as `render` prints it."""
    files = sorted(
        p
        for folder in (REPO / "tests" / "data", REPO / "policies", REPO / "stacks")
        for p in folder.rglob("*")
        if p.suffix in {".yaml", ".yml"} and "venv" not in p.parts
    )
    texts = [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in files]
    for stack in ("dev", "staging", "prod"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["render", "--stack", stack])
        texts.append((f"render --stack {stack}", out.getvalue()))
    return texts


def test_corpus_reads_as_the_general_path_reads_it() -> None:
    texts = _corpus()
    assert len(texts) > 100
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
