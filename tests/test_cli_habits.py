"""CLI habits (issue 34 item 9): completion, short flags, --quiet, --help with exit codes,
``explain`` listing the rules, a compact plan with --verbose for the workings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _stacks import ROOT

from gpustrata.cli.app import build_parser, main
from gpustrata_policies.evaluate import all_rules


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shells_script(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "_ARGCOMPLETE" in script and "gpustrata" in script
    if shell == "fish":
        assert "complete --command gpustrata" in script
    else:
        assert "complete " in script or "compdef" in script


def test_completion_answers_from_the_argparse_tree(tmp_path: Path) -> None:
    """What the script runs: gpustrata with _ARGCOMPLETE set, answering on fd 8."""
    out = tmp_path / "answer"
    line = "gpustrata plan --ve"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -c "from gpustrata.cli import main; main()" 8>"{out}"'],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    assert out.read_text().split() == ["--verbose", "--verify-placement"]


def test_explain_without_a_rule_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [r.meta.id for r in all_rules()]
    assert lines[0].split()[:2] == [all_rules()[0].meta.id, all_rules()[0].meta.name]


def test_every_command_says_what_it_does_and_its_exit_codes() -> None:
    parser = build_parser()
    assert "exit codes:" in (parser.epilog or "")
    sub = next(a for a in parser._actions if a.dest == "==SUPPRESS==" and a.choices)
    assert isinstance(sub.choices, dict)
    for name, command in sub.choices.items():
        assert command.description, name
        if name in {"plan", "check", "render", "explain", "init"}:
            assert "Exit 0" in command.description, name


def test_short_flags_mean_the_long_ones(capsys: pytest.CaptureFixture[str]) -> None:
    long = main(["plan", "--stack", "dev", "--project-dir", str(ROOT), "--format", "json"])
    long_out = capsys.readouterr().out
    short = main(["plan", "-s", "dev", "-C", str(ROOT), "-o", "json"])
    assert (short, capsys.readouterr().out) == (long, long_out)


def test_plan_is_compact_and_verbose_shows_the_workings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """prod (2 models): 17 lines, none of the 1,000-character derived-value lines; the
    derived values and resources come with --verbose."""
    assert main(["plan", "-s", "prod", "-C", str(ROOT)]) == 0
    compact = capsys.readouterr().out.splitlines()
    assert main(["plan", "-s", "prod", "-C", str(ROOT), "-v"]) == 0
    verbose = capsys.readouterr().out.splitlines()
    assert len(compact) <= 20 < 150 <= len(verbose)
    assert max(map(len, compact)) <= 250 < max(map(len, verbose))
    assert "Derived values (value <- working [source])" in verbose
    assert "Derived values (value <- working [source])" not in compact
    assert "Findings: 0" in compact and "Models, three layers side by side" in compact


def test_quiet_prints_nothing_when_clean_and_the_findings_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-q", "-s", "dev", "-C", str(ROOT)]) == 0
    assert capsys.readouterr().out == ""
    bad = tmp_path / "Pulumi.dev.yaml"
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text(encoding="utf-8")
    bad.write_text(text.replace('cpu: "3"', 'cpu: "30"'), encoding="utf-8")
    assert main(["plan", "-q", "-f", str(bad), "-C", str(ROOT)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Findings: 1\n  K005 mandatory Deployment/inference/qwen-1-5b:")
    assert "Derived values" not in out
    manifests = (
        ROOT / "policies" / "gpustrata_policies" / "rules" / "k001_gpu_requests_equal_limits"
    )
    good = sorted(manifests.glob("good-*.yaml"))[0]
    assert main(["check", "-q", "-e", "dev", str(good)]) == 0
    assert capsys.readouterr().out == ""
