"""Pulumi Inputs for the components whose renderers take plain values.

The renderers (``gpustrata.render``) import no Pulumi and build strings from names
and namespaces, so a component that receives an ``Output`` renders with a placeholder
token instead and then puts the Output back wherever the token landed (a whole value
becomes the Output, a value that embeds it becomes ``Output.concat``). Plain values
pass through untouched: what a plain stack renders does not change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi

from gpustrata.core.errors import StackError

__all__ = ["ComponentInputError", "Placeholders", "StackInputError"]

_TOKEN = re.compile(r"gpustrata-input-(\d+)-x")


class Placeholders:
    """Placeholder tokens for the non-plain inputs of one component."""

    def __init__(self) -> None:
        self._outputs: list[pulumi.Output[Any]] = []

    def plain(self, value: Any) -> Any:
        """*value* if it is a plain string, else a token standing for it (a DNS-label-safe
        string, so renderers that build names from it still work)."""
        if isinstance(value, str):
            return value
        self._outputs.append(pulumi.Output.from_input(value))
        return f"gpustrata-input-{len(self._outputs) - 1}-x"

    def plain_map(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A mapping with every value through :meth:`plain` (keys must be plain)."""
        return {k: self.plain(v) for k, v in values.items()}

    def restore(self, obj: Any) -> Any:
        """*obj* with every token replaced by its Output (recursively)."""
        if not self._outputs:
            return obj
        if isinstance(obj, Mapping):
            return {k: self.restore(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.restore(v) for v in obj]
        if isinstance(obj, str) and _TOKEN.search(obj):
            parts: list[Any] = []
            last = 0
            for m in _TOKEN.finditer(obj):
                parts += [obj[last : m.start()], self._outputs[int(m.group(1))]]
                last = m.end()
            parts.append(obj[last:])
            parts = [p for p in parts if not (isinstance(p, str) and p == "")]
            return parts[0] if len(parts) == 1 else pulumi.Output.concat(*parts)
        return obj


class ComponentInputError(pulumi.RunError, pulumi.InputPropertyError):
    """An input a component cannot use: a :class:`pulumi.RunError` (a program prints the
    message without a traceback) and an :class:`pulumi.InputPropertyError` naming the
    property, which the component provider host reports against that input."""

    def __init__(self, property_path: str, reason: str) -> None:
        pulumi.RunError.__init__(self, reason)
        pulumi.InputPropertyError.__init__(self, property_path, reason)
        self.args = (reason,)

    def __str__(self) -> str:
        return self.reason


class StackInputError(ComponentInputError):
    """A stack document InferenceStack cannot use; the property is the first problem's
    path (``stack.models[0].engine.block_size``), the message every problem, one a line."""

    def __init__(self, error: StackError) -> None:
        first = error.problems[0].path if error.problems else ""
        path = first.replace("gpustrata:stack", "stack", 1).replace(
            "gpustrata:hfToken", "hfTokenValue", 1
        )
        super().__init__(path or "stack", error.render())
        self.stack_error = error
