"""`plan` reads the project as Pulumi does: Pulumi.yaml validated, stack files found in
its stackConfigDir (default: the project folder), `--project-dir` names the project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _stacks import ROOT

from gpustrata.cli.app import main


def _project(tmp_path: Path, pulumi_yaml: str, *, at_root: bool = True) -> Path:
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(pulumi_yaml)
    shutil.copy(ROOT / "__main__.py", project / "__main__.py")
    stacks = project if at_root else project / "config"
    stacks.mkdir(exist_ok=True)
    shutil.copy(ROOT / "stacks" / "Pulumi.dev.yaml", stacks / "Pulumi.dev.yaml")
    return project


def _plan(project: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["plan", "--stack", "dev", "--project-dir", str(project), "--format", "json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _without_file(data: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in data.items() if k != "file"}


def test_stack_config_dir_dot_at_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, "name: gpustrata\nruntime: python\nstackConfigDir: .\n")
    code, out, err = _plan(project, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["file"] == str(project / "Pulumi.dev.yaml")
    code, reference, _ = _plan(ROOT, capsys)
    assert code == 0
    assert _without_file(data) == _without_file(json.loads(reference))


def test_default_stack_config_dir_is_the_project_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, "name: my-llms\nruntime: {name: python}\n")
    code, out, err = _plan(project, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["file"] == str(project / "Pulumi.dev.yaml")
    # The project's name is the one Pulumi uses: the root stack resource is <project>-<stack>.
    assert data["resources"][0]["parent"] == "my-llms-dev"


def test_stack_config_dir_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = _project(
        tmp_path, "name: my-llms\nruntime: python\nstackConfigDir: config\n", at_root=False
    )
    code, out, err = _plan(project, capsys)
    assert code == 0, err
    assert json.loads(out)["file"] == str(project / "config" / "Pulumi.dev.yaml")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: [x\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
        ("runtime: python\n", "name: required"),
        ("name: p\n", "runtime: required"),
        ("name: p\nruntime: {options: {}}\n", "runtime: required"),
        ("name: p\nruntime: python\nstackConfigDir: nowhere\n", "stackConfigDir"),
        ("name: p\nruntime: python\nstackConfigDir: 3\n", "stackConfigDir: expected a string"),
        # issue 33 item 13: a project file may not lead out of the project
        ("name: p\nruntime: python\nstackConfigDir: /etc\n", "'/etc' leads outside"),
        ("name: p\nruntime: python\nstackConfigDir: ../..\n", "'../..' leads outside"),
        ("name: p\nruntime: python\nmain: /tmp/evil.py\n", "main: '/tmp/evil.py' leads outside"),
        ("name: p\nruntime: python\nmain: ../evil\n", "main: '../evil' leads outside"),
        ("name: p\nruntime: python\nmain: lnk\n", "main: 'lnk' leads outside"),
        # beyond the list: the project file gets every untrusted file's guards
        ("name: p\nruntime: python\nmain: .\nmain: ../evil\n", ":4: duplicate key 'main'"),
        ("name: p\nruntime: python\x00\n", "binary input"),
        ("a: &a [*a, *a]\nname: p\nruntime: python\n", "Pulumi.yaml"),
    ],
)
def test_a_broken_pulumi_yaml_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    project = _project(tmp_path, text)
    (project / "lnk").symlink_to(tmp_path.parent)  # a folder outside the project
    code, out, err = _plan(project, capsys)
    assert code == 2 and out == ""
    assert str(project / "Pulumi.yaml") in err and says in err, err
    assert "Traceback" not in err


def test_project_dir_plans_the_reference_project_as_the_default_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Naming the repository root with --project-dir changes nothing: the same Pulumi.yaml,
    # stackConfigDir and program are found either way.
    code, named, _ = _plan(ROOT, capsys)
    assert code == 0
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--stack", "dev", "--format", "json"]) == 0
    default = capsys.readouterr().out
    assert _without_file(json.loads(named)) == _without_file(json.loads(default))
    assert json.loads(named)["resources"], "the dev stack registers resources"
