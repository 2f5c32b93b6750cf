"""Helpers for tests: the repository root and the reference stacks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

ROOT = Path(__file__).resolve().parents[1]
STACKS = ("dev", "staging", "prod")


def stack_path(env: str) -> Path:
    """Path of a reference stack file."""
    return ROOT / "stacks" / f"Pulumi.{env}.yaml"


def stack_doc(env: str) -> dict[str, Any]:
    """The `gpustrata:stack` document of a reference stack."""
    data = yaml.safe_load(stack_path(env).read_text(encoding="utf-8"))
    doc: dict[str, Any] = data["config"]["gpustrata:stack"]
    return doc


class _Waits(Protocol):
    @property
    def depends_on(self) -> tuple[str, ...]: ...


def closure(res: Mapping[str, _Waits], name: str) -> set[str]:
    """Everything the resource *name* waits for, transitively (names of registered
    resources, as ``mockrun.Registered.depends_on`` gives them)."""
    seen: set[str] = set()
    todo = list(res[name].depends_on)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(res[dep].depends_on if dep in res else ())
    return seen
