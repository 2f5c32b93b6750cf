"""JSON input (``kubectl get -o json`` dumps, ``List`` kinds) read by the json module.

The same objects written as YAML and as JSON give the same findings, and each JSON
finding's line points at the field the rule blames in the JSON text: lines are found
in the text per finding (:func:`gpustrata.core.jsonio.locate`), not recorded per value.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import fixture_files
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustrata.core import jsonio
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import InputError, load_paths, load_text


def _docs() -> list[dict[str, Any]]:
    """The bad fixtures' objects. A kindless document (a Helm values file, named after its
    file) is left out: kubectl never dumps one into a List."""
    return [
        d
        for p in fixture_files("bad")
        for d in yaml.safe_load_all(p.read_text(encoding="utf-8"))
        if isinstance(d, dict) and "kind" in d
    ]


def _blamed(text: str, line: int) -> str:
    return text.splitlines()[line - 1]


@pytest.mark.parametrize("layout", ["list", "array"])
def test_json_and_yaml_of_the_same_objects_give_the_same_findings(
    tmp_path: Path, layout: str
) -> None:
    docs = _docs()
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    dump: Any = {"apiVersion": "v1", "kind": "List", "items": docs} if layout == "list" else docs
    json_text = json.dumps(dump, indent=4)  # kubectl's layout
    (tmp_path / "all.json").write_text(json_text)
    via_yaml = evaluate(load_paths([str(tmp_path / "all.yaml")]))
    via_json = evaluate(load_paths([str(tmp_path / "all.json")]))
    assert len(via_yaml.findings) > 50
    assert sorted((f.rule, f.resource, f.message) for f in via_json.findings) == sorted(
        (f.rule, f.resource, f.message) for f in via_yaml.findings
    )
    assert via_json.not_evaluated == via_yaml.not_evaluated
    yaml_lines = (tmp_path / "all.yaml").read_text().splitlines()
    by_key = {(f.rule, f.resource, f.message): f for f in via_json.findings}
    moved = 0
    for f in via_yaml.findings:
        j = by_key[(f.rule, f.resource, f.message)]
        assert f.line and j.line and j.file == str(tmp_path / "all.json")
        # The same field blamed: a list item starts the JSON line, or the YAML line's key
        # is on it.
        blamed, there = yaml_lines[f.line - 1].strip(), _blamed(json_text, j.line).strip()
        if blamed.startswith("- "):
            assert there[:1] in ("{", "[", '"') or there[:1].isdigit(), (f, j)
        else:
            assert there.startswith(f'"{blamed.split(":", 1)[0]}"'), (f, j)
        moved += j.line != f.line
    assert moved  # the JSON layout is not the YAML one: lines were found, not copied


def test_list_items_start_on_their_own_line() -> None:
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}} for i in range(3)]
    text = json.dumps({"kind": "List", "apiVersion": "v1", "items": pods}, indent=2)
    objs = load_text(text, "dump.json")
    assert [o.name for o in objs] == ["p0", "p1", "p2"]
    for obj in objs:
        assert obj.line is not None and _blamed(text, obj.line).strip() == "{"
        name_line = obj.line_of(("metadata", "name"))
        assert name_line is not None and f'"{obj.name}"' in _blamed(text, name_line)
    assert objs[0].lines is not None and ("metadata", "name") in set(objs[0].lines)


def test_kubectl_json_on_stdin_is_read_as_json() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    text = json.dumps({"kind": "List", "items": [pod, pod | {"metadata": {"name": "q"}}]}, indent=4)
    objs = load_paths(["-"], io.StringIO(text))
    assert [(o.name, o.line) for o in objs] == [("p", 4), ("q", 11)]
    # YAML flow syntax that is not JSON still reads, through the YAML loader.
    (flow,) = load_paths(["-"], io.StringIO("{kind: Pod, metadata: {name: f}}"))
    assert flow.name == "f"


def test_bad_json_keeps_its_located_errors() -> None:
    with pytest.raises(InputError, match=r"^x.json:3: invalid JSON: Expecting ',' delimiter"):
        load_text('{"kind": "List",\n "items": [{"a": 1}\n {"b": 2}]}', "x.json")
    with pytest.raises(InputError, match=r"^x.json:1: invalid JSON: Extra data"):
        load_text('{"kind": "Pod"} {}', "x.json")
    with pytest.raises(InputError, match="duplicate key 'a'"):
        load_text('{"kind": "List", "items": [{"a": 1, "a": 2}]}', "x.json")


def test_locate_finds_keys_and_items_and_nothing_else() -> None:
    text = '{"a": {"b": [10, {"c": 1}], "d": {}}, "e": []}'
    assert text[jsonio.locate(text, 0, ("a", "b")) or 0 :].startswith('"b"')
    assert text[jsonio.locate(text, 0, ("a", "b", 1, "c")) or 0 :].startswith('"c"')
    assert text[jsonio.locate(text, 0, ("e",)) or 0 :].startswith('"e"')
    for missing in (("x",), ("a", "b", 2), ("a", "d", "x"), ("e", 0), ("a", 0), ("a", "b", -1)):
        assert jsonio.locate(text, 0, missing) is None, missing


def test_lines_resumed_from_located_paths_match_a_scan_from_the_start() -> None:
    """A JSON object's lines resume from the longest path located before (issue 18): in
    any order of asking, every path, present or absent, gets the line a scan from the
    object's start gives."""
    doc = {
        "kind": "Deployment",
        "metadata": {"name": "x", "labels": {"a": "1"}},
        "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b", "x": []}]}}},
    }
    text = json.dumps({"kind": "List", "items": [{"kind": "Pod"}, doc]}, indent=4)
    (obj,) = [o for o in load_text(text, "x.json") if o.kind == "Deployment"]
    containers = ("spec", "template", "spec", "containers")
    paths = [
        (*containers, 1, "x"),
        (*containers, 1, "name"),
        (*containers, 0),
        ("metadata", "labels", "a"),
        (*containers, 2),  # absent item
        (*containers, 1, "x", 0),  # inside an empty list
        ("metadata", "nope", "deeper"),  # under an absent key
        ("metadata",),
        (*containers, 1, "x"),  # again, from the cache
    ]
    start = jsonio.locate(text, 0, ("items", 1))  # an item's offset is its value's
    assert start is not None
    assert obj.lines is not None
    for path in paths:
        at = jsonio.locate(text, start, path)
        expected = None if at is None else text.count("\n", 0, at) + 1
        assert obj.lines.get(path) == expected, path
    assert obj.lines.get(("metadata", "labels", "a")) == _line_of(text, '"a": "1"')


def _line_of(text: str, needle: str) -> int:
    return text.count("\n", 0, text.index(needle)) + 1


_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
_keys = st.sampled_from(["a", "b", "spec", 'q"uote', "back\\slash", "é", "\u2028", "a b"])
_tree = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, sub in value.items():
            found += _paths(sub, (*path, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            found += _paths(sub, (*path, index))
    return found


@settings(max_examples=200, deadline=None)
@given(
    value=st.dictionaries(_keys, _tree, max_size=5),
    indent=st.sampled_from([None, 0, 2, 4]),
    ascii_only=st.booleans(),
)
def test_locate_points_at_every_key_and_item_in_any_layout(
    value: dict[str, Any], indent: int | None, ascii_only: bool
) -> None:
    """Each key and item of any JSON value, in any layout (escaped keys included), is found
    where its text starts, and its value offset reads back that value; a path that is not
    there is not found."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    decoder = json.JSONDecoder()
    for path in _paths(value)[1:]:
        at = jsonio.locate(text, 0, path)
        assert at is not None, path
        step = path[-1]
        if isinstance(step, str):
            assert jsonio.scanstring(text, at + 1)[0] == step
        held: Any = value
        for part in path:
            held = held[part]
        parent = jsonio.locate(text, 0, path[:-1]) if len(path) > 1 else 0
        assert parent is not None
        pos = 0
        for part in path[:-1]:
            hit = jsonio.locate_step(text, pos, part)
            assert hit is not None
            pos = hit[1]
        found = jsonio.locate_step(text, pos, step)
        assert found is not None and found[0] == at
        assert decoder.raw_decode(text, found[1])[0] == held
        assert jsonio.locate(text, 0, (*path[:-1], "missing")) is None
