"""The import order of DESIGN.md holds: ``lint-imports`` keeps every contract in
pyproject.toml ([tool.importlinter]), and a deliberate violation is caught."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = {
    "gpustrata-layers",
    "policies-layers",
    "rules-read-core-catalog-vllm",
    "only-cli-reports-import-policies",
    "pulumi-free",
}


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    env = {
        **os.environ,
        "PYTHONPATH": f"{root / 'components'}{os.pathsep}{root / 'policies'}",
        "COLUMNS": "400",  # rich wraps long module chains at the terminal width
        "NO_COLOR": "1",
    }
    result = subprocess.run(
        [exe, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    result.stdout = " ".join(result.stdout.split())
    return result


def test_contracts_are_declared() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["id"] for c in config["contracts"]} == CONTRACTS


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def test_a_rule_importing_the_planner_breaks_a_contract(tmp_path: Path) -> None:
    """A copy of the tree where one rule imports the planner fails the contract."""
    for part in ("components", "policies"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    rule = next((tmp_path / "policies/gpustrata_policies/rules").glob("k001_*/rule.py"))
    rule.write_text(
        rule.read_text()
        + textwrap.dedent(
            """
            from gpustrata.planning import plan as _plan  # noqa: E402,F401
            """
        )
    )
    result = _lint(tmp_path)
    assert result.returncode == 1
    assert "gpustrata_policies is not allowed to import gpustrata.planning" in result.stdout
    assert "rules.k001_gpu_requests_equal_limits.rule -> gpustrata.planning" in result.stdout
