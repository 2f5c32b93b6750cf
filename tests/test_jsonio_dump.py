"""``jsonio.dump_indented`` writes exactly what ``json.dump(..., indent=2)`` writes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from gpustrata.core.jsonio import dump_indented

VALUES: list[Any] = [
    {},
    [],
    "plain",
    7,
    {"findings": [], "not_evaluated": [{}]},
    {"a": [1, 2.5, -0.0, None, True, False, 'é\n"\\ \u2028 \x00'], "b": {"c": {"d": [[]]}}},
    [{"rule": "K001", "message": "x" * 300}, ("tuple", 1)],
    {"nan": float("nan"), "inf": float("inf"), "big": 10**30},
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
