"""tools/regen.py: one command for every generated file, with a --check that writes nothing."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _regen() -> ModuleType:
    return load_script("tools/regen.py", "regen_tool")


def test_check_finds_a_stale_page_and_a_run_rewrites_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    regen = _regen()
    page = tmp_path / "docs" / "rules.md"
    page.parent.mkdir()
    page.write_text((ROOT / "docs/rules.md").read_text("utf-8") + "hand edit\n", "utf-8")
    monkeypatch.setattr(regen, "ROOT", tmp_path)
    assert regen.main(["--check", "--only", "rules-md"]) == 1
    assert "hand edit" in page.read_text("utf-8")  # --check writes nothing
    assert "stale: docs/rules.md (rules-md)" in capsys.readouterr().out
    assert regen.main(["--only", "rules-md"]) == 0
    assert page.read_text("utf-8") == (ROOT / "docs/rules.md").read_text("utf-8")
    assert regen.main(["--check", "--only", "rules-md"]) == 0


def test_the_repository_code_generators_are_current() -> None:
    """The fast generators (the slow ones evaluate every fixture: their own tests check
    them) have nothing to write on a committed tree."""
    regen = _regen()
    for name in ("rules-md", "stack-args", "vllm-flags", "pulumi-template"):
        assert regen.GENERATORS[name][0](True).stale == [], name


def test_an_unknown_generator_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _regen().main(["--only", "doc"])
    assert "unknown generator doc" in capsys.readouterr().err
