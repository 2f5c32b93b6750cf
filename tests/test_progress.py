"""Progress: a live line on a terminal, nothing in CI or pipes, one line per step on request."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import textwrap

import pytest
from _stacks import ROOT

from gpustrata.core.progress import Progress, choose_mode

SGR = re.compile(r"\x1b\[[0-9;]*m")  # colour / style sequences (not cursor or erase)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(stream: io.StringIO, env: dict[str, str], **kwargs: object) -> str:
    with Progress(3, "plan", stream=stream, env=env, **kwargs) as progress:  # type: ignore[arg-type]
        for name in ("dev", "staging", "prod"):
            with progress.step(name):
                pass
    return stream.getvalue()


def test_terminal_gets_a_live_line_that_is_cleared() -> None:
    out = _run(FakeTty(), {"TERM": "xterm"})
    for i, name in enumerate(("dev", "staging", "prod"), 1):
        assert f"[{i}/3]" in SGR.sub("", out) and f"plan {name} ..." in out
    assert "\n" not in out  # rewritten in place, never scrolls
    assert out.count("\r") == 4  # three updates and the final clear
    assert out.endswith("\r\x1b[K")
    assert SGR.search(out)  # dim counter


def test_no_color_keeps_the_line_but_drops_colour() -> None:
    out = _run(FakeTty(), {"TERM": "xterm", "NO_COLOR": "1"})
    assert "[2/3] plan staging ..." in out
    assert not SGR.search(out)


@pytest.mark.parametrize(
    "env",
    [{"CI": "true"}, {"CI": "1", "TERM": "xterm"}, {"TERM": "dumb"}],
    ids=["ci", "ci-with-term", "dumb-terminal"],
)
def test_ci_and_dumb_terminals_are_quiet(env: dict[str, str]) -> None:
    assert _run(FakeTty(), env) == ""


def test_ci_false_is_not_ci() -> None:
    assert choose_mode(FakeTty(), {"CI": "false", "TERM": "xterm"}) == "live"


def test_pipe_is_quiet() -> None:
    assert _run(io.StringIO(), {}) == ""


def test_lines_mode_writes_one_line_per_step() -> None:
    out = _run(io.StringIO(), {"CI": "true"}, mode="lines")
    lines = out.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"\[1/3\] plan dev: \d+\.\d s", lines[0])
    assert lines[2].startswith("[3/3] plan prod: ")
    assert "\r" not in out and not SGR.search(out)


def test_failed_step_clears_the_line_and_propagates() -> None:
    stream = FakeTty()
    with pytest.raises(RuntimeError), Progress(2, "plan", stream=stream, env={}) as progress:
        with progress.step("dev"):
            pass
        with progress.step("prod"):
            raise RuntimeError("boom")
    assert progress.done == 2
    assert stream.getvalue().endswith("\r\x1b[K")


def test_long_names_are_cut_to_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "30")
    stream = FakeTty()
    progress = Progress(1, "plan", stream=stream, env={"NO_COLOR": "1"})
    with progress.step("a-very-long-stack-name-that-would-wrap"):
        first = stream.getvalue()
    progress.close()
    visible = first.replace("\r", "").replace("\x1b[K", "")
    assert len(visible) <= 29 and visible.endswith("…")


def test_real_terminal_and_real_pipe() -> None:
    """isatty() on a pseudo-terminal (live) and on a pipe (quiet), in a child process."""
    script = textwrap.dedent(
        """
        from gpustrata.core.progress import Progress
        with Progress(2, "plan") as p:
            for name in ("dev", "prod"):
                with p.step(name):
                    pass
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
    env["TERM"] = "xterm"
    env["PYTHONPATH"] = str(ROOT / "components")
    controller, terminal = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", script], stderr=terminal, env=env, check=True, timeout=60
        )
        os.close(terminal)
        received = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the child side is closed
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(controller)
    text = received.decode()
    assert "plan prod ..." in text and text.endswith("\r\x1b[K")
    piped = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=env, check=True, timeout=60
    )
    assert piped.stderr == b""
