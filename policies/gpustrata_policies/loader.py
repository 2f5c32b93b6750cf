"""Read manifests (files, folders, stdin) into :class:`~.view.K8sObject` with line numbers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path as FsPath
from typing import Any

import yaml

from .view import K8sObject

__all__ = ["InputError", "load_paths", "load_text"]

try:  # libyaml is much faster; fall back to the pure-Python loader
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment,unused-ignore]
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

_SUFFIXES = (".yaml", ".yml", ".json")
_HELM_SOURCE = re.compile(r"^# Source: (\S+)", re.MULTILINE)
Path = tuple[str | int, ...]


class InputError(Exception):
    """Unreadable input: the message names the file (and line when known)."""


def _record_lines(node: yaml.Node, path: Path, lines: dict[Path, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*path, key_node.value)
                lines[child] = key_node.start_mark.line + 1
                _record_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _record_lines(item, child, lines)


def _objects(
    data: Any, name: str, line: int | None, lines: dict[Path, int] | None
) -> Iterator[K8sObject]:
    if (
        isinstance(data, Mapping)
        and data.get("kind") == "List"
        and isinstance(data.get("items"), list)
    ):
        for index, item in enumerate(data["items"]):  # `kubectl get -o yaml` output
            sub = {p[2:]: v for p, v in (lines or {}).items() if p[:2] == ("items", index)}
            item_line = (lines or {}).get(("items", index), line)
            yield from _objects(item, name, item_line, sub)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            sub = {p[1:]: v for p, v in (lines or {}).items() if p[:1] == (index,)}
            yield from _objects(item, name, (lines or {}).get((index,), line), sub)
    elif isinstance(data, Mapping):
        yield K8sObject(data, name, line, lines)
    elif data is not None:
        yield K8sObject({}, name, line, lines)  # a scalar document: reported as not evaluated


def load_text(text: str, name: str) -> list[K8sObject]:
    """Parse YAML (multi-document) or JSON text; raises :class:`InputError` when malformed."""
    if "\x00" in text:
        raise InputError(f"{name}: binary input (contains NUL bytes), not YAML or JSON")
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        return list(_objects(data, name, 1, None))
    sources = [(m.start(), m.group(1)) for m in _HELM_SOURCE.finditer(text)]
    out: list[K8sObject] = []
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            lines: dict[Path, int] = {}
            _record_lines(node, (), lines)
            start = node.start_mark.line + 1
            origin = name
            if sources:  # Helm output: blame the template the document came from
                before = [src for pos, src in sources if pos <= node.start_mark.index]
                origin = before[-1] if before else name
            out.extend(_objects(data, origin, start, lines))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    finally:
        loader.dispose()
    return out


def _read(path: FsPath) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte {exc.start}); is it a binary file?"
        ) from None


def load_paths(paths: list[str], stdin: Any = None) -> list[K8sObject]:
    """Load files, folders (recursive ``*.yaml``/``*.yml``/``*.json``) and ``-`` (stdin)."""
    objects: list[K8sObject] = []
    for raw in paths:
        if raw == "-":
            data = (
                stdin.buffer.read()
                if stdin is not None and hasattr(stdin, "buffer")
                else (stdin.read() if stdin is not None else b"")
            )
            if isinstance(data, bytes):
                try:
                    data = data.decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    raise InputError(f"<stdin>: not UTF-8 text (byte {exc.start})") from None
            objects.extend(load_text(data, "<stdin>"))
            continue
        path = FsPath(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
            for file in files:
                objects.extend(load_text(_read(file), str(file)))
        elif path.exists():
            objects.extend(load_text(_read(path), str(path)))
        else:
            raise InputError(f"{raw}: no such file or directory")
    return objects
