"""Shared fixtures: stack-file mutation."""

from __future__ import annotations

from pathlib import Path

import pytest
from _stacks import stack_path


@pytest.fixture
def mutated_stack(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write the prod stack with one textual replacement; return the file's path."""

    def make(old: str, new: str, env: str = "prod") -> Path:
        text = stack_path(env).read_text(encoding="utf-8")
        assert old in text, f"mutation target {old!r} not in the {env} stack"
        path = tmp_path / f"Pulumi.{env}.yaml"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return path

    return make
