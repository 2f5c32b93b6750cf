"""Guards for YAML from untrusted pull requests: alias loops, alias bombs, repeated keys.

YAML anchors and aliases let a small file describe a self-referencing value (which
never finishes walking) or one that expands exponentially ("billion laughs": ten
aliases of ten aliases of ... of a list). PyYAML constructs both without complaint
as shared Python objects; whoever walks the result then hangs or runs out of memory.
:func:`check_node` inspects the composed node graph in linear time, before anything
is constructed or walked, and names the line of the offending alias target.
"""

from __future__ import annotations

import yaml

from gpustrata.core.terminal import clipped

__all__ = [
    "ALIAS_EXPANSION_FACTOR",
    "ALIAS_EXPANSION_SLACK",
    "MAX_INT_DIGITS",
    "YamlShapeError",
    "check_int_scalar",
    "check_node",
    "check_unique_keys",
]

ALIAS_EXPANSION_FACTOR = 10
"""A document may expand, through aliases, to at most this many times its own nodes ..."""
ALIAS_EXPANSION_SLACK = 100_000
"""... plus this many values (generous for hand-written anchors; far below a bomb)."""


MAX_INT_DIGITS = 4300
"""Python refuses to read longer decimal integers (``sys.get_int_max_str_digits``); no
count or size in a manifest or stack comes near it, so such a number is refused by name."""
_INT_TAG = "tag:yaml.org,2002:int"


class YamlShapeError(ValueError, yaml.YAMLError):
    """A YAML document that cannot be walked safely; ``line`` is 1-based (or ``None``).

    Also a :class:`yaml.YAMLError`, so code that reports invalid YAML reports this too.
    """

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_int_scalar(node: yaml.Node) -> None:
    """Raise :class:`YamlShapeError` for an integer scalar longer than :data:`MAX_INT_DIGITS`."""
    if isinstance(node, yaml.ScalarNode) and node.tag == _INT_TAG:
        digits = sum(c.isdigit() for c in node.value) if len(node.value) > MAX_INT_DIGITS else 0
        if digits > MAX_INT_DIGITS:
            raise YamlShapeError(
                f"an integer of {digits} digits (more than {MAX_INT_DIGITS}, the most "
                "Python reads); no count or size is that large: write the intended number",
                node.start_mark.line + 1,
            )


def check_node(root: yaml.Node) -> int:
    """Raise :class:`YamlShapeError` if *root* refers to itself, is an alias bomb or holds
    an integer too long to read (:func:`check_int_scalar`).

    Returns the number of values the document expands to. Iterative (no recursion
    limit) and linear in the number of distinct nodes.
    """
    # Fast path: an alias is the same node object reached twice. Without one (nearly
    # every real manifest) there is nothing to expand; only then count expansions.
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            return _check_shared(root)
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for pair in node.value:
                todo.extend(pair)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
        else:
            check_int_scalar(node)
    return len(seen)


def _check_shared(root: yaml.Node) -> int:
    """:func:`check_node` for a document with aliases: loops, and the expanded size."""
    expanded: dict[int, int] = {}  # id(node) -> expanded size, once finished
    on_path: set[int] = set()
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            expanded[key] = 1 + sum(expanded[id(c)] for c in _children(node))
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise YamlShapeError(
                "an alias refers to a value that contains it (a self-referencing "
                "document never ends); replace the alias with the values it stands for",
                node.start_mark.line + 1,
            )
        distinct += 1
        check_int_scalar(node)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YamlShapeError(
                    "an alias refers to a value that contains it (a self-referencing "
                    "document never ends); replace the alias with the values it stands for",
                    child.start_mark.line + 1,
                )
            if id(child) not in expanded:
                stack.append((child, False))
    total = expanded[id(root)]
    budget = ALIAS_EXPANSION_FACTOR * distinct + ALIAS_EXPANSION_SLACK
    if total > budget:
        raise YamlShapeError(
            f"aliases expand {distinct} values into {total} (more than {budget}); "
            "this looks like an alias bomb: write the values out or drop the aliases",
            root.start_mark.line + 1,
        )
    return total


def check_unique_keys(root: yaml.Node) -> None:
    """Raise :class:`YamlShapeError` at the first mapping that repeats a key.

    YAML requires unique keys, but PyYAML keeps the last value silently, and other tools
    (kubectl, Pulumi, reviewers reading the diff) may take the first: a stack file with
    ``gpustrata:hfToken`` twice could hide a plaintext token behind an encrypted one.
    Merge keys (``<<``) are exempt. Iterative, each node visited once.
    """
    seen_nodes: set[int] = set()
    todo: list[tuple[yaml.Node, str]] = [(root, "")]
    while todo:
        node, where = todo.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = str(key_node.value)
                if key in keys and key_node.tag != "tag:yaml.org,2002:merge":
                    shown = clipped(key)
                    raise YamlShapeError(
                        f"duplicate key {shown!r}{' in ' + where if where else ''}: YAML "
                        "requires unique keys and tools disagree on which value wins; keep one",
                        key_node.start_mark.line + 1,
                    )
                keys.add(key)
                todo.append((value_node, f"{where}.{key}" if where else key))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((item, f"{where}[{i}]") for i, item in enumerate(node.value))
