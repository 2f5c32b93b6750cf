"""The fastest safe YAML loader PyYAML offers: libyaml's where it was built with it.

Used for the shipped catalogues (read on every ``plan``; the pure-Python loader took
0.6 s of a 2.6 s cold run), manifests given to ``check`` and serveConfigV2 text. Both
loaders construct the same safe types.
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with :data:`SAFE_LOADER` and the guards of :mod:`.yamlguard`.

    Alias loops and bombs, repeated keys and integers too long to read raise
    :class:`~.yamlguard.YamlShapeError` (a :class:`yaml.YAMLError`) before anything
    is constructed, so a serveConfigV2 string gets the same top-level guards as a file.
    """
    from gpustrata.core.yamlguard import check_node, check_unique_keys

    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_node(node)
        check_unique_keys(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


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
