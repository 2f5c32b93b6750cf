"""Read manifests (files, folders, stdin) into :class:`~.view.K8sObject` with line numbers."""

from __future__ import annotations

import bisect
import json
import re
import stat
import sys
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path as FsPath
from typing import Any

import yaml

from gpustrata.core import jsonio
from gpustrata.core.contract import CLUSTER_PROFILE_FILE
from gpustrata.core.errors import InputError
from gpustrata.core.jsonio import JsonShapeError
from gpustrata.core.textfiles import (
    decode_text,
    file_kind,
    read_chunks,
    read_text_file,
    special_file_error,
)
from gpustrata.core.yamlguard import MAX_INT_DIGITS, YamlShapeError, check_node
from gpustrata.core.yamlio import dispose_loader, error_line, new_loader
from gpustrata_policies.inputs.helm_values import (
    VALUES_CHARTS,
    VALUES_KIND,
    values_chart,
    values_object,
)
from gpustrata_policies.inputs.openshift import (
    is_openshift_template,
    substitute,
    template_parameters,
)
from gpustrata_policies.inputs.repeats import RepeatedDocuments, RepeatedItems, Replan
from gpustrata_policies.view.objects import K8sObject

__all__ = [
    "VALUES_CHARTS",
    "InputError",
    "find_cluster_profile",
    "load_paths",
    "load_text",
    "load_values",
]

_SUFFIXES = (".yaml", ".yml", ".json")
MAX_INPUT_BYTES = 64 << 20
"""The largest manifest file or stdin ``check`` reads: peak memory grows about 21 MiB per
MB of GPU-dense YAML (``benchmarks/bench_check.py``; about 5 of them the data and its
lines, ``benchmarks/bench_loaders.py``; the rest the evaluation and the report), so more
is refused by its size, before it is read."""
_HELM_SOURCE = re.compile(r"^# Source: (\S+)", re.MULTILINE)
# Helm (Go template) actions left in the text: the chart's objects (`.Values`, `.Release`,
# ...) and `include "..."` anywhere, control actions (`{{- if`, `{{ end }}`) at the start
# of a line, as templates place them; never in a YAML comment. Other `{{ }}` (Jinja chat
# templates and Alertmanager templates in block scalars, which are indented, Argo Workflows
# parameters, Prometheus `{{ $labels.x }}`) are not Helm's and stay readable.
_HELM_ACTION = re.compile(
    r"\{\{-?\s*(?:\.(?:Values|Release|Chart|Capabilities|Files|Template)\b|include\s+\")"
    r"|^\{\{-?\s*(?:if|else|end|range|with|define|template|toYaml)\b",
    re.MULTILINE,
)
_YAML_COMMENT = re.compile(r"(?:^|\s)#")
# What may stand before an action that is YAML structure, not inside a scalar: indentation,
# list dashes, one plain or quoted key and its colon. After anything else (a quote that
# opens a string, `x-` of a plain scalar) the action is text of a value, as a chart passes
# it through `tpl` and Kubernetes stores it: JSON of the same object reads it as text too.
_OUTSIDE_SCALAR = re.compile(
    r"[ \t]*(?:-[ \t]+)*(?:(?:[^\s#'\"{\[-][^:#]*|\"[^\"]*\"|'[^']*'):[ \t]+(?:-[ \t]+)*)?"
)


def _helm_action(text: str) -> re.Match[str] | None:
    """The first Helm template action outside a YAML comment and outside a scalar value,
    else ``None``."""
    if "{{" not in text:  # every action opens so: one C scan instead of the regex's
        return None
    for match in _HELM_ACTION.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if _YAML_COMMENT.search(text, line_start, match.start()):
            continue
        if _OUTSIDE_SCALAR.fullmatch(text, line_start, match.start()):
            return match
    return None


Path = tuple[str | int, ...]


def _record_lines(root: yaml.Node, name: str) -> dict[Path, int]:
    """Line of every mapping key and list item, by path; rejects duplicate keys.

    Iterative (deep documents must not exhaust the interpreter's stack). The caller
    keeps the lines as :class:`_YamlLines`, whose table holds each path once.
    """
    lines: dict[Path, int] = {}
    todo: list[tuple[yaml.Node, Path]] = [(root, ())]
    while todo:
        node, path = todo.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                # One str per distinct key: the constructor reuses node.value for the data.
                key = key_node.value = sys.intern(key_node.value)
                if key in seen and key_node.tag != "tag:yaml.org,2002:merge":
                    raise InputError(
                        f"{name}:{key_node.start_mark.line + 1}: duplicate key "
                        f"{_short(key)} in one mapping; YAML requires unique keys and tools "
                        "disagree on which value wins, so keep one"
                    )
                seen.add(key)
                child = (*path, key)
                lines[child] = key_node.start_mark.line + 1
                todo.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = (*path, index)
                lines[child] = item.start_mark.line + 1
                todo.append((item, child))
    return lines


class _PathTable:
    """The paths of one input's keys and items, each once, by id: a large input repeats
    the same few thousand paths, which its documents' :class:`_YamlLines` share.

    ``kids[i]`` maps each key or index below path ``i`` to its child's id, so a walk
    finds a child's id by its key alone, without building the child's path (id 0 is the
    empty path, a document's root). While the input is read, ``shapes`` holds one array
    per distinct set of a document's path ids, which documents of one shape share (a
    Deployment's replicas, a cluster dump's pods of one ReplicaSet); :meth:`done` drops it
    and the walk's ``kids``."""

    __slots__ = ("ids", "kids", "paths", "shapes")

    def __init__(self) -> None:
        self.ids: dict[Path, int] = {(): 0}
        self.paths: list[Path] = [()]
        self.kids: list[dict[str | int, int]] = [{}]
        self.shapes: dict[bytes, array[int]] = {}

    def shape(self, ids: list[int]) -> array[int]:
        """The sorted path ids *ids* as a compact array, one array per distinct set."""
        found = _compact(ids)
        return self.shapes.setdefault(found.typecode.encode() + found.tobytes(), found)

    def done(self) -> None:
        """Drop what only reading needs (the lines keep ``ids`` and ``paths``)."""
        self.shapes = {}
        self.kids = []

    def child(self, parent: int, step: str | int) -> int:
        """The id of path *parent* + (*step*,), given it one when it has none (while the
        input is read)."""
        found = self.kids[parent].get(step)
        if found is None:
            path = (*self.paths[parent], step)
            found = self.kids[parent][step] = self.ids[path] = len(self.paths)
            self.paths.append(path)
            self.kids.append({})
        return found

    def id_of(self, path: Path) -> int:
        """The id of *path*, given it (and its prefixes) one when it has none."""
        found = self.ids.get(path)
        if found is None:
            found = 0
            for step in path:
                found = self.child(found, step)
        return found


class _Lines(Mapping[Path, int]):
    """Lines by path, looked up with :meth:`get` (no KeyError on the hot path: a finding
    asks for a path and its prefixes until one is there)."""

    __slots__ = ()

    def get(self, path: Path, default: Any = None) -> Any:
        raise NotImplementedError

    def __getitem__(self, path: Path) -> int:
        found = self.get(path)
        if found is None:
            raise KeyError(path)
        return int(found)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _compact(values: list[int]) -> array[int]:
    """*values* (none negative) as 2-byte machine integers, or 4-byte where one needs it."""
    try:
        return array("H", values)
    except OverflowError:
        return array("I", values)


class _YamlLines(_Lines):
    """Line of each key and item of a YAML document, by path: the ids of its paths in
    the input's :class:`_PathTable`, sorted, in an array documents of one shape share,
    and each path's line after the document's first, in an array of its own; 2-byte
    integers where they fit (2 to 4 bytes a path, where a dict of paths to int objects
    took about 70, issue 35)."""

    __slots__ = ("_first", "_ids", "_lines", "_table")

    def __init__(self, table: _PathTable, by_id: Mapping[int, int]) -> None:
        ids = sorted(by_id)
        first = min(by_id.values(), default=0)
        self._table = table
        self._ids = table.shape(ids)
        self._first = first
        self._lines = _compact([by_id[i] - first for i in ids])

    @classmethod
    def of_paths(cls, table: _PathTable, lines: Mapping[Path, int]) -> _YamlLines:
        """The lines :func:`_record_lines` recorded by path."""
        return cls(table, {table.id_of(p): line for p, line in lines.items()})

    def moved(self, by: int) -> _YamlLines:
        """These lines *by* lines further down (a document repeated further on: its paths
        and their offsets are this one's)."""
        out = _YamlLines.__new__(_YamlLines)
        out._table, out._ids, out._first, out._lines = (
            self._table,
            self._ids,
            self._first + by,
            self._lines,
        )
        return out

    def get(self, path: Path, default: Any = None) -> Any:
        found = self._table.ids.get(path)
        if found is None:
            return default
        ids = self._ids
        at = bisect.bisect_left(ids, found)
        return self._first + self._lines[at] if at < len(ids) and ids[at] == found else default

    def __iter__(self) -> Iterator[Path]:
        paths = self._table.paths
        return (paths[i] for i in self._ids)

    def __len__(self) -> int:
        return len(self._ids)


_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ, _INT = _TAG + "str", _TAG + "map", _TAG + "seq", _TAG + "int"
# Plain scalars other than strings, built by the loader's own constructor for the tag.
_SCALARS = frozenset(_TAG + t for t in ("null", "bool", "int", "float"))


class _Slow(Exception):
    """A document :func:`_located` leaves to the general path (it does what that path does)."""


def _located(
    root: yaml.Node,
    loader: Any,
    table: _PathTable,
    anchored: bool = True,
    texts: dict[str, str] | None = None,
) -> tuple[Any, dict[int, int]]:
    """The value of a composed document and the lines :func:`_record_lines` records, in
    one walk of its nodes, for documents of plain mappings, lists and the core scalars
    (every manifest in practice): what ``construct_document`` builds, without its
    per-node bookkeeping, and without the two walks before it that find aliases, long
    integers and repeated keys. Anything else raises :class:`_Slow`: a node reached twice
    (an alias), a merge key, another tag, a non-scalar key, a repeated key, an integer too
    long to read; the caller then runs the general path, errors and all.

    ``anchored=False`` says the document's text holds no ``&``, so no anchor and hence no
    alias: the walk then does not note every node it reached (a third of its time).
    The lines are keyed by the ids of *table*'s paths (:class:`_YamlLines` keeps them).
    With *texts* (one dict per input, dropped after reading it), equal string values
    share one str: a cluster dump repeats a few thousand texts (images, policies, label
    values) in every object, and each copy cost about 60 bytes (issue 35).
    """
    if texts is None:
        texts = {}
    share = texts.setdefault
    lines: dict[int, int] = {}
    seen: set[int] = set()
    build = loader.yaml_constructors
    scalar_node, mapping_node, sequence_node = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
    intern, ids, paths, kids = sys.intern, table.ids, table.paths, table.kids

    def scalar(node: yaml.Node) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag not in _SCALARS or (tag == _INT and len(node.value) > MAX_INT_DIGITS):
            raise _Slow
        return build[tag](loader, node)

    def value(node: yaml.Node, at: int) -> Any:  # *at*: the id of the node's path
        if anchored:
            if id(node) in seen:
                raise _Slow
            seen.add(id(node))
        kind = type(node)
        if kind is scalar_node:
            if node.tag == _STR:
                return share(node.value, node.value)
            return scalar(node)
        if kind is mapping_node and node.tag == _MAP:
            out: dict[Any, Any] = {}
            below = kids[at]
            for key_node, value_node in node.value:
                if type(key_node) is not scalar_node:
                    raise _Slow
                if anchored:
                    if id(key_node) in seen:
                        raise _Slow
                    seen.add(id(key_node))
                text = key_node.value = intern(key_node.value)
                pid = below.get(text)
                if pid is None:  # table.child, inline: once per distinct path
                    child = (*paths[at], text)
                    pid = below[text] = ids[child] = len(paths)
                    paths.append(child)
                    kids.append({})
                # The same key text twice in one mapping (the only way a path repeats
                # without an alias): the general path says which, and where.
                elif pid in lines:
                    raise _Slow
                lines[pid] = key_node.start_mark.line + 1
                key = text if key_node.tag == _STR else scalar(key_node)
                out[key] = value(value_node, pid)
            return out
        if kind is sequence_node and node.tag == _SEQ:
            items: list[Any] = []
            below = kids[at]
            for index, item in enumerate(node.value):
                pid = below.get(index)
                if pid is None:
                    child = (*paths[at], index)
                    pid = below[index] = ids[child] = len(paths)
                    paths.append(child)
                    kids.append({})
                lines[pid] = item.start_mark.line + 1
                items.append(value(item, pid))
            return items
        raise _Slow

    try:
        return value(root, 0), lines
    finally:
        # `value` refers to itself through its closure: without this, each document
        # left a cycle holding the loader (its copy of the whole input text) until the
        # cycle collector's next full run, which `check` holds off (issue 35).
        value = _walked


def _walked(node: yaml.Node, at: int) -> Any:
    """What :func:`_located`'s walk becomes once it returned (it is not called again)."""
    raise AssertionError("the walk of a document is done")


def _short(text: str, limit: int = 60) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


class _Prefixed(_Lines):
    """The lines of one item of a list, by its own paths: a view of the whole input's
    (copying them per item made a ``kind: List`` of n items cost n^2)."""

    __slots__ = ("_base", "_prefix")

    def __init__(self, base: Mapping[Path, int], prefix: Path) -> None:
        self._base, self._prefix = base, prefix

    def get(self, path: Path, default: Any = None) -> Any:
        return self._base.get(self._prefix + path, default)

    def __iter__(self) -> Iterator[Path]:
        n = len(self._prefix)
        return (p[n:] for p in self._base if p[:n] == self._prefix and len(p) > n)

    def __bool__(self) -> bool:
        return bool(self._base)


class _JsonLines(_Lines):
    """Lines of a JSON value's keys and items, found in the text when a finding asks
    (:func:`~gpustrata.core.jsonio.locate`) rather than recorded for every value."""

    __slots__ = ("_data", "_found", "_line", "_lines", "_start", "_text")

    def __init__(self, text: str, start: int, line: int, data: Any) -> None:
        """*line* is the line of *start*: a finding's line is counted from there, over
        the object's own text only (no table of every newline of the input)."""
        self._text, self._start, self._line, self._data = text, start, line, data
        # Path -> (offset of its key or item, offset of its value), or None where it is
        # absent: a finding's line resumes from the longest path located before (the
        # prefixes line_of tries, the fields of one container), not from the object's start.
        self._found: dict[Path, tuple[int, int] | None] = {(): (start, start)}
        # Path -> its line after *line* (None: absent), as asked.
        self._lines: dict[Path, int | None] = {}

    @property
    def line(self) -> int:
        """The line the value starts on."""
        return self._line

    def moved(self, by: int) -> _JsonLines:
        """These lines *by* lines further down: an item repeating this one but for a name
        without newline (:class:`~gpustrata_policies.inputs.repeats.RepeatedItems`), whose
        keys sit on this one's lines. The paths located are shared (offsets in this one's
        text), so a path is found once for every copy."""
        out = _JsonLines.__new__(_JsonLines)
        out._text, out._start, out._data, out._found, out._lines = (
            self._text,
            self._start,
            self._data,
            self._found,
            self._lines,
        )
        out._line = self._line + by
        return out

    def get(self, path: Path, default: Any = None) -> Any:
        lines = self._lines
        if path in lines:
            after = lines[path]
        else:
            after = lines[path] = self._after(path)
        return default if after is None else self._line + after

    def _after(self, path: Path) -> int | None:
        found = self._found
        cut = len(path)
        while path[:cut] not in found:
            cut -= 1
        hit = found[path[:cut]]
        text = self._text
        while hit is not None and cut < len(path):
            hit = jsonio.locate_step(text, hit[1], path[cut])
            cut += 1
            found[path[:cut]] = hit
        if hit is None or not path:
            return None
        return text.count("\n", self._start, hit[0])

    def __iter__(self) -> Iterator[Path]:
        todo: list[tuple[Path, Any]] = [((), self._data)]
        while todo:
            path, value = todo.pop()
            if path:
                yield path
            if isinstance(value, Mapping):
                todo.extend(((*path, k), v) for k, v in value.items())
            elif isinstance(value, list):
                todo.extend(((*path, i), v) for i, v in enumerate(value))

    def __bool__(self) -> bool:
        return isinstance(self._data, Mapping | list) and bool(self._data)


def _objects(
    data: Any, name: str, line: int | None, lines: Mapping[Path, int] | None
) -> Iterator[K8sObject]:
    if (
        isinstance(data, Mapping)
        and data.get("kind") == "List"
        and isinstance(data.get("items"), list)
    ):
        for index, item in enumerate(data["items"]):  # `kubectl get -o yaml` output
            sub = _Prefixed(lines or {}, ("items", index))
            item_line = (lines or {}).get(("items", index), line)
            yield from _objects(item, name, item_line, sub)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            sub = _Prefixed(lines or {}, (index,))
            yield from _objects(item, name, (lines or {}).get((index,), line), sub)
    elif isinstance(data, Mapping) and is_openshift_template(data):
        values = template_parameters(data)
        for index, item in enumerate(data["objects"]):  # what `oc process` would create
            sub = _Prefixed(lines or {}, ("objects", index))
            item_line = (lines or {}).get(("objects", index), line)
            yield from _objects(substitute(item, values), name, item_line, sub)
    elif isinstance(data, Mapping):
        chart = values_chart(data, name) if "kind" not in data else None
        if chart is not None:
            yield values_object(data, chart, name, line, lines)
        else:
            yield K8sObject(data, name, line, lines)
    elif data is not None:
        yield K8sObject({}, name, line, lines)  # a scalar document: reported as not evaluated


def load_text(text: str, name: str) -> list[K8sObject]:
    """Parse YAML (multi-document) or JSON text; raises :class:`InputError` when malformed.

    Untrusted input is expected: binary data, documents nested too deeply, YAML
    alias loops and alias bombs (:mod:`.yamlguard`) and duplicate keys are reported
    with the file and line instead of crashing, hanging or picking a value silently.
    """
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InputError(f"{name}:{line}: binary input (contains NUL bytes), not YAML or JSON")
    objects = _load_text(text, name)
    for obj in objects:  # text holds no value unknown until deployment
        obj.plain = True
    return objects


def _load_text(text: str, name: str) -> list[K8sObject]:
    if name.endswith(".json"):
        return _load_json(text, name)
    if name == "<stdin>" and text.lstrip()[:1] in ("{", "["):
        # `kubectl get -o json | gpustrata check -`: JSON is YAML, but libyaml reads it
        # several times slower; what json cannot read goes to the YAML loader as before.
        try:
            return _load_json(text, name)
        except _NotJson:
            pass
    return _load_yaml(text, name)


class _NotJson(InputError):
    """Text that is not valid JSON syntax."""


def _load_json(text: str, name: str) -> list[K8sObject]:
    """JSON with the json module (C), lines found per finding (:class:`_JsonLines`); an
    item repeating an earlier one but for its namespace is not decoded again, and its
    lines are the earlier one's (:class:`~gpustrata_policies.inputs.repeats.RepeatedItems`)."""
    repeats = RepeatedItems()
    try:
        data, start, starts = jsonio.loads_located(text, repeats)
    except JsonShapeError as exc:
        where = f"{name}:{exc.line}" if exc.line is not None else name
        raise InputError(f"{where}: cannot be checked: {exc}") from None
    except json.JSONDecodeError as exc:
        raise _NotJson(f"{name}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply to read") from None
    items = data["items"] if isinstance(data, Mapping) and data.get("kind") == "List" else data
    if starts is not None and isinstance(items, list):
        out: list[K8sObject] = []
        line, counted = 1, 0  # the items in order: the newlines before each counted once
        lines_of: list[_JsonLines] = []
        for number, (item, at) in enumerate(zip(items, starts, strict=True)):
            line += text.count("\n", counted, at)
            counted = at
            first = repeats.of.get(number)
            if first is None:
                lines = _JsonLines(text, at, line, item)
                lines_of.append(lines)
                out.extend(_objects(item, name, line, lines))
            else:  # one object, as the item it repeats (repeats.py): what _objects makes
                lines = lines_of[first].moved(line - lines_of[first].line)
                lines_of.append(lines)
                out.append(K8sObject(item, name, line, lines))
        return out
    line = text.count("\n", 0, start) + 1
    return list(_objects(data, name, line, _JsonLines(text, start, line, data)))


def _load_yaml(text: str, name: str) -> list[K8sObject]:
    try:
        try:
            return _read_yaml(text, name, plan=True)
        except Replan:  # the documents do not fit the plan of repeats: read each one
            return _read_yaml(text, name, plan=False)
    except YamlShapeError as exc:
        raise InputError(f"{name}:{exc.line}: cannot be checked: {exc}") from None
    except yaml.YAMLError as exc:
        error_at = error_line(exc, text)
        where = f"{name}:{error_at}" if error_at is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        text_lines = text.splitlines()
        at = error_at or 0
        if 0 < at <= len(text_lines) and "{{" in text_lines[at - 1]:
            problem += (  # e.g. `hf_api_token: {{HF_TOKEN}}`, a sed/envsubst placeholder
                "; the line holds a {{...}} placeholder: substitute it before checking"
            )
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:  # the pure-Python loader composes recursively
        raise InputError(f"{name}: YAML nested too deeply to read") from None


def _origin(index: int, name: str, starts: list[int], names: list[str]) -> str:
    """The file a document starting at *index* is blamed on: in Helm output (its
    ``# Source:`` lines at *starts*), the template it came from; else *name*."""
    if not starts:
        return name
    at = bisect.bisect_right(starts, index)
    return names[at - 1] if at else name


def _read_yaml(text: str, name: str, plan: bool) -> list[K8sObject]:
    """The objects of YAML *text*; with *plan*, the documents that repeat an earlier one
    but for their namespace are blanked before libyaml reads the text, and taken from
    that one (:class:`~gpustrata_policies.inputs.repeats.RepeatedDocuments`)."""
    template = _helm_action(text)
    if template is not None:
        line = text.count("\n", 0, template.start()) + 1
        raise InputError(
            f"{name}:{line}: an unrendered Helm template ({template.group(0)!r} ...); gpustrata "
            "checks what Kubernetes receives: render it first, e.g. "
            "`helm template RELEASE CHART -f values.yaml | gpustrata check -`"
        )
    source_starts: list[int] = []
    source_names: list[str] = []
    for match in _HELM_SOURCE.finditer(text):
        source_starts.append(match.start())
        source_names.append(match.group(1))
    out: list[K8sObject] = []
    table = _PathTable()
    probe: Any = new_loader("")  # PyYAML's resolver: a plain scalar's implicit tag
    try:
        repeats = RepeatedDocuments(
            text, lambda v: probe.resolve(yaml.ScalarNode, v, (True, False)) == _STR, plan
        )
    finally:
        dispose_loader(probe)
    planned = repeats.text is not text
    loader = new_loader(repeats.text)
    anchors = "&" in text  # else no document has an anchor, and so no alias
    texts: dict[str, str] = {}  # equal string values read as one str (see _located)
    after = 0  # where the text of the next document starts, at the latest
    taken: set[int] = set()
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            index, end = node.start_mark.index, node.end_mark.index
            segment = repeats.segment(index)
            if segment is not None and repeats.blanked(segment):
                if segment in taken or not isinstance(node, yaml.ScalarNode) or node.value:
                    raise Replan  # libyaml saw the blanked text otherwise than planned
                taken.add(segment)
                data, lines, start, index = repeats.repeat(segment, _YamlLines.moved)
                # one object, as the document it repeats (repeats.py): what _objects makes
                out.append(
                    K8sObject(data, _origin(index, name, source_starts, source_names), start, lines)
                )
                after = end
                continue
            anchored = anchors and text.find("&", after, end) >= 0
            start = node.start_mark.line + 1
            try:
                data, by_id = _located(node, loader, table, anchored, texts)
                lines = _YamlLines(table, by_id)
            except (_Slow, RecursionError):  # aliases, merge keys, other tags, an error
                check_node(node)  # alias loops and alias bombs, before anything walks it
                lines = _YamlLines.of_paths(table, _record_lines(node, name))
                data = loader.construct_document(node)
            repeats.remember(segment, index, end, start, data, lines)
            after = end
            out.extend(
                _objects(data, _origin(index, name, source_starts, source_names), start, lines)
            )
        repeats.check(taken)
    except (YamlShapeError, yaml.YAMLError, RecursionError):
        if planned:  # reported as the whole text reads, not the blanked one
            raise Replan from None
        raise
    finally:
        dispose_loader(loader)
        table.done()
    return out


def _folder_files(folder: FsPath) -> list[FsPath]:
    """The manifest files under *folder*; symlinked folders are not followed, and the
    cluster profile (``.gpustrata/cluster.yaml``) is not a manifest.

    An entry with a manifest suffix that is not a regular file (a FIFO, a device, a
    broken or looping link) is refused rather than skipped: silently checking less
    than was asked for would pass a pull request that hides a manifest that way.
    """
    files: list[FsPath] = []
    profile = folder / CLUSTER_PROFILE_FILE  # read by `check` as the cluster profile
    for entry in sorted(folder.rglob("*")):
        if entry.suffix not in _SUFFIXES or entry == profile:
            continue
        try:
            mode = entry.stat().st_mode
        except OSError:
            if entry.is_symlink():
                raise special_file_error(
                    entry, "a symbolic link to nothing (or a link loop)"
                ) from None
            raise
        if stat.S_ISDIR(mode):
            continue  # a folder named like a file (`x.yaml/`): rglob walks it
        if not stat.S_ISREG(mode):
            raise special_file_error(entry, file_kind(mode))
        files.append(entry)
    return files


def find_cluster_profile(paths: list[str]) -> FsPath | None:
    """The ``.gpustrata/cluster.yaml`` next to the manifests: in the first checked folder
    (or folder of a checked file) that has one; ``None`` when none has (stdin has none)."""
    candidates: list[FsPath] = []
    for raw in paths:
        if raw in ("", "-"):
            continue
        path = FsPath(raw)
        folder = path if path.is_dir() else path.parent
        candidates.append(folder / CLUSTER_PROFILE_FILE)
    for candidate in candidates:
        # anything there, even a FIFO or a broken link, is the profile: reading it refuses
        # what is not a regular file, rather than checking without it unnoticed
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return None


def load_paths(
    paths: list[str], stdin: Any = None, errors: list[InputError] | None = None
) -> list[K8sObject]:
    """Load files, folders (recursive ``*.yaml``/``*.yml``/``*.json``) and ``-`` (stdin).

    An empty path is refused (an unset CI variable must not check the working folder),
    and so are special files (:func:`gpustrata.core.textfiles.read_text_file`). With
    *errors*, a file that cannot be read is recorded there and the others are still
    loaded (a folder check reports every unreadable file, not the first); without it, the
    first one raises.
    """
    objects: list[K8sObject] = []

    def load_file(file: FsPath) -> None:
        try:
            objects.extend(load_text(read_text_file(file, MAX_INPUT_BYTES), str(file)))
        except InputError as exc:
            if errors is None:
                raise
            errors.append(exc)

    for raw in paths:
        if raw == "":
            raise InputError(
                "'': an empty path (an unset variable in the command?); name a file, "
                "a folder, or - for stdin"
            )
        if raw == "-":
            source = getattr(stdin, "buffer", stdin)
            data = b"" if source is None else read_chunks(source.read, "<stdin>", MAX_INPUT_BYTES)
            objects.extend(load_text(decode_text(data, "<stdin>"), "<stdin>"))
            continue
        path = FsPath(raw)
        if path.is_dir():
            for file in _folder_files(path):
                load_file(file)
        elif not path.exists() and not path.is_symlink():
            raise InputError(f"{raw}: no such file or directory")
        else:
            load_file(path)
    return objects


def load_values(spec: str) -> list[K8sObject]:
    """``CHART=FILE`` (``--values gpu-operator=values.yaml``): the file's documents as
    the Helm values of *CHART*, whatever their keys."""
    chart, sep, path = spec.partition("=")
    if not sep or not path or chart not in VALUES_CHARTS:
        raise InputError(
            f"--values {spec!r}: expected CHART=FILE with CHART one of "
            f"{', '.join(VALUES_CHARTS)} (e.g. --values gpu-operator=values.yaml)"
        )
    out = []
    for obj in load_paths([path]):
        if obj.kind == VALUES_KIND:
            out.append(obj)
        elif obj.kind or not obj.raw:
            raise InputError(
                f"{obj.file}:{obj.line}: --values {chart}: a Helm values file has no kind, "
                f"but this document is a {obj.kind or 'scalar'}; pass manifests as PATH"
            )
        else:
            lines = dict(obj.lines or {})
            out.append(values_object(obj.raw, chart, str(obj.file), obj.line, lines))
    return out
