"""The one ``gpustrata`` tree: commands that only plan load no Pulumi; one error style."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _stacks import ROOT

from gpustrata.cli.app import build_parser, main

_PROBE = (
    "import sys; {code}; "
    "bad = sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')); "
    "print(bad, file=sys.stderr); sys.exit(3 if bad else 0)"
)


def _pulumi_free(code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'components'}:{ROOT / 'policies'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_planning_imports_no_pulumi() -> None:
    _pulumi_free("import gpustrata.planning.build")


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--stack", "dev"],
        ["schema"],
        ["capacity", "--stack", "dev"],
        [
            "size",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
            "--concurrency",
            "8",
        ],
        ["explain", "K004"],
        ["schema", "--profile"],
        ["profile", "--from-nodes", "tests/data/profiles/nodes-kubeadm-a100.yaml"],
        [
            "check",
            "policies/gpustrata_policies/rules/k001_gpu_requests_equal_limits/bad-request-without-limit.yaml",
        ],
    ],
    ids=lambda argv: "-".join(a for a in argv[:2] if not a.startswith("tests/")),
)
def test_commands_that_only_plan_import_no_pulumi(argv: list[str]) -> None:
    # The exit code of the command itself is not the point: `check` exits 1 on K001.
    _pulumi_free(
        f"from gpustrata.cli import main; import contextlib, io; "
        f"f = io.StringIO(); c = contextlib.redirect_stdout(f); c.__enter__(); main({argv!r})"
    )


def test_check_of_a_small_file_loads_no_stack_models() -> None:
    """`check` starts without pydantic, the stack models and the hardware catalogue: the
    --help of `capacity` and `size` named their closed sets through the stack models,
    and every command paid for loading them (issue 35: 0.44 -> 0.19 s CPU)."""
    argv = ["check", "policies/gpustrata_policies/rules/k003_gpu_pool_tainted"]
    code = (
        "import sys, io, contextlib; from gpustrata.cli import main; "
        f"f = io.StringIO(); c = contextlib.redirect_stdout(f); c.__enter__(); main({argv!r}); "
        "c.__exit__(None, None, None); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' "
        "or m.startswith(('gpustrata.spec', 'gpustrata.catalog.hardware'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'components'}:{ROOT / 'policies'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_every_command_is_in_the_one_tree() -> None:
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    assert set(sub.choices) == {
        "plan",
        "render",
        "schema",
        "capacity",
        "size",
        "check",
        "explain",
        "profile",
        "init",
        "completion",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render"], "name a stack with --stack dev|staging|prod or a file with --file"),
        (["plan", "--stack", "dev", "--base", "main"], "--base compares in the markdown report"),
        (["check", "no/such/dir"], "no/such/dir: no such file or directory"),
        (["explain", "K999"], "no rule 'K999'; known rules: "),
        (["capacity", "--model", "no-such-model"], "--model 'no-such-model'"),
    ],
    ids=["render", "plan", "check", "explain", "capacity"],
)
def test_one_error_style(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main([*argv, *(["--project-dir", str(ROOT)] if argv[0] in ("render", "plan") else [])]) == 2
    )
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"gpustrata: {message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_each_command_help_is_the_docstring_of_what_it_runs() -> None:
    """A command's words live once: its summary and description are the two paragraphs of
    the docstring of the function it runs (cli/command.py)."""
    import argparse
    import inspect

    (sub,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {c.dest: c.help for c in sub._choices_actions}
    assert set(summaries) == set(sub.choices)
    for name, parser in sub.choices.items():
        run = parser.get_default("func")
        summary, description = inspect.cleandoc(run.__doc__).split("\n\n")
        assert summaries[name] == " ".join(summary.split()), name
        assert parser.description == " ".join(description.split()), name
        assert "\n" not in (parser.description or "") and "  " not in (parser.description or "")


def test_a_command_without_summary_and_description_is_refused() -> None:
    import argparse

    from gpustrata.cli.command import add_command

    def bare(args: argparse.Namespace) -> int:
        """Only one paragraph."""
        return 0

    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(ValueError, match="bare: its docstring needs a summary and a description"):
        add_command(sub, "bare", bare)


SMALL_CHECK = (
    "policies/gpustrata_policies/rules/k001_gpu_requests_equal_limits/good-limits-only.yaml"
)
"""benchmarks/bench_check.py's small check: a vLLM Pod on an unknown GPU, judged with the
catalogues (pydantic) on every catalogued candidate."""
_NOT_FOR_A_POD = (
    "pulumi",
    "grpc",
    "jsonschema",
    "gpustrata.spec",
    "gpustrata.planning",
    "gpustrata.render",
    "gpustrata.runtime",
    "gpustrata.components",
    "gpustrata.catalog.charts",  # read once a HelmRelease, add-on or DRA driver is
    "gpustrata.catalog.kubeai",  # once a KubeAI Model is
    "gpustrata.catalog.llmaz",  # once an llmaz Playground is
)


@pytest.mark.parametrize("plugins", [None, ""], ids=["default", "opted-in"])
def test_small_check_loads_only_what_a_pod_needs(plugins: str | None) -> None:
    """The `gpustrata` process checking one vLLM Pod loads the catalogues it judges with
    but not the stack, planner, Pulumi or the catalogues of kinds it lacks, and skips
    pydantic's plugin discovery (a scan of every installed distribution's entry points)
    unless PYDANTIC_DISABLE_PLUGINS is set, even empty (issue 35: a small check < 0.5 s)."""
    code = (
        "import contextlib, io, json, sys, importlib.metadata as md\n"
        "scans = []\n"
        "real = md.entry_points\n"
        "md.entry_points = lambda **kw: scans.append(kw) or real(**kw)\n"
        f"sys.argv = ['gpustrata', 'check', {SMALL_CHECK!r}]\n"
        "from gpustrata.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    rc = main()\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'scans': len(scans), "
        "'modules': sorted(sys.modules)}))\n"
    )
    env = {"PYTHONPATH": f"{ROOT / 'components'}:{ROOT / 'policies'}", "PATH": "/usr/bin:/bin"}
    if plugins is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = plugins
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["rc"] == 0 and "1 object(s) checked" in found["out"], found["out"]
    modules = found["modules"]
    assert "gpustrata.catalog.hardware" in modules  # the engine was judged with the catalogues
    assert [m for m in modules if m.startswith(_NOT_FOR_A_POD)] == []
    assert found["scans"] == (0 if plugins is None else 1)
