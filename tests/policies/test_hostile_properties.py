"""Property-based suite for issue 19's input classes: huge numbers, special files and
control characters in object names, each through ``check`` (exit 0/1 with results, or
exit 2 with one line naming the file; never a traceback, a hang or a raw control
character). Case counts are printed in the "property-based cases" summary (``_fuzz``);
flag-name variants for the secret guard are ``tests/test_hostile_stack.py::
test_flag_name_property`` (suite ``secret-flag-names``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _release import REFERENCE_IMAGE
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import run
from test_terminal_output import RAW

sys.path.insert(0, str(REPO / "tests"))
from _fuzz import record

HUGE = st.one_of(
    st.integers(min_value=4301, max_value=6000).map(lambda n: "9" * n),  # over Python's limit
    st.integers(min_value=65, max_value=10**8).map(lambda e: f'"1e{e}"'),  # absurd exponents
    st.integers(min_value=65, max_value=10**8).map(lambda e: f'"-1e-{e}"'),
    st.sampled_from([".nan", ".inf", "-.inf", '"1e10000000"', "1e309", '"0x1p99999"']),
)
PLACES = st.sampled_from(
    [
        "resources: {limits: {nvidia.com/gpu: VALUE}}",
        "resources: {requests: {nvidia.com/gpu: VALUE}, limits: {nvidia.com/gpu: 1}}",
        "resources: {limits: {nvidia.com/gpu: 1, ephemeral-storage: VALUE}}",
        'resources: {limits: {nvidia.com/gpu: 1}}\n          args: ["--max-model-len", VALUE]',
    ]
)


def _pod(resources: str, name: str = "p") -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\n"
        f"metadata: {{name: {name}, namespace: d}}\n"
        "spec:\n  template:\n    spec:\n      containers:\n"
        f"        - name: vllm\n          image: {REFERENCE_IMAGE}\n"
        "          command: [vllm, serve, Qwen/Qwen2.5-1.5B-Instruct]\n"
        f"          {resources}\n"
    )


def _exit_ok(code: int, out: str, err: str, path: Path) -> None:
    assert "Traceback" not in err
    if code == 2:
        assert out == "" and err.startswith(f"gpustrata: {path}") and err.count("\n") == 1, err
    else:
        assert code in (0, 1) and "internal error" not in out, out


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=HUGE, place=PLACES, fmt=st.sampled_from(["text", "json"]))
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_huge_numbers_anywhere_end_in_results_or_one_line(
    tmp_path: Path, value: str, place: str, fmt: str
) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(_pod(place.replace("VALUE", value)), encoding="utf-8")
    with record("hostile-huge-numbers"):
        code, out, err = run(["check", "--format", fmt, str(path)])
        _exit_ok(code, out, err, path)
        assert value.strip('"') not in err  # a 5,000-digit number is not echoed


KINDS = st.sampled_from(["fifo", "dev-zero-link", "dangling-link", "loop-link", "folder-fifo"])


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX")
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=KINDS, suffix=st.sampled_from([".yaml", ".yml", ".json"]))
def test_special_files_are_refused_by_name(tmp_path: Path, kind: str, suffix: str) -> None:
    folder = tmp_path / f"{kind}{suffix}.d"
    folder.mkdir()
    target = folder / f"x{suffix}"
    if kind in ("fifo", "folder-fifo"):
        os.mkfifo(target)
    elif kind == "dev-zero-link":
        target.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        target.symlink_to(folder / "nothing")
    else:
        target.symlink_to(target)
    argv = ["check", str(folder if kind == "folder-fifo" else target)]
    with record("hostile-special-files"):
        code, out, err = run(argv)  # a FIFO opened blocking would hang here
        assert code == 2 and out == "" and err.startswith(f"gpustrata: {target}: "), err
        assert "gpustrata reads only regular files" in err


NAME = st.text(
    alphabet=st.sampled_from(
        [*"abc-.", "\x1b", "\x07", "\r", "\n", "\x85", "\u202e", "\u200b", "\u2066", "\x9b"]
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=NAME, fmt=st.sampled_from(["text", "markdown"]))
def test_control_characters_in_names_never_reach_text_or_markdown(
    tmp_path: Path, name: str, fmt: str
) -> None:
    path = tmp_path / "names.yaml"
    path.write_text(_pod("resources: {limits: {nvidia.com/gpu: 1}}", json.dumps(name)))
    with record("hostile-control-characters"):
        code, out, err = run(["check", "--format", fmt, str(path)])
        _exit_ok(code, out, err, path)
        assert not RAW.search(out + err), RAW.findall(out + err)
