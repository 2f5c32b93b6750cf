"""The one Helm values merge (gpustrata.core.helmmerge) on its two Helm code paths:
``mergeMaps`` (values files in order, a null kept) and ``coalesce.go`` (a null removes)."""

from __future__ import annotations

import copy

import pytest

from gpustrata.core.helmmerge import merge_helm_values

BASE = {"a": {"x": 1, "y": {"deep": 2, "keep": 3}}, "b": [1, 2], "c": "s", "d": {"m": 1}}
OVER = {"a": {"y": {"deep": None}, "z": 4}, "b": [3], "c": {"now": "map"}, "d": 5}


def test_maps_merge_key_by_key_and_anything_else_replaces() -> None:
    merged = merge_helm_values(BASE, OVER)
    assert merged == {
        "a": {"x": 1, "y": {"deep": None, "keep": 3}, "z": 4},
        "b": [3],  # lists are replaced, never appended
        "c": {"now": "map"},
        "d": 5,
    }


def test_null_removes_the_key_when_coalescing_over_chart_values() -> None:
    merged = merge_helm_values(BASE, OVER, null_removes=True)
    assert merged["a"]["y"] == {"keep": 3}
    top = merge_helm_values(BASE, {"a": None, "e": None}, null_removes=True)
    assert set(top) == {"b", "c", "d"}
    assert merge_helm_values(BASE, {"a": None})["a"] is None  # mergeMaps keeps it


@pytest.mark.parametrize("null_removes", [False, True])
def test_inputs_are_left_unchanged(null_removes: bool) -> None:
    base, over = copy.deepcopy(BASE), copy.deepcopy(OVER)
    merge_helm_values(base, over, null_removes=null_removes)
    assert base == BASE and over == OVER
