"""Documents of one YAML file, and items of one JSON array, that repeat an earlier one
but for their namespace.

A cluster with one chart per tenant, dumped to one file, holds the same document once per
namespace: only the ``namespace:`` line of its metadata differs. Such a document is not
read again: its value is the earlier document's, with its own ``metadata`` and namespace,
and its lines are the earlier document's moved to where it starts (issue 35: composing,
building values and lines was most of reading a file, and the copies' values were most of
its memory).

A YAML document (:class:`RepeatedDocuments`) repeats another when the texts between their
``---`` lines are equal, from their first line of content, once the value of each line
``namespace: <name>`` is left out, when those values are equal too but for the one that is
the earlier document's ``metadata.namespace`` (found by its line), and when the new name
reads as a string (not ``yes``, ``null`` or ``0x10``). Its syntax is the earlier
document's, which libyaml read: a name of ``[-a-z0-9]`` in a plain scalar changes no
token. Any other difference (a DNS name that names the namespace, a flow-style
``metadata``, a quoted name) makes the texts differ, and the document is read as usual.
Files with YAML directives (``%TAG``), a ``...`` marker, content after ``---`` or line
breaks other than ``\n`` and ``\r\n`` are read without this.

A JSON item (:class:`RepeatedItems`) repeats another when their texts are equal but for
the name in the earlier item's ``"namespace": "<name>"``, which is its
``metadata.namespace``: its value is then not decoded at all, and its lines are the
earlier item's moved (:meth:`~gpustrata_policies.inputs.manifests._JsonLines.moved`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from gpustrata.core.jsonio import locate

__all__ = ["RepeatedDocuments", "RepeatedItems", "Replan"]

_NAME: Final = r"([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)"
"""A namespace name as a plain DNS label."""
_NAMESPACE_VALUE: Final = re.compile(rf"namespace:[ \t]*{_NAME}[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
"""A block-style ``namespace: <name>`` (found by its text; that it starts its line, after
indentation, is checked apart)."""
_NAMESPACE_KEY: Final = re.compile(rf'"namespace"[ \t\n\r]*:[ \t\n\r]*"{_NAME}"')
"""A JSON ``"namespace": "<name>"``, the name a plain DNS label (no escape)."""
_HEAD: Final = 48
"""The characters after the name that pick an item's candidates."""
_CANDIDATES: Final = 64
"""The most earlier items kept per text before the name (each is compared on a match)."""
_KEY_CHARS: Final = 128
"""The most characters of :data:`_NAMESPACE_KEY` after the text before the name."""
_MARKER: Final = re.compile(r"\n(?:---|\.\.\.)")
_DASHES_REST: Final = re.compile(r"[ \t]*(?:#[^\n]*)?")
"""What may follow ``---`` on its line where an explicit document starts."""
_LEADING: Final = re.compile(r"(?:[ \t]*(?:#[^\n]*)?\n)*")
"""Blank and comment lines (and the rest of a ``---`` line)."""
_LONE_CR: Final = re.compile("\r(?!\n)")


def _has_directive(text: str) -> bool:
    """Does *text* hold a line starting with ``%`` (a YAML directive, or an error)?"""
    return text.startswith("%") or "\n%" in text


def _other_breaks(text: str) -> bool:
    """Does *text* hold a line break libyaml counts besides ``\n`` and ``\r\n``? A blanked
    text keeps only ``\n``, so lines would move."""
    return any(c in text for c in "\x85\u2028\u2029") or (
        "\r" in text and _LONE_CR.search(text) is not None
    )


def _markers(text: str) -> list[int] | None:
    """Where each ``---`` line starts (an explicit document); ``None`` where a line starts
    with another document marker (``...``, ``---`` with content or ``\r`` after it):
    where documents start is then not planned."""
    found = [m.start() + 1 for m in _MARKER.finditer(text)]
    if text.startswith(("---", "...")):
        found.insert(0, 0)
    out: list[int] = []
    for at in found:
        after = text[at + 3 : at + 4]
        if after and after not in " \t\n":
            if after in "\r\x85\u2028\u2029":
                return None  # a marker before another line break
            continue  # `----`, `...x`: a plain scalar, not a marker
        end = text.find("\n", at)
        if text.startswith("...", at) or not _DASHES_REST.fullmatch(
            text, at + 3, len(text) if end < 0 else end
        ):
            return None
        out.append(at)
    return out


_LIST_OR_TEMPLATE: Final = re.compile(
    r"kind:[ \t]*[\"']?(?:[A-Za-z0-9]*List|Template)(?:[\"' \t#\n]|$)"
)
"""The ``kind`` line of a list or a template (its objects are read apart)."""


def _one_object_text(doc: str) -> bool:
    """Does *doc* state a top-level ``kind`` that is no list nor template (chart values
    have none)? A cheap look at the text: the document's value says for sure."""
    if doc.startswith("kind:"):
        at = 0
    else:
        at = doc.find("\nkind:") + 1
        if at == 0:
            return False
    return _LIST_OR_TEMPLATE.match(doc, at) is None


@dataclass(frozen=True, slots=True)
class _Seen:
    data: dict[str, Any]
    lines: Any
    line: int
    """The document's first line."""
    index: int
    """Where the document starts in the text."""
    at: int
    """Which of its namespace lines is ``metadata.namespace``."""


@dataclass(frozen=True, slots=True)
class _Segment:
    start: int
    """Where its content starts (after blank and comment lines)."""
    end: int
    line: int
    """The line *start* is on."""
    names: tuple[str, ...]
    starts: tuple[int, ...]
    """Where each of *names* starts, from *start*."""


class Replan(Exception):
    """The document nodes libyaml gave do not fit the plan: read the file without it."""


class RepeatedDocuments:
    """The documents of one file that repeat an earlier one (see the module).

    Planned before libyaml reads the file: the text between two ``---`` lines (a segment)
    that equals an earlier segment once each ``namespace: <name>`` line's name is left out,
    and differs from it in one such name, is blanked in :attr:`text` (the text libyaml
    reads: spaces, and its newlines, so every other offset and line stays where it was),
    and its value is taken from the earlier document when libyaml gives its empty
    document (:meth:`repeat`). Where the nodes do not fit the plan (the earlier document
    turns out to be no single object, or its namespace line not its metadata's), the
    reader raises :class:`Replan` and reads the file again with ``plan=False``."""

    __slots__ = ("_is_str", "_met", "_of", "_seen", "_segments", "_starts", "text")

    def __init__(self, text: str, is_str: Callable[[str], bool], plan: bool = True) -> None:
        """*is_str* says whether a plain scalar reads as a string (the loader's resolver)."""
        self.text = text
        """What libyaml reads: the file with each planned repeat blanked."""
        self._is_str = is_str
        self._of: dict[int, int] = {}  # a blanked segment -> the segment it repeats
        self._seen: dict[int, _Seen] = {}
        self._met: set[int] = set()  # segments a document was read from
        self._segments: list[_Segment | None] = []
        self._starts: list[int] = []
        if plan and "namespace:" in text and not _has_directive(text):
            markers = None if _other_breaks(text) else _markers(text)
            if markers is not None:
                self._plan(text, markers)

    def _plan(self, text: str, markers: list[int]) -> None:
        starts = [0, *(at + 3 for at in markers)]
        ends = [*markers, len(text)]
        first: dict[str, tuple[int, _Segment]] = {}  # the first segment of each key
        pieces: list[str] = []
        kept = 0  # the text before it is in pieces
        line, counted = 1, 0
        for number, (start, end) in enumerate(zip(starts, ends, strict=True)):
            segment = text[start:end]
            if "namespace:" not in segment or not _one_object_text(segment):
                self._segments.append(None)
                continue
            # compared from its first line of content (comments and blank lines before it,
            # a Helm `# Source:` line, are left out), on which its lines are counted
            content = start + _LEADING.match(segment).end()  # type: ignore[union-attr]
            line += text.count("\n", counted, content)
            counted = content
            key, names, at = self._masked(text[content:end])
            here = _Segment(content, end, line, names, at)
            self._segments.append(here)
            earlier, before = first.setdefault(key, (number, here))
            if earlier == number:
                continue
            differ = [i for i, (a, b) in enumerate(zip(names, before.names, strict=True)) if a != b]
            if len(differ) != 1 or before.names.count(before.names[differ[0]]) != 1:
                continue  # more than the namespace differs, or which is which is not known
            if not self._is_str(names[differ[0]]):
                continue  # a name YAML 1.1 reads as no string
            self._of[number] = earlier
            newlines = segment.count("\n")  # the whole segment is blanked
            pieces += [text[kept:start], " " * (len(segment) - newlines), "\n" * newlines]
            kept = end
        if self._of:
            self.text = "".join(pieces) + text[kept:]
            self._starts = starts

    @staticmethod
    def _masked(doc: str) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
        pieces: list[str] = []
        names: list[str] = []
        starts: list[int] = []
        at = 0
        for match in _NAMESPACE_VALUE.finditer(doc):
            if doc[doc.rfind("\n", 0, match.start()) + 1 : match.start()].strip(" \t"):
                continue  # not a `namespace:` key alone on its line
            pieces.append(doc[at : match.start(1)])
            names.append(match.group(1))
            starts.append(match.start(1))
            at = match.end(1)
        pieces.append(doc[at:])
        return "\0".join(pieces), tuple(names), tuple(starts)

    def segment(self, index: int) -> int | None:
        """The planned segment the node starting at *index* is in (``None``: no plan)."""
        if not self._starts:
            return None
        return bisect.bisect_right(self._starts, index) - 1

    def blanked(self, segment: int | None) -> bool:
        """Is *segment* a planned repeat (libyaml reads it as an empty document)?"""
        return segment is not None and segment in self._of

    def check(self, taken: set[int]) -> None:
        """Every planned repeat was met once (*taken*): else :class:`Replan`."""
        if taken != self._of.keys():
            raise Replan

    def repeat(
        self, segment: int, moved: Callable[[Any, int], Any]
    ) -> tuple[dict[str, Any], Any, int, int]:
        """The value, lines, first line and start of the document blanked as *segment*,
        taken from the one it repeats; *moved(lines, by)* shifts that one's lines by
        *by*. :class:`Replan` where that one was not kept (:meth:`remember`)."""
        earlier = self._of[segment]
        seen = self._seen.get(earlier)
        here, there = self._segments[segment], self._segments[earlier]
        if seen is None or here is None or there is None:
            raise Replan
        pairs = enumerate(zip(here.names, there.names, strict=True))
        if any(a != b for i, (a, b) in pairs if i != seen.at):
            raise Replan  # another name differs than the metadata's
        data = dict(seen.data)
        data["metadata"] = {**seen.data["metadata"], "namespace": here.names[seen.at]}
        by = here.line - there.line
        return data, moved(seen.lines, by), seen.line + by, seen.index + here.start - there.start

    def remember(
        self, segment: int | None, index: int, end: int, line: int, data: Any, lines: Any
    ) -> None:
        """Keep the document read from *segment* (its node from *index* to *end*, its first
        line *line*, read as *data* with *lines*) for the segments that repeat it: one
        object (not a list, a template or chart values) whose ``metadata.namespace`` is on
        a line of its own, and the only document of its segment."""
        if segment is None:
            return
        if segment in self._met:
            self._seen.pop(segment, None)  # two documents in one segment: keep neither
            return
        self._met.add(segment)
        found = self._segments[segment]
        namespace = _one_object(data)
        if found is None or namespace is None or end > found.end:
            return
        own = [i for i, n in enumerate(found.names) if n == namespace]
        if len(own) != 1:
            return  # the name on another namespace line too: which is which is not known
        at = own[0]
        text_line = found.line + self.text.count("\n", found.start, found.start + found.starts[at])
        if lines.get(("metadata", "namespace")) != text_line:
            return  # that line is not metadata's (a flow-style metadata, say)
        self._seen[segment] = _Seen(data, lines, line, index, at)


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
    start: int
    name: int
    """Where its namespace's name starts in the text."""
    after: int
    """Where the text after the name starts."""
    end: int
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
        # (hash of the text before the name, the first characters after it) -> items
        # (offsets in the text, not copies of it)
        self._seen: dict[tuple[int, str], list[_Item]] = {}
        self._window = 0  # the longest such text, plus the key's own characters
        self.of: dict[int, int] = {}

    def read(self, text: str, start: int, index: int) -> tuple[Any, int] | None:
        """Item *index* at *start* where it repeats an earlier item: its value and end."""
        if not self._seen:
            return None
        key = _NAMESPACE_KEY.search(text, start, start + self._window)
        if key is None:
            return None
        prefix, after = text[start : key.start(1)], key.end(1)
        items = self._seen.get((hash(prefix), text[after : after + _HEAD]))
        if items is None:
            return None
        for item in items:
            if item.name - item.start != len(prefix) or not text.startswith(prefix, item.start):
                continue  # another text of the same hash
            if text.startswith(text[item.after : item.end], after):
                self.of[index] = item.index
                data = dict(item.data)
                data["metadata"] = {**item.data["metadata"], "namespace": key.group(1)}
                return data, after + item.end - item.after
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
        name_at, after = key.start(1), key.end(1)
        head = text[after : after + _HEAD]
        items = self._seen.setdefault((hash(text[start:name_at]), head), [])
        if len(items) >= _CANDIDATES:
            return  # many items alike up to their namespace (it comes first): no more
        items.append(_Item(value, start, name_at, after, end, index))
        self._window = max(self._window, name_at - start + _KEY_CHARS)
