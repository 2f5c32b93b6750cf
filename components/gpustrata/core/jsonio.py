"""Strict JSON for untrusted files: repeated keys and unreadably long integers refused.

``json.loads`` keeps the last of two equal keys silently (YAML input refuses them) and
raises a bare ``ValueError`` for an integer over Python's digit limit. :func:`loads`
raises :class:`JsonShapeError` with the 1-based line of the offending text instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpustrata.core.yamlguard import MAX_INT_DIGITS

__all__ = ["JsonShapeError", "loads"]


class JsonShapeError(ValueError):
    """JSON that parses but cannot be used as is; ``line`` is 1-based (or ``None``)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _LongInt(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInt
    return int(text)


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def loads(text: str) -> Any:
    """Parse *text* as JSON; :class:`json.JSONDecodeError` for bad syntax, as ``json.loads``."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_int=_int)
    except _Duplicate as dup:
        # The hook sees no position: the key's second spelling as a key is the best guess.
        spelled = [m.start() for m in re.finditer(re.escape(json.dumps(dup.key)) + r"\s*:", text)]
        line = _line(text, spelled[1]) if len(spelled) > 1 else None
        shown = dup.key if len(dup.key) <= 60 else dup.key[:57] + "..."
        raise JsonShapeError(
            f"duplicate key {shown!r} in one object: tools disagree on which value wins "
            "(YAML refuses it); keep one",
            line,
        ) from None
    except _LongInt:
        match = re.search(rf"\d{{{MAX_INT_DIGITS + 1},}}", text)
        raise JsonShapeError(
            f"an integer of more than {MAX_INT_DIGITS} digits (the most Python reads); "
            "no count or size is that large: write the intended number",
            _line(text, match.start()) if match else None,
        ) from None
