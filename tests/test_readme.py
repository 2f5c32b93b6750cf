"""README and quickstart say what a newcomer needs (issue 34 items 1, 2 and 7).

README's two set-up commands (the test command is the one CI runs on a clean clone), a
command table naming every command of the CLI, a five-minute path for each of the three
uses, the release a user installs; the quickstart's deploy section has the policy pack's
virtualenv step and a `size` section. Nothing here is a copy of the CLI's command list:
it is read from the argparse tree.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpustrata import __version__
from gpustrata.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICKSTART = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")


def _commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "==SUPPRESS==" and a.choices)
    assert isinstance(sub.choices, dict)
    return set(sub.choices)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def test_readme_has_the_two_set_up_commands_and_ci_runs_the_test_one() -> None:
    blocks = re.findall(
        r"```bash\n(.*?)```", _section(README, "## Set up on a fresh machine"), re.S
    )
    plan, tests = (b.strip() for b in blocks)
    assert plan.endswith("pip install -c constraints.txt -e . && gpustrata plan --stack dev")
    assert "python -m pytest" in tests
    # CI (.ci/run, on a clean clone with no sibling folder) ends with README's test command.
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci_lines[-1] == tests


def test_no_test_reads_a_folder_beside_the_repository() -> None:
    """Item 1: the tests need no sibling folder (the field corpus is copied under tests/data)."""
    for path in (ROOT / "tests").rglob("*.py"):
        if path == Path(__file__):
            continue
        code = [line.split("#", 1)[0] for line in path.read_text(encoding="utf-8").splitlines()]
        for line in code:
            assert not re.search(r"""\.\./shared|/\s*["']shared["']|shared/field""", line), path


def test_readme_command_table_names_every_command() -> None:
    table = re.findall(r"^\| `gpustrata ([a-z]+)", README, re.M)
    assert set(table) == _commands()


def test_readme_has_a_five_minute_path_for_each_use() -> None:
    uses = _section(README, "## Three uses, five minutes each")
    items = re.findall(r"^\d\. \*\*(.+?)\*\*", uses, re.M)
    assert len(items) == 3
    for command in ("gpustrata init", "gpustrata plan", "gpustrata size", "gpustrata check"):
        assert command in uses


def test_readme_and_changelog_name_the_released_version() -> None:
    """Item 2: a version, its tag, a changelog entry and an install line for a user's own
    Pulumi project."""
    assert f'pip install "gpustrata @ git+<URL>@v{__version__}"' in README
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M)
    assert releases[0] == __version__
    pre_commit = (ROOT / "docs" / "examples" / "pre-commit-config.yaml").read_text("utf-8")
    assert f"rev: v{__version__}" in pre_commit


def test_quickstart_deploy_has_the_policy_pack_venv_step_and_size() -> None:
    deploy = _section(QUICKSTART, "## Deploy")
    venv = deploy.index("python -m venv policies/venv")
    install = deploy.index("policies/venv/bin/python -m pip install")
    assert venv < install < deploy.index("pulumi preview --policy-pack policies")
    assert "gpustrata size" in _section(QUICKSTART, "## Size a model before you deploy it")


def test_the_engines_extra_stays_optional() -> None:
    """What to build: an `engines` extra that stays optional (vLLM and Ray are never a
    dependency of the package itself; the fresh-venv test installs without them)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not names & {"vllm", "ray"}, names
    engines = project["optional-dependencies"]["engines"]
    assert any(d.startswith("vllm==") for d in engines)
    assert any(d.startswith("ray[serve]==") for d in engines)
