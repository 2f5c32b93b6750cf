"""Issue 19: what a stack file from a pull request may do (huge numbers, model paths,
names, weak types); each problem is exit 2 with the file, line, config path and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.spec.loader import load_stack_file


def _plan_error(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["plan", "--file", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.startswith("gpustrata: "), err
    return err


def test_huge_integer_in_a_stack(mutated_stack, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = mutated_stack("min_size: 1", "min_size: " + "9" * 5000)
    with pytest.raises(StackError, match=r":19: cannot be used: an integer of 5000 digits"):
        load_stack_file(path)
    assert ":19: cannot be used: an integer of 5000 digits" in _plan_error(path, capsys)
