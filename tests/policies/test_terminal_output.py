"""Terminal and log injection (issue 19 item 15): what a manifest controls is printed with
C0/C1 controls, line breaks, bidi overrides and zero-width characters escaped in text and
markdown; JSON keeps the exact value (its encoder escapes controls itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpustrata.cli.check import main
from gpustrata.core.terminal import printable

HOSTILE = "evil\x1b[2J\x07\r\nK001 forged [mandatory]\u202e\u200bx"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _manifest(tmp_path: Path) -> Path:
    name = json.dumps(HOSTILE)  # a YAML double-quoted scalar with \x1b, \u202e ...
    image = json.dumps(f"vllm/vllm-openai:latest{HOSTILE}")
    path = tmp_path / "hostile.yaml"
    path.write_text(
        "apiVersion: apps/v1\nkind: Deployment\n"
        f"metadata: {{name: {name}, namespace: d}}\n"
        "spec:\n  template:\n    spec:\n      containers:\n"
        f"        - name: vllm\n          image: {image}\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    return path


def test_printable_escapes_controls_bidi_and_zero_width() -> None:
    assert printable("a\x1b[31mb\x07c\r\nd\u202ee\u200bf\x85") == (
        "a\\x1b[31mb\\x07c\\r\\nd\\u202ee\\u200bf\\x85"
    )
    assert printable("plain text, ünïcödé, 日本") == "plain text, ünïcödé, 日本"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_escape_what_the_manifest_controls(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", "--format", fmt, str(_manifest(tmp_path))])
    out = capsys.readouterr().out
    assert code == 1  # K004 and V011 at least: findings name the hostile Deployment
    assert not RAW.search(out), RAW.findall(out)
    assert "x1b" in out and "u202e" in out  # escaped (markdown escapes the backslash too)
    # Every line break in the output is gpustrata's own: no line starts with the forged id.
    assert not any(line.startswith("K001 forged") for line in out.splitlines())


def test_json_keeps_the_exact_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["check", "--format", "json", str(_manifest(tmp_path))])
    out = capsys.readouterr().out
    assert not RAW.search(out)  # json.dumps escapes controls (ensure_ascii or not)
    resources = {f["resource"] for f in json.loads(out)["findings"]}
    assert f"Deployment/d/{HOSTILE}" in resources
