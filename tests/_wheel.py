"""Helper for tests: the gpustrata wheel, built from a copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH/PYTHONHOME, so a child sees only
    what it installed."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}


def build_wheel(tmp_path: Path) -> Path:
    """Build ``gpustrata-<version>-py3-none-any.whl`` into ``tmp_path/dist`` and return it.

    It is built from a copy of what the wheel is made of: setuptools builds in place, and
    a build/ folder left in the worktree would leak stale files into later wheels."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("components", "policies"):
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "venv")
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), "."],
        cwd=src,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    shutil.rmtree(src)  # nothing of the source copy is left to read from
    (wheel,) = dist.glob("gpustrata-*.whl")
    return wheel
