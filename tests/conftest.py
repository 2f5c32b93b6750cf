"""Shared fixtures: stack-file mutation; the hypothesis profile; property-suite counts."""

from __future__ import annotations

import os
from pathlib import Path

import _fuzz
import pytest
from _stacks import stack_path
from hypothesis import settings

# CI: derandomized, so every run tries the same cases (no flaky CI, nothing to store);
# `GPUSTRATA_HYPOTHESIS_PROFILE=explore` draws fresh random cases and keeps failures in
# the git-ignored .hypothesis/ database for replay.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("GPUSTRATA_HYPOTHESIS_PROFILE", "ci"))

# The commands read the local Hugging Face cache (issue 30 item 1): the machine's own never
# decides a test. A test that needs one sets HF_HOME or HF_HUB_CACHE to a folder it builds.
os.environ["HF_HUB_CACHE"] = str(Path(__file__).parent / ".no-hf-cache")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Cases tried and failures found by each property-based suite (issue 7)."""
    lines = _fuzz.summary_lines()
    if lines:
        terminalreporter.write_sep("=", "property-based cases")
        for line in lines:
            terminalreporter.write_line(line)


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
