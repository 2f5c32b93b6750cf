"""Strict JSON for untrusted files: repeated keys and unreadably long integers refused.

``json.loads`` keeps the last of two equal keys silently (YAML input refuses them) and
raises a bare ``ValueError`` for an integer over Python's digit limit. :func:`loads`
raises :class:`JsonShapeError` with the 1-based line of the offending text instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from itertools import chain, cycle, islice
from typing import Any, Protocol

from gpustrata.core.terminal import clipped
from gpustrata.core.yamlguard import MAX_INT_DIGITS

__all__ = ["ItemReader", "JsonShapeError", "loads", "loads_located", "locate", "locate_step"]


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
    out = dict(pairs)  # in C; a repeated key shows as a shorter dict
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInt
    return int(text)


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def loads(text: str) -> Any:
    """Parse *text* as JSON; :class:`json.JSONDecodeError` for bad syntax, as ``json.loads``."""
    return _strict(text, lambda: json.loads(text, object_pairs_hook=_pairs, parse_int=_int))


# The C string scanner the json module decodes keys with (not in its typed interface).
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_STRICT = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int)
_PLAIN = json.JSONDecoder()
# raw_decode's C scanner without its Python wrapper: skips a valid value (its end).
_skip: Callable[[str, int], tuple[Any, int]] = _PLAIN.scan_once  # type: ignore[attr-defined]
_WS = re.compile(r"[ \t\n\r]*")
_KEY = re.compile(r'[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:[ \t\n\r]*')
_COMMA = re.compile(r"[ \t\n\r]*,")


class ItemReader(Protocol):
    """What may read an item of :func:`loads_located`'s array without decoding it (an
    item that repeats an earlier one), and is shown each item that was decoded."""

    def read(self, text: str, start: int, index: int) -> tuple[Any, int] | None:
        """Item *index* starting at *start*: its value and end, or ``None`` to decode it.
        The value must be what decoding ``text[start:end]`` strictly gives."""

    def remember(self, text: str, start: int, end: int, index: int, value: Any) -> None:
        """Item *index*, ``text[start:end]``, was decoded as *value*."""


def loads_located(text: str, reader: ItemReader | None = None) -> tuple[Any, int, list[int] | None]:
    """:func:`loads`, plus where things start: the offset of the top-level value, and of
    each item of a top-level array or of a top-level object's ``items`` array (a
    ``kind: List``, as ``kubectl get -o json`` prints), else ``None``.

    One pass: the items are decoded one at a time where they start, each offered to
    *reader* first (:class:`ItemReader`).
    """
    located: tuple[Any, int, list[int] | None] = _strict(text, lambda: _located(text, reader))
    return located


def _located(text: str, reader: ItemReader | None) -> tuple[Any, int, list[int] | None]:
    start = _WS.match(text, 0).end()  # type: ignore[union-attr]
    starts: list[int] | None = None
    data: Any
    if text.startswith("[", start):
        data, end, starts = _array(text, start, reader)
    elif text.startswith("{", start):
        data, end, starts = _object(text, start, reader)
    else:
        data, end = _STRICT.raw_decode(text, start)
    end = _WS.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return data, start, starts


def _array(text: str, pos: int, reader: ItemReader | None) -> tuple[list[Any], int, list[int]]:
    """The array at *pos* (``[``), its end, and where each item starts."""
    items: list[Any] = []
    starts: list[int] = []
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return items, pos + 1, starts
    while True:
        starts.append(pos)
        found = reader.read(text, pos, len(items)) if reader is not None else None
        if found is not None:
            item, pos = found
        else:
            item, end = _STRICT.raw_decode(text, pos)
            if reader is not None:
                reader.remember(text, pos, end, len(items), item)
            pos = end
        items.append(item)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            return items, pos + 1, starts
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


def _object(
    text: str, pos: int, reader: ItemReader | None
) -> tuple[dict[str, Any], int, list[int] | None]:
    """The object at *pos* (``{``), its end, and where its ``items`` array's items start."""
    pairs: list[tuple[str, Any]] = []
    starts: list[int] | None = None
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        return {}, pos + 1, None
    while True:
        if not text.startswith('"', pos):
            raise json.JSONDecodeError(
                "Expecting property name enclosed in double quotes", text, pos
            )
        key, pos = scanstring(text, pos + 1)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        if key == "items" and text.startswith("[", pos):
            value, pos, starts = _array(text, pos, reader)
        else:
            value, pos = _STRICT.raw_decode(text, pos)
        pairs.append((key, value))
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("}", pos):
            return _pairs(pairs), pos + 1, starts
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]


def locate(text: str, start: int, path: tuple[str | int, ...]) -> int | None:
    """Offset of the last key (a ``str`` step) or item (an ``int`` step) of *path* inside
    the valid JSON value at *start*; ``None`` when the path is not there (or is empty).

    Skips what is not on the path with the C decoder, so finding a finding's line costs
    one scan of the object, paid only for findings.
    """
    found: tuple[int, int] | None = None
    pos = start
    for step in path:
        found = locate_step(text, pos, step)
        if found is None:
            return None
        pos = found[1]
    return found[0] if found is not None else None


def locate_step(text: str, pos: int, step: str | int) -> tuple[int, int] | None:
    """One step of :func:`locate`: in the valid JSON value at *pos*, the offsets of key
    *step* (a ``str``) or item *step* (an ``int``) and of its value; ``None`` when the
    value is not an object / array holding it. A caller that keeps the value offsets of
    the paths it located resumes from the longest of them instead of the object's start."""
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if isinstance(step, str):
        if not text.startswith("{", pos):
            return None
        pos += 1
        while True:
            # A key without escapes and its colon in one C match (most keys); else the
            # string scanner, or the end of the object.
            found = _KEY.match(text, pos)
            if found is not None:
                key, at, pos = found.group(1), found.start(1) - 1, found.end()
            else:
                at = _WS.match(text, pos).end()  # type: ignore[union-attr]
                if not text.startswith('"', at):
                    return None  # "}": an empty object
                key, pos = scanstring(text, at + 1)
                pos = _WS.match(text, pos).end() + 1  # type: ignore[union-attr]  # the ":"
                pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            if key == step:
                return at, pos
            comma = _COMMA.match(text, _skip(text, pos)[1])
            if comma is None:
                return None  # "}": the key is not there
            pos = comma.end()
    if not text.startswith("[", pos) or step < 0:
        return None
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    for _ in range(step):
        if text.startswith("]", pos):
            return None
        pos = _PLAIN.raw_decode(text, pos)[1]
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(",", pos):
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return None
    return pos, pos


def _strict(text: str, parse: Any) -> Any:
    try:
        return parse()
    except _Duplicate as dup:
        # The hook sees no position: the key's second spelling as a key is the best guess.
        spelled = [m.start() for m in re.finditer(re.escape(json.dumps(dup.key)) + r"\s*:", text)]
        line = _line(text, spelled[1]) if len(spelled) > 1 else None
        shown = clipped(dup.key)
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


_ENCODE_LEAF = json.JSONEncoder().encode  # json.dump's defaults: ensure_ascii, allow_nan
_ENCODE_STR: Callable[[str], str] = json.encoder.encode_basestring_ascii
_SCALARS = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})
_DICT = frozenset({dict})
_C_FROM = 4
"""Items from which a container of scalars goes to the C encoder: a call of it costs a
few microseconds, the Python walk about one per item (a SARIF report's many one-key
dicts are walked)."""
_LITERALS: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,  # as json's encoders write an int
    bool: lambda b: "true" if b else "false",
    type(None): lambda _: "null",
}


def _not_serializable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@cache
def _c_encoder(item_separator: str) -> Callable[[Any, int], list[str]]:
    """json's C encoder with json.dump's defaults (ensure_ascii, allow_nan, ``": "``) and
    *item_separator*: without ``indent`` it writes one separator between the items of
    every container, so given the indented separator of one depth it lays out a
    container of scalars exactly as the indenting encoder does, less the breaks after
    its opening and before its closing bracket. (json's own indent path is pure Python.)"""
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]
    encoder: Callable[[Any, int], list[str]] = make(
        None, _not_serializable, _ENCODE_STR, None, ": ", item_separator, False, False, True
    )
    return encoder


def _scalars(values: Any) -> bool:
    """Are all of *values* plain JSON scalars (exact types, so no subclass is encoded
    differently than json's indenting encoder would)? The check runs in C."""
    return _SCALARS.issuperset(map(type, values))


def _flat_records(items: list[Any] | tuple[Any, ...]) -> bool:
    """Is *items* non-empty dicts of str keys and scalar values only? Every test is a C
    loop over the items, their keys or their values."""
    return (
        _DICT.issuperset(map(type, items))
        and all(items)
        and _STR.issuperset(map(type, chain.from_iterable(items)))
        and _scalars(chain.from_iterable(map(dict.values, items)))
    )


def _same_records(items: list[Any] | tuple[Any, ...]) -> tuple[list[str], list[str]] | None:
    """The keys and all the values, record after record, of *items* when they are dicts
    with the same str keys in the same order and str values only (a report's findings);
    else ``None``. C loops only: no Python code runs per record."""
    if not _DICT.issuperset(map(type, items)):
        return None
    keys = list(items[0])
    if not keys or not _STR.issuperset(map(type, keys)):
        return None
    if list(chain.from_iterable(items)) != keys * len(items):
        return None
    values = list(chain.from_iterable(map(dict.values, items)))
    return (keys, values) if _STR.issuperset(map(type, values)) else None


def dump_indented(value: Any, out: Any, indent: int = 2, chunk: int = 8192) -> None:
    """``json.dump(value, out, indent=indent)``, byte for byte, for values made of
    str-keyed dicts, lists, tuples and JSON scalars (a report), at about the speed of
    json's compact C encoder or better.

    json writes indented output with its pure-Python encoder. This walk keeps the layout
    and leaves the rest to C: a container of scalars goes to the C encoder with the item
    separator of its depth (``,`` + newline + indent; only the breaks next to its
    brackets are added here); a list of records with the same keys and str values (a
    report's findings) is laid out by ``str.join`` from each distinct string encoded
    once; other lists of scalar-only dicts go to the C encoder a few hundred at a time,
    whose ``}`` + separator + ``{`` between two records becomes the break of their
    depth (a newline inside a string is escaped, so a raw newline in C's output is
    always a separator). Written to *out* in pieces of about *chunk* parts (a large
    report is tens of MB); like ``json.dump`` it raises ``TypeError`` on anything else,
    after writing what came before it.
    """
    parts: list[str] = []
    step = " " * indent

    def flush() -> None:
        out.write("".join(parts))
        parts.clear()

    def same_records(keys: list[str], values: list[str], inner: str) -> None:
        # Each string is encoded once (a report repeats its rule names, fixes and
        # reasons), then "".join lays the encoded values between the fixed pieces that
        # precede them: C loops (zip, cycle, map), no Python code per record.
        deeper = inner + step
        unique = dict.fromkeys(values)
        encoded = dict(zip(unique, map(_ENCODE_STR, unique), strict=True)).__getitem__
        heads = ["," + deeper + _ENCODE_STR(key) + ": " for key in keys]
        heads[0] = inner + "}," + inner + "{" + heads[0][1:]
        parts.append("[" + inner + "{" + deeper + _ENCODE_STR(keys[0]) + ": ")
        piece = max(1, chunk // (2 * len(keys))) * len(keys)
        for at in range(0, len(values), piece):
            laid = chain.from_iterable(zip(cycle(heads), map(encoded, values[at : at + piece])))
            parts.append("".join(islice(laid, 1, None) if at == 0 else laid))
            flush()

    def records(items: list[Any] | tuple[Any, ...], inner: str) -> None:
        # The C encoder with the separator of the records' items writes "," + separator
        # between records too: "}," + separator + "{" becomes the break of their depth.
        deeper = inner + step
        encode = _c_encoder("," + deeper)
        between, spread = "}," + deeper + "{", inner + "}," + inner + "{" + deeper
        parts.append("[" + inner + "{" + deeper)
        piece = max(1, chunk // 16)
        for at in range(0, len(items), piece):
            if at:
                parts.append(spread)
            text = "".join(encode(items[at : at + piece], 0))
            parts.append(text[2:-2].replace(between, spread))  # less "[{" and "}]"
            flush()

    def walk(item: Any, pad: str) -> None:
        if isinstance(item, str):
            parts.append(_ENCODE_STR(item))
        elif isinstance(item, dict):
            if not item:
                parts.append("{}")
                return
            inner = pad + step
            if (
                len(item) >= _C_FROM
                and _SCALARS.issuperset(map(type, item.values()))
                and _STR.issuperset(map(type, item))
            ):
                text = "".join(_c_encoder("," + inner)(item, 0))
                parts.append("{" + inner + text[1:-1] + pad + "}")
                return
            sep = "{" + inner
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise TypeError(f"keys must be str, not {type(key).__name__}")
                parts.append(sep)
                parts.append(_ENCODE_STR(key))
                parts.append(": ")
                walk(sub, inner)
                sep = "," + inner
            parts.append(pad + "}")
            if len(parts) > chunk:
                flush()
        elif isinstance(item, list | tuple):
            if not item:
                parts.append("[]")
                return
            inner = pad + step
            if len(item) >= _C_FROM and _SCALARS.issuperset(map(type, item)):
                text = "".join(_c_encoder("," + inner)(item, 0))
                parts.append("[" + inner + text[1:-1] + pad + "]")
                return
            first = item[0]  # records only if the first is one: a cheap test for the rest
            if type(first) is dict and first and _scalars(first.values()):
                same = _same_records(item)
                if same is not None:
                    same_records(*same, inner)
                    parts.append(inner + "}" + pad + "]")
                    return
                if _flat_records(item):
                    records(item, inner)
                    parts.append(inner + "}" + pad + "]")
                    return
            sep = "[" + inner
            for sub in item:
                parts.append(sep)
                walk(sub, inner)
                sep = "," + inner
            parts.append(pad + "]")
        elif type(item) in _LITERALS:  # what json writes for them, without its Python encode()
            parts.append(_LITERALS[type(item)](item))
        elif isinstance(item, bool | int | float):
            parts.append(_ENCODE_LEAF(item))
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    walk(value, "\n")
    flush()
