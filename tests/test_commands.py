"""The gpustrata command end to end: plan, render, schema, and check on rendered objects."""

from __future__ import annotations

import io
import json

import jsonschema
import pytest
import yaml
from _stacks import ROOT, STACKS, stack_doc

from gpustrata.cli.app import main


@pytest.mark.parametrize("env", STACKS)
def test_plan_text_shows_every_layer(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--stack", env, "--project-dir", str(ROOT), "--verbose"])
    out = capsys.readouterr().out
    assert code == 0, out
    for title in ("Nodes (", "GPU software (", "Models, three layers side by side"):
        assert title in out
    for model in stack_doc(env)["models"]:
        assert model["name"] in out
    assert "kubeReserved.memory" in out and "[formula]" in out


def test_plan_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "prod", "--project-dir", str(ROOT), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"stack", "resources", "derived", "findings"}
    assert data["stack"] == "prod"
    types = {r["type"] for r in data["resources"]}
    assert {
        "aws:eks/nodeGroup:NodeGroup",
        "kubernetes:ray.io/v1:RayService",
        "kubernetes:apps/v1:Deployment",
    } <= types
    for r in data["resources"]:
        assert set(r) >= {"type", "name", "parent", "inputs"}
    layers = {r["name"]: r["layer"] for r in data["resources"]}
    assert layers["gpustrata-llama-70b-rayservice"] == "ray"
    assert layers["gpustrata-llama-8b-deployment"] == "vllm"
    assert layers["gpustrata-gpu-h100-ng"] == "nodes"
    assert layers["gpustrata-gpu-operator-release"] == "gpu-software"
    assert all({"key", "value", "source", "why"} <= set(d) for d in data["derived"])


def test_plan_reports_a_mandatory_finding_with_exit_1(
    mutated_stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # A TP=4 engine whose /dev/shm is 16Mi: NCCL needs more (K007, mandatory).
    path = mutated_stack("shm_size: 64Gi", "shm_size: 16Mi")
    code = main(["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    rules = {(f["rule"], f["enforcement"]) for f in data["findings"]}
    assert ("K007", "mandatory") in rules


def test_schema_validates_the_reference_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    for env in STACKS:
        jsonschema.validate(stack_doc(env), schema)
    bad = stack_doc("prod")
    bad["models"][0]["engine"]["block_size"] = 7
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


@pytest.mark.parametrize("env", STACKS)
def test_rendered_objects_pass_check(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--stack", env, "--project-dir", str(ROOT)]) == 0
    rendered = capsys.readouterr().out
    docs = list(yaml.safe_load_all(rendered))
    assert {d["kind"] for d in docs} >= {"GpuNodePool", "Deployment"}
    from gpustrata.cli.check import check_command

    parser_args = _check_args(["-", "--environment", env, "--format", "json"])
    out = io.StringIO()
    code = check_command(parser_args, stdin=io.StringIO(rendered), out=out)
    report = json.loads(out.getvalue())
    mandatory = [f for f in report["findings"] if f["enforcement"] == "mandatory"]
    assert mandatory == [] and code == 0, mandatory


def _check_args(argv: list[str]):  # type: ignore[no-untyped-def]
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    from gpustrata.cli.check import register_commands

    register_commands(sub)
    return parser.parse_args(["check", *argv])
