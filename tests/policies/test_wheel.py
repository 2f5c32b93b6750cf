"""A built wheel (not the editable install) carries the rule folders' metadata and fixtures, so
``gpustrata explain`` prints its example from an installed copy, away from the source tree."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from _wheel import build_wheel, clean_env
from conftest import fixture


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_installed_wheel_explains_with_its_example(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpustrata_policies/rules/k004_gpu_pod_tolerates_pool/expected.yaml" in names
    # Every rule's metadata: the rules cannot load without it.
    metas = [
        n for n in names if n.startswith("gpustrata_policies/rules/") and n.endswith("/meta.yaml")
    ]
    assert len(metas) == len([n for n in names if n.endswith("/rule.py")]) > 50
    assert not [n for n in names if n.startswith("tests/")]
    # Each catalogue file's prebuilt cache ships beside it (a start reads it, not the YAML).
    data = "gpustrata/catalog/data/"
    sources = [n for n in names if n.startswith(data) and n.count("/") == 3 and n.endswith("ml")]
    caches = {n for n in names if n.startswith(data + "cache/")}
    assert len(sources) > 10
    assert caches == {f"{data}cache/{n[len(data) :].removesuffix('.yaml')}.json" for n in sources}

    installed = _run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)], elsewhere, env
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

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
    example = fixture("K004", "bad-kubeadm-toleration-value-misses.yaml").read_text(
        encoding="utf-8"
    )
    assert "Example that violates it:\n" in explained.stdout
    assert "\n".join("  " + line for line in example.splitlines()) in explained.stdout

    # The installed catalogues read their caches: each one's digest matches its YAML.
    cached = _run(
        [
            sys.executable,
            "-c",
            "from gpustrata.catalog import packaged as p; print(sum("
            "p._cached_document(n, p.packaged_text(n)) is p._STALE for n in "
            "('data/gpus.yaml', 'data/instances.yaml', 'data/compat-vllm.yaml')))",
        ],
        elsewhere,
        env,
    )
    assert cached.returncode == 0 and cached.stdout.split() == ["0"], cached.stderr
