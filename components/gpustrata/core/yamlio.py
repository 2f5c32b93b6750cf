"""The fastest safe YAML loader PyYAML offers: libyaml's where it was built with it.

Used for the shipped catalogues (read on every ``plan``; the pure-Python loader took
0.6 s of a 2.6 s cold run), manifests given to ``check`` and serveConfigV2 text. Both
loaders construct the same safe types.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

import yaml
from yaml.resolver import BaseResolver

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVED = 4096
"""Scalar texts whose tag a loader keeps (a 5,000-object cluster dump has about 4,300)."""


def new_loader(text: str) -> yaml.SafeLoader:
    """A :data:`SAFE_LOADER` for *text* that resolves each distinct scalar's tag once.

    The safe loader has no path resolvers, so a node's tag depends only on its kind, its
    text and whether it was quoted: the libyaml composer still called the pure-Python
    ``resolve`` for each of them, and ``descend_resolver``/``ascend_resolver`` (which
    only path resolvers use) for every node, a third of composing (issue 35). Here the
    first is a C-level cache over PyYAML's own ``resolve`` and the other two do nothing.
    Call :func:`dispose_loader` when done (the cache refers back to the loader).
    """
    loader = SAFE_LOADER(text)
    if not loader.yaml_path_resolvers:
        resolve = partial(BaseResolver.resolve, loader)
        vars(loader)["resolve"] = lru_cache(maxsize=_RESOLVED)(resolve)
        vars(loader)["descend_resolver"] = _no_path
        vars(loader)["ascend_resolver"] = _no_path
    return loader


def _no_path(*_args: Any) -> None:
    """``descend_resolver``/``ascend_resolver`` of a loader without path resolvers."""


def dispose_loader(loader: yaml.SafeLoader) -> None:
    """Free *loader*'s parser state and the tag cache of :func:`new_loader`."""
    loader.dispose()
    for name in ("resolve", "descend_resolver", "ascend_resolver"):
        vars(loader).pop(name, None)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with :data:`SAFE_LOADER` and the guards of :mod:`.yamlguard`.

    Alias loops and bombs, repeated keys and integers too long to read raise
    :class:`~.yamlguard.YamlShapeError` (a :class:`yaml.YAMLError`) before anything
    is constructed, so a serveConfigV2 string gets the same top-level guards as a file.
    """
    from gpustrata.core.yamlguard import check_node, check_unique_keys

    loader = new_loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_node(node)
        check_unique_keys(node)
        return loader.construct_document(node)
    finally:
        dispose_loader(loader)


def error_line(exc: yaml.YAMLError, text: str) -> int | None:
    """The 1-based line a PyYAML error points at in *text*: its problem (or context) mark,
    or for a character YAML does not allow (a :class:`yaml.reader.ReaderError`, which has
    no mark) the line of that character; ``None`` when the error says nowhere."""
    line = getattr(exc, "line", None)  # yamlguard.YamlShapeError
    if isinstance(line, int):
        return line
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return int(mark.line) + 1
    if isinstance(exc, yaml.reader.ReaderError):
        return text.count("\n", 0, exc.position) + 1
    return None
