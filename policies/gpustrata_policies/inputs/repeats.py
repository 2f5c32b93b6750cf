"""Documents of one YAML file, and items of one JSON array, that repeat an earlier one
but for their namespace.

A cluster with one chart per tenant, dumped to one file, holds the same document once per
namespace: only the ``namespace:`` line of its metadata differs. Such a document is still
parsed by libyaml (its syntax is checked as every other's), but its value is not built
again: it is the earlier document's, with its own ``metadata`` and namespace, and its lines
are the earlier document's moved to where it starts (issue 35: building values and lines
is about 40 % of reading a file, and the copies' values were most of its memory).

A document repeats another when their texts are equal once the value of each line
``namespace: <name>`` is left out, when those values are equal too but for the one that is
the earlier document's ``metadata.namespace`` (found by its line), and when the new name
reads as a string (not ``yes``, ``null`` or ``0x10``). Any other difference (a DNS name that
names the namespace, a flow-style ``metadata``, a quoted name) makes the texts differ, and
the document is built as usual. Files with YAML directives (``%TAG``) are read without
this (a directive outside a document's text changes what it means).

A JSON item (:class:`RepeatedItems`) repeats another when their texts are equal but for
the name in the earlier item's ``"namespace": "<name>"``, which is its
``metadata.namespace``: its value is then not decoded at all, and its lines are the
earlier item's moved (:meth:`~gpustrata_policies.inputs.manifests._JsonLines.moved`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpustrata.core.jsonio import locate

__all__ = ["RepeatedDocuments", "RepeatedItems"]

_NAMESPACE_LINE: Final = re.compile(
    r"^[ \t]*namespace:[ \t]*([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)[ \t]*(?:#[^\n]*)?$",
    re.MULTILINE,
)
"""A block-style ``namespace: <name>`` line, the name a plain DNS label."""
_DIRECTIVE: Final = re.compile(r"^%", re.MULTILINE)
_NAME: Final = r"([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)"
_NAMESPACE_KEY: Final = re.compile(rf'"namespace"[ \t\n\r]*:[ \t\n\r]*"{_NAME}"')
"""A JSON ``"namespace": "<name>"``, the name a plain DNS label (no escape)."""
_KEY_CHARS: Final = 128
"""The most characters of :data:`_NAMESPACE_KEY` after the text before the name."""


@dataclass(frozen=True, slots=True)
class _Seen:
    data: dict[str, Any]
    lines: Any
    line: int
    names: tuple[str, ...]
    at: int
    """Which of *names* is ``metadata.namespace``."""


class RepeatedDocuments:
    """The documents of one file that a later one may repeat (see the module)."""

    __slots__ = ("_is_str", "_on", "_seen")

    def __init__(self, text: str, is_str: Callable[[str], bool]) -> None:
        """*is_str* says whether a plain scalar reads as a string (the loader's resolver)."""
        self._on = "namespace:" in text and _DIRECTIVE.search(text) is None
        self._seen: dict[str, _Seen] = {}
        self._is_str = is_str

    @staticmethod
    def _masked(doc: str) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
        pieces: list[str] = []
        names: list[str] = []
        starts: list[int] = []
        at = 0
        for match in _NAMESPACE_LINE.finditer(doc):
            pieces.append(doc[at : match.start(1)])
            names.append(match.group(1))
            starts.append(match.start(1))
            at = match.end(1)
        pieces.append(doc[at:])
        return "\0".join(pieces), tuple(names), tuple(starts)

    def repeat(
        self, doc: str, line: int, moved: Callable[[Any, int], Any]
    ) -> tuple[dict[str, Any], Any] | None:
        """The value and lines of *doc* (its text, starting at *line*) where it repeats an
        earlier document, else ``None``; *moved(lines, by)* shifts an earlier document's
        lines by *by*."""
        if not self._on or "namespace:" not in doc:
            return None
        key, names, _ = self._masked(doc)
        seen = self._seen.get(key)
        if seen is None or len(names) != len(seen.names):
            return None
        name = names[seen.at]
        if any(
            a != b for i, (a, b) in enumerate(zip(names, seen.names, strict=True)) if i != seen.at
        ):
            return None
        if not self._is_str(name):
            return None
        data = dict(seen.data)
        data["metadata"] = {**seen.data["metadata"], "namespace": name}
        return data, moved(seen.lines, line - seen.line)

    def remember(self, doc: str, line: int, data: Any, lines: Mapping[Any, int]) -> None:
        """Keep *doc* (its text, starting at *line*, read as *data* with *lines*) for the
        documents that may repeat it: one object (not a list, a template or chart values)
        whose ``metadata.namespace`` is written on a line of its own."""
        if not self._on or "namespace:" not in doc:
            return
        namespace = _one_object(data)
        if namespace is None:
            return
        key, names, starts = self._masked(doc)
        if key in self._seen:
            return
        own = [i for i, n in enumerate(names) if n == namespace]
        if len(own) != 1:
            return  # the name on another namespace line too: which is which is not known
        at = own[0]
        if lines.get(("metadata", "namespace")) != line + doc.count("\n", 0, starts[at]):
            return  # that line is not metadata's (a flow-style metadata, say)
        self._seen[key] = _Seen(data, lines, line, names, at)


def _one_object(data: Any) -> str | None:
    """*data*'s ``metadata.namespace`` where it is one object (not a list, a template or
    chart values) stating one, else ``None``."""
    if type(data) is not dict:
        return None
    kind = data.get("kind")
    meta = data.get("metadata")
    if type(kind) is not str or kind.endswith("List") or kind == "Template":
        return None
    if type(meta) is not dict:
        return None
    namespace = meta.get("namespace")
    return namespace if type(namespace) is str else None


@dataclass(frozen=True, slots=True)
class _Item:
    data: dict[str, Any]
    suffix: str
    """Its text after its namespace's name."""
    index: int


class RepeatedItems:
    """The items of one JSON array that a later one may repeat (see the module): the
    :class:`~gpustrata.core.jsonio.ItemReader` of :func:`~gpustrata.core.jsonio.
    loads_located`. :attr:`of` maps each repeating item's index to the index of the item
    it repeats.

    Why a repeat's value is exact: the ``"namespace": "<name>"`` found first in the earlier
    item is its ``metadata.namespace`` (where the text holds no backslash, every token is
    written as it reads, so a name found once in it is that one; else its place is
    checked with :func:`~gpustrata.core.jsonio.locate`); the later text is the same
    characters but for that name, and a name of ``[-a-z0-9]`` changes no token's bounds,
    so the later item decodes to the same value with that one string changed (its syntax,
    keys and integers are the earlier item's, which were checked)."""

    __slots__ = ("_seen", "_window", "of")

    def __init__(self) -> None:
        self._seen: dict[str, list[_Item]] = {}  # the text before the name -> items
        self._window = 0  # the longest such text, plus the key's own characters
        self.of: dict[int, int] = {}

    def read(self, text: str, start: int, index: int) -> tuple[Any, int] | None:
        """Item *index* at *start* where it repeats an earlier item: its value and end."""
        if not self._seen:
            return None
        key = _NAMESPACE_KEY.search(text, start, start + self._window)
        if key is None:
            return None
        items = self._seen.get(text[start : key.start(1)])
        if items is None:
            return None
        after = key.end(1)
        for item in items:
            if text.startswith(item.suffix, after):
                self.of[index] = item.index
                data = dict(item.data)
                data["metadata"] = {**item.data["metadata"], "namespace": key.group(1)}
                return data, after + len(item.suffix)
        return None

    def remember(self, text: str, start: int, end: int, index: int, value: Any) -> None:
        """Keep item *index* (``text[start:end]``, decoded as *value*) for the items that
        may repeat it, where its text can be matched as the class says."""
        name = _one_object(value)
        if name is None:
            return
        key = _NAMESPACE_KEY.search(text, start, end)
        if key is None or key.group(1) != name:
            return
        if (text.find("\\", start, end) >= 0 or text.count(name, start, end) != 1) and (
            locate(text, start, ("metadata", "namespace")) != key.start()
        ):
            return  # that "namespace" is not metadata's
        prefix, suffix = text[start : key.start(1)], text[key.end(1) : end]
        items = self._seen.setdefault(prefix, [])
        if any(item.suffix == suffix for item in items):
            return
        items.append(_Item(value, suffix, index))
        self._window = max(self._window, len(prefix) + _KEY_CHARS)
