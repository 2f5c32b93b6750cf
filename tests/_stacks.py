"""Helpers for tests: the repository root and the reference stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
