"""``gpustrata init``: a project that plans with no findings, from the installed release.

The last test is the slow one (marked ``slow``, a few minutes, in the default run): it
builds the wheel, installs it into a fresh virtualenv outside the repository with only its
declared dependencies (pinned by constraints.txt, from the package index and pip's cache)
and runs ``gpustrata init demo && cd demo && gpustrata plan --stack dev`` there.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _wheel import REPO, build_wheel, clean_env

from gpustrata.cli.app import main
from gpustrata.cli.init import project_files

TEMPLATE = REPO / "pulumi-template"


def _init(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["init", *argv])
    return code, capsys.readouterr().err


def _plan(project: Path, stack: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", "--project-dir", str(project), "--stack", stack, "--format", "json"])
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--provisioner", "karpenter"],
        ["--cluster-mode", "existing", "--model", "meta-llama/Llama-3.1-8B-Instruct"],
    ],
    ids=["default", "karpenter", "existing-8b"],
)
def test_every_scaffolded_stack_plans_with_no_findings(
    tmp_path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "demo"
    code, err = _init([str(project), "--requirement", "gpustrata==0.1.0", *flags], capsys)
    assert (code, err) == (0, "")
    stacks = sorted(p.name for p in project.glob("Pulumi.*.yaml"))
    assert stacks == ["Pulumi.dev.yaml", "Pulumi.prod.yaml", "Pulumi.staging.yaml"]
    for stack in ("dev", "staging", "prod"):
        if flags and stack == "staging":
            continue  # the variants: dev (relaxed) and prod (strictest) are enough
        code, data = _plan(project, stack)
        mandatory = [f for f in data["findings"] if f["enforcement"] == "mandatory"]
        assert (code, mandatory) == (0, []), (stack, data["findings"])
        if not flags:
            assert data["findings"] == [], (stack, data["findings"])
        assert data["environment"]["enforced"] == stack
        assert "warnings" not in data


def test_the_scaffold_references_the_release_not_the_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "demo"
    requirement = "gpustrata @ git+https://git.example/acme/gpustrata@v0.2.0"
    assert _init([str(project), "--requirement", requirement], capsys)[0] == 0
    assert requirement in (project / "requirements.txt").read_text().splitlines()
    assert (project / "policy" / "requirements.txt").read_text().strip() == requirement
    assert (
        "gpustrata_policies.pulumi_pack import serve"
        in (project / "policy" / "__main__.py").read_text()
    )
    hooks = yaml.safe_load((project / ".pre-commit-config.yaml").read_text())
    (hook,) = hooks["repos"][0]["hooks"]
    assert hook["additional_dependencies"] == [requirement]
    workflow = yaml.safe_load((project / ".github" / "workflows" / "gpustrata.yml").read_text())
    steps = [s.get("run") for s in workflow["jobs"]["plan"]["steps"]]
    assert "pip install -r requirements.txt" in steps
    assert "gpustrata plan --stack ${{ matrix.stack }}" in steps
    # Nothing names this repository's layout (constraints.txt, components/, stacks/).
    for path in project.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not any(x in text for x in ("constraints.txt", "components/", "stacks/")), path
    project_file = yaml.safe_load((project / "Pulumi.yaml").read_text())
    assert project_file["name"] == "demo" and project_file["runtime"]["name"] == "python"


def test_init_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    code, err = _init([str(tmp_path), "--name", "demo"], capsys)
    assert code == 2
    assert err == (
        f"gpustrata: {tmp_path / 'Pulumi.yaml'} already exists; init writes only new files: "
        "choose an empty folder\n"
    )
    assert (tmp_path / "Pulumi.yaml").read_text() == "name: mine\nruntime: python\n"


def test_karpenter_needs_a_created_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / "x"), "--provisioner", "karpenter", "--cluster-mode", "existing"]
    code, err = _init(argv, capsys)
    assert code == 2 and "--provisioner karpenter needs --cluster-mode create" in err
    assert not (tmp_path / "x").exists()


def template_files() -> dict[str, str]:
    """pulumi-template/'s files as `gpustrata init --pulumi-template` writes them now, with
    the folder's own requirement line (``tools/regen.py`` writes them: the scaffold names
    the reference vLLM image, so a release bump changes it)."""
    args = argparse.Namespace(
        pulumi_template=True,
        model="Qwen/Qwen2.5-1.5B-Instruct",
        instance_type="g6.xlarge",
        cluster_mode="create",
        provisioner="managed-node-group",
    )
    requirement = (TEMPLATE / "requirements.txt").read_text().splitlines()[-1]
    assert requirement.startswith("gpustrata @ git+")
    return project_files("${PROJECT}", args, requirement)


def test_the_pulumi_template_folder_is_the_scaffold() -> None:
    """pulumi-template/ (for `pulumi new`) is `gpustrata init --pulumi-template` output;
    `python tools/regen.py --only pulumi-template` rewrites it."""
    expected = template_files()
    found = {
        str(p.relative_to(TEMPLATE)): p.read_text() for p in TEMPLATE.rglob("*") if p.is_file()
    }
    assert found == expected
    template = yaml.safe_load(expected["Pulumi.yaml"])["template"]
    assert template["config"]["aws:region"]["default"] == "us-west-2"


@pytest.mark.slow
def test_the_built_wheel_scaffolds_and_plans_in_a_fresh_venv(tmp_path: Path) -> None:
    """Done-when of issue 34: outside the repository, a fresh venv with the built wheel
    (and only its declared dependencies) runs `gpustrata init demo && cd demo &&
    gpustrata plan --stack dev` with exit 0 and no findings. The slow test: minutes."""
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    env = clean_env()
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    installed = subprocess.run(
        [*pip, "install", "-c", str(REPO / "constraints.txt"), str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    run = subprocess.run(
        ["bash", "-c", "gpustrata init demo && cd demo && gpustrata plan --stack dev"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\nFindings: 0\n" in run.stdout + "\n", run.stdout
    # The gpustrata that ran is the venv's, not this repository's editable install.
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import gpustrata; print(gpustrata.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
