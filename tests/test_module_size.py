"""No module of the two packages is over 800 lines (issue 32).

A module that long mixes concerns and is tiring to change; split it by moving cohesive
code to a module of its own (as spec/ splits by cluster, serving and routing), and update
every importer. Generated modules count too: their generator splits its output.
"""

from __future__ import annotations

from pathlib import Path

from _stacks import ROOT

MAX_LINES = 800
PACKAGES = (ROOT / "components" / "gpustrata", ROOT / "policies" / "gpustrata_policies")


def _sizes(packages: tuple[Path, ...] = PACKAGES, root: Path = ROOT) -> dict[str, int]:
    sizes = {}
    for package in packages:
        for path in package.rglob("*.py"):
            with path.open("rb") as handle:
                sizes[str(path.relative_to(root))] = sum(1 for _ in handle)
    return sizes


def test_the_packages_are_found() -> None:
    sizes = _sizes()
    assert "components/gpustrata/spec/stack.py" in sizes
    assert "policies/gpustrata_policies/view/capacity.py" in sizes
    assert len(sizes) > 100


def test_no_module_is_over_800_lines() -> None:
    over = {path: n for path, n in sorted(_sizes().items()) if n > MAX_LINES}
    assert not over, f"split these modules (at most {MAX_LINES} lines each): {over}"


def test_a_long_module_is_found(tmp_path: Path) -> None:
    # Every line counts, a last line without "\n" and modules in subpackages included.
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "long.py").write_text("a = 1\n" * MAX_LINES + "b = 2")
    (tmp_path / "pkg" / "short.py").write_text("a = 1\n" * MAX_LINES)
    sizes = _sizes((tmp_path / "pkg",), tmp_path)
    assert sizes == {"pkg/sub/long.py": MAX_LINES + 1, "pkg/short.py": MAX_LINES}
