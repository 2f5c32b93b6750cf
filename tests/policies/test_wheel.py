"""A built wheel (not the editable install) carries the rule folders' fixtures, so
``gpustrata explain`` prints its example from an installed copy, away from the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import REPO, fixture


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_installed_wheel_explains_with_its_example(tmp_path: Path) -> None:
    # Build from a copy of what the wheel is made of: setuptools builds in place, and a
    # build/ folder left in the worktree would leak stale files into later wheels.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("components", "policies"):
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "venv")
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist, site, elsewhere = tmp_path / "dist", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), "."], src, env
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("gpustrata-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpustrata_policies/rules/k004_gpu_pod_tolerates_pool/expected.yaml" in names
    assert not [n for n in names if n.startswith("tests/")]

    installed = _run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], src, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shutil.rmtree(src)  # nothing of the source copy is left to read from

    # PYTHONPATH comes before the shared venv's editable finder: check that it won.
    env["PYTHONPATH"] = str(site)
    where = _run(
        [
            sys.executable,
            "-c",
            "import gpustrata, gpustrata_policies; "
            "print(gpustrata.__file__); print(gpustrata_policies.__file__)",
        ],
        elsewhere,
        env,
    )
    assert where.returncode == 0, where.stderr
    files = where.stdout.split()
    assert len(files) == 2 and all(Path(f).is_relative_to(site) for f in files), files

    explained = _run(
        [
            sys.executable,
            "-c",
            "import sys; from gpustrata.cli.app import main; sys.exit(main(['explain', 'K004']))",
        ],
        elsewhere,
        env,
    )
    assert explained.returncode == 0, explained.stderr
    example = fixture("K004", "bad-no-toleration-no-pool.yaml").read_text(encoding="utf-8")
    assert "Example that violates it:\n" in explained.stdout
    assert "\n".join("  " + line for line in example.splitlines()) in explained.stdout
