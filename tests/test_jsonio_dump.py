"""``jsonio.dump_indented`` writes exactly what ``json.dump(..., indent=2)`` writes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustrata.core.jsonio import dump_indented


class Text(str):
    """A str subclass: json encodes it as its text; the C paths take exact types only."""


VALUES: list[Any] = [
    {},
    [],
    "plain",
    7,
    {"findings": [], "not_evaluated": [{}]},
    {"a": [1, 2.5, -0.0, None, True, False, 'é\n"\\ \u2028 \x00'], "b": {"c": {"d": [[]]}}},
    [{"rule": "K001", "message": "x" * 300}, ("tuple", 1)],
    {"nan": float("nan"), "inf": float("inf"), "big": 10**30},
    # Records with the same keys and str values (a report): laid out by str.join.
    {"findings": [{"rule": "K001", "fix": "a}\n{b"}, {"rule": "K002", "fix": "a}\n{b"}] * 5},
    # The same keys in another order, a missing key, a non-str value: the C records path.
    [{"a": "1", "b": "2"}, {"b": "2", "a": "1"}, {"a": "x"}],
    [{"a": "1", "n": 2, "f": -1.5, "t": True, "z": None}] * 4,
    [{"a": Text("}")}, {"a": "}"}],
    # Not records: an empty one, a nested value, a list among them.
    [{"a": "1"}, {}],
    [{"a": "1"}, {"a": {"b": "}"}}, {"a": []}],
    [{"a": "1"}, ["b"], "c"],
    {"flat": {"a": 1, "b": "}", "c": None, "d": True}, "scalars": ("x", 1, 2.0, None, "]")},
    {"small": {"a": 1}, "few": [1, "}"], "ints": [True, 0, -(10**20)], "f": 1e300},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("indent", [2, 4])
def test_same_bytes_as_json_dump(value: Any, indent: int) -> None:
    ours, theirs = io.StringIO(), io.StringIO()
    dump_indented(value, ours, indent=indent, chunk=3)
    json.dump(value, theirs, indent=indent)
    assert ours.getvalue() == theirs.getvalue()


@pytest.mark.parametrize("value", [{1: "int key"}, {"a": object()}, [b"bytes"]])
def test_refuses_what_is_not_plain_json(value: Any) -> None:
    with pytest.raises(TypeError):
        dump_indented(value, io.StringIO())


_scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "d", "}", "\n"]), inner, max_size=6)
    ),
    max_leaves=24,
)


@settings(max_examples=300, deadline=None)
@given(
    value=_json
    | st.lists(st.dictionaries(st.sampled_from(["a", "b"]), _scalar, max_size=2), max_size=6),
    indent=st.sampled_from([0, 1, 2]),
    chunk=st.sampled_from([1, 3, 8192]),
)
def test_same_bytes_as_json_dump_for_any_json(value: Any, indent: int, chunk: int) -> None:
    ours, theirs = io.StringIO(), io.StringIO()
    dump_indented(value, ours, indent=indent, chunk=chunk)
    json.dump(value, theirs, indent=indent)
    assert ours.getvalue() == theirs.getvalue()
