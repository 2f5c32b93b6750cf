"""`plan --format markdown` / `check --format markdown`: the pull-request comment.

The snapshot is the issue's done-when case: a change that raises the staging llama-8b
engine's max_model_len beyond what its L4's KV cache holds. Regenerate it after an
intended change with ``GPUSTRATA_UPDATE_SNAPSHOTS=1 python -m pytest
tests/test_markdown_report.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import escape as html_escape
from pathlib import Path

import pytest
from _stacks import ROOT, stack_path
from markdown_it import MarkdownIt

from gpustrata.cli.app import main
from gpustrata.planning.build import plan_spec
from gpustrata.spec.loader import load_stack_file
from gpustrata_policies.output.markdown import code, escape

SNAPSHOT = ROOT / "tests" / "snapshots" / "plan-staging-raise-max-model-len.md"
UPDATE = os.environ.get("GPUSTRATA_UPDATE_SNAPSHOTS") == "1"
OLD, NEW = "max_model_len: 8192", "max_model_len: 32768"
GFM = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _write_pair(root: Path) -> None:
    """root/base/ holds the staging stack as it is, root/stacks/ the raised one."""
    text = stack_path("staging").read_text(encoding="utf-8")
    assert text.count(OLD) == 1, "the staging stack changed: pick the llama-8b engine again"
    (root / "base").mkdir()
    (root / "stacks").mkdir()
    (root / "base" / "Pulumi.staging.yaml").write_text(text, encoding="utf-8")
    (root / "stacks" / "Pulumi.staging.yaml").write_text(text.replace(OLD, NEW), "utf-8")


def _plan_markdown(
    base: str, capsys: pytest.CaptureFixture[str], file: str = "stacks/Pulumi.staging.yaml"
) -> tuple[int, str, str]:
    code_ = main(
        [
            "plan",
            "--file",
            file,
            "--project-dir",
            str(ROOT),
            "--format",
            "markdown",
            "--base",
            base,
        ]
    )
    captured = capsys.readouterr()
    return code_, captured.out, captured.err


@pytest.fixture
def raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """The report of the raised stack against the file base (relative paths: stable)."""
    _write_pair(tmp_path)
    monkeypatch.chdir(tmp_path)
    exit_code, out, _ = _plan_markdown("base/Pulumi.staging.yaml", capsys)
    return exit_code, out


def test_raised_max_model_len_matches_the_snapshot(raised: tuple[int, str]) -> None:
    _, out = raised
    if UPDATE:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(out, encoding="utf-8")
    assert SNAPSHOT.exists(), (
        f"no snapshot: run with GPUSTRATA_UPDATE_SNAPSHOTS=1 to write {SNAPSHOT}"
    )
    assert out == SNAPSHOT.read_text(encoding="utf-8"), (
        "the report changed; if intended, rerun with GPUSTRATA_UPDATE_SNAPSHOTS=1 and review "
        f"the diff of {SNAPSHOT.relative_to(ROOT)}"
    )


def test_the_report_alone_says_why_raising_max_model_len_fails(
    raised: tuple[int, str],
) -> None:
    exit_code, out = raised
    raised_plan = plan_spec(load_stack_file(Path("stacks/Pulumi.staging.yaml")))
    cap = raised_plan.models["llama-8b"].capacity
    assert cap is not None and not cap.fits
    largest = f"{cap.largest_max_model_len:,}"
    assert exit_code == 1
    verdict = "❌ **Fails: 1 mandatory finding** (V004 context-fits-kv-cache)"
    change = "| `models[llama-8b].engine.max_model_len` | `8192` | `32768` |"
    finding = (
        "- **V004 context-fits-kv-cache** (mandatory) on `Deployment/inference/llama-8b` "
        "(**new in this change**)"
    )
    for sentence in (
        verdict,
        change,
        finding,
        "so vLLM refuses to start",
        f"set max\\_model\\_len to at most {largest}",
        "max\\_model\\_len **32,768** (was 8,192)",
        "full-length requests at once **0: vLLM refuses to start** (was 2)",
        f"largest max\\_model\\_len that fits {largest}",
    ):
        assert sentence in out, sentence
    # Thirty seconds: verdict, then the change, then the finding and its fix, then layers.
    order = [out.index(s) for s in (verdict, change, finding, "### Three layers per model")]
    assert order == sorted(order)
    # The base had no finding on that engine that the head keeps.
    assert "already on the base" not in out


def test_base_as_a_git_revision_reads_the_stack_file_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    git = shutil.which("git")
    assert git, "git is needed for --base REF"
    _write_pair(tmp_path)
    monkeypatch.chdir(tmp_path)
    _, from_file, _ = _plan_markdown("base/Pulumi.staging.yaml", capsys)
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    head = repo / "stacks" / "Pulumi.staging.yaml"
    shutil.copy(tmp_path / "base" / "Pulumi.staging.yaml", head)
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "."], [*ident, "commit", "-q", "-m", "base"]):
        subprocess.run([git, *args], cwd=repo, check=True, capture_output=True)
    shutil.copy(tmp_path / "stacks" / "Pulumi.staging.yaml", head)
    monkeypatch.chdir(repo)
    exit_code, from_git, _ = _plan_markdown("HEAD", capsys)
    assert exit_code == 1
    assert "Against `HEAD:stacks/Pulumi.staging.yaml`:" in from_git
    assert from_git == from_file.replace(
        "`base/Pulumi.staging.yaml`", "`HEAD:stacks/Pulumi.staging.yaml`"
    )

    # A stack file the revision does not have is a new stack: every finding is new.
    shutil.copy(head, repo / "stacks" / "Pulumi.canary.yaml")
    _, out, _ = _plan_markdown("HEAD", capsys, "stacks/Pulumi.canary.yaml")
    assert "New stack file: `HEAD:stacks/Pulumi.canary.yaml` does not exist" in out
    assert "already on the base" not in out and "(**new in this change**)" in out


def test_an_unknown_base_is_a_one_line_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_pair(tmp_path)
    monkeypatch.chdir(tmp_path)
    exit_code, _, err = _plan_markdown("no-such-branch", capsys)
    assert exit_code == 2
    err = err.strip()
    assert err.startswith("gpustrata: --base no-such-branch: not a file and not a git revision")
    assert len(err.splitlines()) == 1
    assert main(["plan", "--stack", "dev", "--project-dir", str(ROOT), "--base", "HEAD"]) == 2
    assert "add --format markdown" in capsys.readouterr().err


def _table_rows(tokens: list) -> list[int]:  # type: ignore[type-arg]
    """Cells per row of every table, in order."""
    rows, cells = [], 0
    for t in tokens:
        if t.type == "tr_open":
            cells = 0
        elif t.type in ("td_open", "th_open"):
            cells += 1
        elif t.type == "tr_close":
            rows.append(cells)
    return rows


def test_the_snapshot_parses_as_commonmark_tables(raised: tuple[int, str]) -> None:
    _, out = raised
    tokens = GFM.parse(out)
    rows = _table_rows(tokens)
    settings_table, layers_table = 1 + 1, 1 + 2  # header + rows
    assert rows[:settings_table] == [3, 3]
    assert rows[settings_table : settings_table + layers_table] == [5, 5, 5]


HOSTILE = [
    "*bold* _it_ `code` ~~strike~~",
    "[link](http://evil.example) ![img](http://evil.example/x.png)",
    "<img src=x onerror=alert(1)> &amp; &lt;",
    "a | b | c",
    "# heading",
    "- item",
    "1. first",
    "> quote",
    "$x^2$ math",
    "@org/team please look",
    "back\\slash \\* and line\nbreak",
    "<https://autolink.example>",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_escape_keeps_user_strings_literal(text: str) -> None:
    collapsed = " ".join(text.split())
    for source, wrap in ((escape(text), "{}"), (code(text), "{}"), (escape(text), "| {} |")):
        # Outside code spans an @ gets a zero-width space: GitHub mentions nobody.
        expected = collapsed if source.startswith("`") else collapsed.replace("@", "@\u200b")
        md = wrap.format(source)
        if wrap.startswith("|"):
            md = f"| h |\n|---|\n{md}\n"
        tokens = GFM.parse(md)
        inline = [t for t in tokens if t.type == "inline"][-1]
        kinds = {c.type for c in inline.children or []}
        assert kinds <= {"text", "text_special", "code_inline"}, (md, kinds)
        assert "".join(c.content for c in inline.children or []) == expected, md
        if wrap.startswith("|"):
            assert _table_rows(tokens) == [1, 1]


def test_a_hostile_model_id_renders_as_text(
    mutated_stack, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = "evil/*x*_[l](http://e.example)<b>|@org/team"
    # Two '/' make it a path in the project, which is served from where its weights are.
    weights = "\n        weights:\n          source: s3\n          uri: s3://models/evil/"
    path = mutated_stack(
        "model: meta-llama/Llama-3.1-8B-Instruct", f"model: '{hostile}'{weights}", env="staging"
    )
    main(["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", "markdown"])
    out = capsys.readouterr().out
    html = GFM.render(out)
    assert "<b>" not in html and 'href="http://e.example"' not in html
    assert html_escape(hostile, quote=False).replace("@", "@\u200b") in html
    assert set(_table_rows(GFM.parse(out))[:3]) == {5}


def test_check_markdown_groups_findings_by_severity_with_one_fix_per_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = ROOT / "policies" / "gpustrata_policies" / "rules"
    folders = [rules / "k001_gpu_requests_equal_limits", rules / "k004_gpu_pod_tolerates_pool"]
    paths = sorted(str(p) for f in folders for p in f.glob("*-*.yaml"))  # not expected.yaml
    json_code = main(["check", "--format", "json", *paths])
    data = json.loads(capsys.readouterr().out)
    md_code = main(["check", "--format", "markdown", *paths])
    out = capsys.readouterr().out
    assert md_code == json_code == 1
    mandatory = sum(f["enforcement"] == "mandatory" for f in data["findings"])
    assert out.startswith(f"## gpustrata check\n\n❌ **Fails: {mandatory} mandatory findings**")
    for rule in {f["rule"] for f in data["findings"]}:
        group = [f for f in data["findings"] if f["rule"] == rule]
        # Once per rule, or not at all when every message gives its own computed fix.
        times = 0 if all(" Fix: " in f["message"] for f in group) else 1
        assert all(out.count(str(escape(f["fix"]))) == times for f in group), rule
    headings = [line for line in out.splitlines() if line.startswith("#### ")]
    order = ["Critical", "High", "Medium", "Low"]
    ranks = [next(i for i, s in enumerate(order) if s in h) for h in headings]
    assert ranks == sorted(ranks) and len(headings) == len(
        {f["severity"] for f in data["findings"]}
    )
    assert f"Not evaluated ({len(data['not_evaluated'])})" in out
    assert "rules/k001_gpu_requests_equal_limits/bad-request-without-limit.yaml:" in out


def test_a_message_with_its_own_fix_does_not_repeat_the_rules_general_one() -> None:
    from gpustrata_policies.output.markdown import findings_markdown

    def finding(message: str) -> dict[str, str]:
        return {
            "rule": "V004",
            "name": "context-fits-kv-cache",
            "severity": "critical",
            "enforcement": "mandatory",
            "resource": "Deployment/llm/a",
            "message": message,
            "fix": "Lower max_model_len.",
        }

    own = "\n".join(findings_markdown([finding("too long. Fix: set max_model_len to 100")]))
    assert "to 100" in own and "Lower max" not in own
    plain = "\n".join(findings_markdown([finding("too long")]))
    assert "**Fix:** Lower max\\_model\\_len." in plain
    mixed = "\n".join(findings_markdown([finding("a. Fix: set 1"), finding("b")]))
    assert mixed.count("Lower max") == 1


def test_check_markdown_without_findings_passes() -> None:
    from gpustrata_policies.findings import NotEvaluated, Report
    from gpustrata_policies.output.formats import render

    report = Report(objects=3, not_evaluated=[NotEvaluated("K004", "Pod/a/b", "no pool | known")])
    out = render(report, "markdown")
    assert out.startswith("## gpustrata check\n\n✅ **Passes**: no findings · 3 objects checked")
    assert "| K004 | `Pod/a/b` | no pool \\| known |" in out
    assert _table_rows(GFM.parse(out)) == [3, 3]


DOC = ROOT / "docs" / "howto" / "review-a-change.md"


def _fenced(page: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page, flags=re.S)


def test_the_docs_excerpt_is_the_snapshot() -> None:
    (excerpt,) = _fenced(DOC.read_text(encoding="utf-8"), "markdown")
    snapshot = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    lines = [line for line in excerpt.splitlines() if line not in ("", "...")]
    missing = [line for line in lines if line not in snapshot]
    assert not missing, f"{DOC.name} quotes lines the snapshot no longer has: {missing}"


def test_the_docs_commands_parse() -> None:
    from gpustrata.cli.app import build_parser

    page = DOC.read_text(encoding="utf-8")
    commands = [
        line.strip().split(" > ")[0].split(" || ")[0]
        for block in _fenced(page, "bash") + _fenced(page, "yaml")
        for line in block.splitlines()
        if line.strip().startswith("gpustrata ")
    ]
    assert len(commands) >= 3
    for command in commands:
        argv = [
            a.replace('"', "").replace("$STACK", "prod").replace("$BASE", "origin/main")
            for a in command.split()[1:]
        ]
        args = build_parser().parse_args(argv)
        assert args.func is not None, command


def test_the_planner_says_an_engine_would_not_start_unless_a_rule_does(tmp_path: Path) -> None:
    from gpustrata.reports.markdown import engine_problems

    _write_pair(tmp_path)
    plan = plan_spec(load_stack_file(tmp_path / "stacks" / "Pulumi.staging.yaml"))
    (problem,) = engine_problems(plan)
    cap = plan.models["llama-8b"].capacity
    assert cap is not None
    assert problem.startswith("**llama-8b: vLLM would refuse to start.**")
    assert f"max\\_model\\_len to at most {cap.largest_max_model_len:,}" in problem
    v004 = {"rule": "V004", "resource": "Deployment/inference/llama-8b"}
    assert engine_problems(plan, [v004]) == []
    assert engine_problems(plan_spec(load_stack_file(stack_path("staging")))) == []


def test_settings_are_compared_by_name_not_position() -> None:
    from gpustrata.reports.compare import MISSING, settings_changes

    before = {"models": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]}
    after = {"models": [{"name": "b", "replicas": 3}, {"name": "a", "replicas": 1}]}
    changes = settings_changes(before, after)
    assert [(c.path, c.before, c.after) for c in changes] == [("models[b].replicas", 2, 3)]
    after["models"].append({"name": "c", "replicas": 1})
    del after["models"][1]
    changes = settings_changes(before, after)
    assert [(c.path, c.before, c.after) for c in changes] == [
        ("models[c]", MISSING, "added"),
        ("models[a]", "present", MISSING),
        ("models[b].replicas", 2, 3),
    ]
