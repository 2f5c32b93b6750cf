"""A model's config.json is hostile input (issue 33 items 1, 2, 3, 7, 8): one reader,
``gpustrata.core.modelfiles``, and the commands that reach it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _stacks import ROOT

from gpustrata.cli.app import main
from gpustrata.core.modelfiles import (
    CONFIG_MAX_BYTES,
    ModelFileError,
    read_model_config,
    read_model_json,
)

QWEN: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def _capacity(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["capacity", "--model", str(path), "--gpu", "h100-sxm-80gb"])
    out, err = capsys.readouterr()
    return code, out, err


def _text(body: str) -> bytes:
    return body.encode()


HOSTILE: dict[str, tuple[bytes, str]] = {
    "5000-digit-int": (
        _text(json.dumps(QWEN)[:-1] + ', "vocab_size2": ' + "9" * 5000 + "}"),
        "an integer of more than 4300 digits",
    ),
    "deep-nesting": (_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "deep-but-parsable": (_text("[" * 200 + "]" * 200), "not a JSON object"),
    "nested-object": (
        _text('{"a": ' * 100 + "1" + "}" * 100),
        "nested over 32 levels",
    ),
    "utf-16": (json.dumps(QWEN).encode("utf-16"), "not UTF-8 text"),
    "layers-1e12": (
        _text(json.dumps({**QWEN, "num_hidden_layers": 1e12})),
        "num_hidden_layers: 1000000000000.0 is out of range",
    ),
    "layers-int": (
        _text(json.dumps({**QWEN, "num_hidden_layers": 10**12})),
        "num_hidden_layers: 1000000000000 is out of range",
    ),
    "experts": (
        _text(json.dumps({**QWEN, "num_local_experts": 10**9, "num_experts_per_tok": 2})),
        "num_local_experts: 1000000000 is out of range",
    ),
    "text-config-heads": (
        _text(json.dumps({**QWEN, "text_config": {"num_attention_heads": 1e300}})),
        "text_config.num_attention_heads",
    ),
    "layer-types-list": (
        _text(json.dumps({**QWEN, "layer_types": ["full_attention"] * 5000})),
        "layer_types: 5,000 items",
    ),
    "duplicate-key": (
        _text(json.dumps(QWEN)[:-1] + ', "num_hidden_layers": 2}'),
        "duplicate key 'num_hidden_layers'",
    ),
    "not-an-object": (_text("[1, 2]"), "not a JSON object"),
    "nan": (_text(json.dumps({**QWEN, "hidden_size": float("nan")})), "hidden_size: nan"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_config_json_is_one_line_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, expected = HOSTILE[case]
    path = tmp_path / "config.json"
    path.write_bytes(data)
    code, out, err = _capacity(path, capsys)
    assert code == 2, out + err
    assert err.count("\n") == 1 and str(path) in err and expected in err, err
    assert "Traceback" not in err and len(err) < 600


def test_a_huge_config_json_is_refused_by_its_size_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    with path.open("wb") as file:  # sparse: 2 GB that take no disk
        file.truncate(2 << 30)
    code, _, err = _capacity(path, capsys)
    assert code == 2 and "2,147,483,648 bytes, over the 4,194,304 bytes" in err


def test_the_reader_reads_a_good_config_and_its_bounds_are_inclusive(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN, "num_hidden_layers": 1024}))
    assert read_model_config(path, tmp_path)["num_hidden_layers"] == 1024
    path.write_text(json.dumps({**QWEN, "num_hidden_layers": 1025}))
    with pytest.raises(ModelFileError, match="num_hidden_layers: 1025 is out of range"):
        read_model_config(path, tmp_path)
    # The index of weights may be larger than a config: the limit is the caller's.
    path.write_text(json.dumps({"weight_map": {"a": "x" * (CONFIG_MAX_BYTES + 1)}}))
    with pytest.raises(ModelFileError, match="over the 4,194,304 bytes"):
        read_model_json(path, tmp_path)
    assert read_model_json(path, tmp_path, max_bytes=2 * CONFIG_MAX_BYTES)["weight_map"]


def test_final_symlink_out_of_the_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({**QWEN, "_name_or_path": "SECRET-NAME"}))
    project = tmp_path / "project"
    (project / "models" / "lnk").mkdir(parents=True)
    (project / "models" / "lnk" / "config.json").symlink_to(outside)
    with pytest.raises(ModelFileError, match="resolves outside") as caught:
        read_model_config(project / "models" / "lnk" / "config.json", project)
    assert "SECRET-NAME" not in str(caught.value)
    (project / "loop.json").symlink_to(project / "loop.json")
    with pytest.raises(ModelFileError, match="cannot be resolved"):
        read_model_config(project / "loop.json", project)


def _project(root: Path, model: str) -> Path:
    """A project folder whose dev stack serves *model* (a path or an id)."""
    root.mkdir(parents=True, exist_ok=True)
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    assert "model: Qwen/Qwen2.5-1.5B-Instruct" in text
    stack = root / "Pulumi.dev.yaml"
    stack.write_text(text.replace("model: Qwen/Qwen2.5-1.5B-Instruct", f"model: {model}"))
    return stack


def test_model_dir_whose_config_links_out_of_the_project_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2: ``models/lnk`` is inside; its config.json points at a file outside."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({**QWEN, "_name_or_path": "OUTSIDE-NAME"}))
    project = tmp_path / "project"
    stack = _project(project, "models/lnk")
    (project / "models" / "lnk").mkdir(parents=True)
    (project / "models" / "lnk" / "config.json").symlink_to(outside)
    monkeypatch.chdir(project)
    code = main(["capacity", "--file", str(stack), "--project-dir", str(project)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "resolves outside" in err and "models[0].model" in err
    assert "OUTSIDE-NAME" not in out + err


def test_capacity_stack_reads_the_projects_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 8: the model path resolves against --project-dir, not the working folder
    (written as a path, './models/m': 'models/m' reads like a Hub id and is refused)."""
    project = tmp_path / "project"
    stack = _project(project, "./models/m\n        weights: {source: s3, uri: 's3://b/m/'}")
    (project / "models" / "m").mkdir(parents=True)
    (project / "models" / "m" / "config.json").write_text(
        json.dumps({**QWEN, "_name_or_path": "acme/in-the-project"})
    )
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "models" / "m").mkdir(parents=True)
    (elsewhere / "models" / "m" / "config.json").write_text(
        json.dumps({**QWEN, "_name_or_path": "acme/in-the-working-folder"})
    )
    monkeypatch.chdir(elsewhere)
    code = main(["capacity", "--file", str(stack), "--project-dir", str(project)])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "acme/in-the-project" in out and "in-the-working-folder" not in out


def test_terminal_escapes_from_config_json_never_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 7: ESC, OSC, BEL and RLO in ``_name_or_path`` and ``model_type`` are escaped."""
    path = tmp_path / "config.json"
    hostile = "acme/x\x1b]0;pwned\x07\u202e\x9b2J" + "y" * 500
    path.write_text(json.dumps({**QWEN, "_name_or_path": hostile}))
    for fmt in ("text", "json"):
        code = main(["capacity", "--model", str(path), "--gpu", "h100-sxm-80gb", "--format", fmt])
        out, err = capsys.readouterr()
        assert code in (0, 1), err
        text = out if fmt == "text" else json.dumps(json.loads(out), ensure_ascii=False)
        for char in "\x1b\x07\u202e\x9b":
            assert char not in text
        assert "acme/x\\x1b]0;pwned\\x07\\u202e" in out.replace("\\\\", "\\")
        assert "y" * 201 not in out


def test_plan_with_a_relative_project_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: CI passes ``--project-dir infra``; the program path was applied twice."""
    infra = tmp_path / "infra"
    (infra / "stacks").mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py", "stacks/Pulumi.dev.yaml"):
        shutil.copyfile(ROOT / name, infra / name)
    monkeypatch.chdir(tmp_path)
    code = main(["plan", "--stack", "dev", "--project-dir", "infra", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["environment"]
