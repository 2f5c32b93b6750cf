"""Secrets: tokens enter only as Pulumi secrets or Secret references, and never come back out.

A recognisable token is put everywhere a user might put one: Pulumi secret config
(`gpustrata:hfToken`), the stack file (misplaced in hf_token, extra_args, plaintext
config), and manifests given to `gpustrata check` (env values, flags, serveConfigV2,
Helm values, annotations, ConfigMaps, Secrets). The token must not appear in any
registered resource input, `plan` text or JSON, `check` text/JSON/SARIF, error
messages, or log records.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from _release import REFERENCE_IMAGE
from _stacks import ROOT, STACKS, stack_doc, stack_path

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.runtime.mockrun import run_program
from gpustrata.spec.loader import validate_stack

TOKEN = "hf_SentinelToken9f8e7d6c5b4a39281706"
CONFIG_KEY = "gpustrata:hfToken"


def _cli(argv: list[str], stdin: str | None = None) -> tuple[int, str]:
    """Exit code and everything written to stdout and stderr."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        if stdin is None:
            code = main(argv)
        else:
            import sys

            old = sys.stdin
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
            try:
                code = main(argv)
            finally:
                sys.stdin = old
    return code, out.getvalue()


@pytest.fixture(autouse=True)
def _all_logs(caplog: pytest.LogCaptureFixture) -> Any:
    """Every log record of every test here is checked for the token."""
    caplog.set_level(logging.DEBUG)
    yield
    for record in caplog.records:
        assert TOKEN not in record.getMessage(), record


@pytest.mark.parametrize("env", STACKS)
def test_pulumi_secret_config_becomes_a_secret_and_stays_one(env: str) -> None:
    doc = copy.deepcopy(stack_doc(env))
    for model in doc["models"]:  # the stacks' Secrets exist outside; here the stack makes them
        if model.get("hf_token"):
            model["hf_token"].pop("existing", None)
    if not any(m.get("hf_token") for m in doc["models"]):
        doc["models"][0]["hf_token"] = {"name": "hf-token", "key": "token"}
    resources = run_program(
        doc, stack=env, extra_config={CONFIG_KEY: TOKEN}, secret_keys=[CONFIG_KEY]
    )
    secrets = [r for r in resources if r.type == "kubernetes:core/v1:Secret"]
    assert secrets, "the token in Pulumi config creates the referenced Secret"
    for secret in secrets:
        assert secret.secret_paths == ("stringData",)  # marked secret on the wire
    for r in resources:
        assert TOKEN not in json.dumps(r.as_dict(), default=str), r.name
        assert TOKEN not in repr(r), r.name
    # Workloads that read the token wait for the Secret.
    secret_names = {s.name for s in secrets}
    readers = [r for r in resources if secret_names & set(r.depends_on)]
    assert readers


def test_token_secrets_in_different_namespaces_have_different_names() -> None:
    """(team-a, hf) and (team, a-hf) must not both become `...-secret-team-a-hf`."""
    doc = copy.deepcopy(stack_doc("prod"))
    first, second = doc["models"][:2]
    first["namespace"], first["hf_token"] = "team-a", {"name": "hf", "key": "token"}
    second["namespace"], second["hf_token"] = "team", {"name": "a-hf", "key": "token"}
    resources = run_program(
        doc, stack="prod", extra_config={CONFIG_KEY: TOKEN}, secret_keys=[CONFIG_KEY]
    )
    secrets = [r for r in resources if r.type == "kubernetes:core/v1:Secret"]
    placed = sorted(
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]) for r in secrets
    )
    assert placed == [("team", "a-hf"), ("team-a", "hf")]
    assert len({r.name for r in secrets}) == 2


def test_token_config_without_a_reference_is_an_error() -> None:
    doc = copy.deepcopy(stack_doc("dev"))
    for m in doc["models"]:
        m.pop("hf_token", None)
    with pytest.raises(StackError) as exc:
        run_program(doc, stack="dev", extra_config={CONFIG_KEY: TOKEN}, secret_keys=[CONFIG_KEY])
    assert "gpustrata:hfToken: is set but no model names a Secret" in str(exc.value)
    assert TOKEN not in str(exc.value)


def _stack_file(tmp_path: Path, env: str, config_line: str) -> Path:
    text = stack_path(env).read_text(encoding="utf-8")
    if CONFIG_KEY in config_line:  # the token given: the stack creates the Secrets itself
        text = text.replace("          existing: true\n", "")
    path = tmp_path / f"Pulumi.{env}.yaml"
    path.write_text(text.replace("config:\n", f"config:\n{config_line}", 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_plan_with_an_encrypted_token_shows_no_value(tmp_path: Path, fmt: str) -> None:
    path = _stack_file(tmp_path, "prod", f"  {CONFIG_KEY}:\n    secure: v1:{TOKEN}\n")
    code, output = _cli(["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", fmt])
    assert code in (0, 1), output
    assert TOKEN not in output
    if fmt == "json":
        data = json.loads(output)
        secret = [r for r in data["resources"] if r["type"] == "kubernetes:core/v1:Secret"]
        assert [r["inputs"]["stringData"] for r in secret] == ["[secret]"]


def test_a_base_revision_with_the_same_token_config_adds_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan --base REV` plans the base from its own file, secret config included: a
    change that only lowers max_model_len shows no Secret as added, and no token."""
    import shutil
    import subprocess

    git = shutil.which("git")
    assert git, "git is needed for --base REF"
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    head = _stack_file(repo / "stacks", "prod", f"  {CONFIG_KEY}:\n    secure: v1:{TOKEN}\n")
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "."], [*ident, "commit", "-q", "-m", "base"]):
        subprocess.run([git, *args], cwd=repo, check=True, capture_output=True)
    text = head.read_text(encoding="utf-8")
    assert text.count("max_model_len: 16384") == 1
    head.write_text(text.replace("max_model_len: 16384", "max_model_len: 12288"), encoding="utf-8")
    monkeypatch.chdir(repo)
    argv = ["plan", "--file", "stacks/Pulumi.prod.yaml", "--project-dir", str(ROOT)]
    code, output = _cli([*argv, "--format", "markdown", "--base", "HEAD"])
    assert code in (0, 1), output
    assert TOKEN not in output
    assert "`16384` | `12288`" in output  # the change is reported
    assert "Secret" not in output, output


def test_a_plaintext_token_in_the_stack_file_is_refused_unquoted(tmp_path: Path) -> None:
    path = _stack_file(tmp_path, "prod", f"  {CONFIG_KEY}: {TOKEN}\n")
    code, output = _cli(["plan", "--file", str(path), "--project-dir", str(ROOT)])
    assert code == 2
    assert f"{path}:4: config.{CONFIG_KEY}: is stored in plaintext" in output
    assert TOKEN not in output


def test_a_plaintext_token_hidden_by_a_repeated_key_is_refused(tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys; the plaintext first one must not pass."""
    config = f"  {CONFIG_KEY}: {TOKEN}\n  {CONFIG_KEY}:\n    secure: v1:abc\n"
    path = _stack_file(tmp_path, "prod", config)
    code, output = _cli(["plan", "--file", str(path), "--project-dir", str(ROOT)])
    assert code == 2
    assert f"{path}:5: cannot be used: duplicate key '{CONFIG_KEY}' in config" in output
    assert TOKEN not in output


@pytest.mark.parametrize(
    ("where", "mutate"),
    [
        ("hf_token", lambda m: m.__setitem__("hf_token", TOKEN)),
        ("hf_token.key", lambda m: m.__setitem__("hf_token", {"name": "hf", "key": [TOKEN]})),
        ("extra_args.api_key", lambda m: m["engine"].__setitem__("extra_args", {"api_key": TOKEN})),
        (
            "extra_args.hf-token",
            lambda m: m["engine"].__setitem__("extra_args", {"hf-token": TOKEN}),
        ),
        (
            "extra_args[api-key]",
            lambda m: m["engine"].__setitem__("extra_args", {"api-key": [TOKEN]}),
        ),
    ],
)
def test_a_misplaced_token_is_refused_without_quoting_it(
    tmp_path: Path, where: str, mutate: Any
) -> None:
    doc = copy.deepcopy(stack_doc("prod"))
    mutate(doc["models"][1])
    with pytest.raises(StackError) as exc:
        validate_stack(doc, file="stacks/Pulumi.prod.yaml")
    assert "gpustrata:stack.models[1]." in str(exc.value)
    assert TOKEN not in str(exc.value)
    # The same through the command (file, line, exit 2).
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump({"config": {"gpustrata:stack": doc}}), encoding="utf-8")
    code, output = _cli(["plan", "--file", str(path), "--project-dir", str(ROOT)])
    assert code == 2 and TOKEN not in output


def _manifests() -> str:
    """Every place a token shows up in real manifests."""
    env = [
        {"name": "HF_TOKEN", "value": TOKEN},
        {"name": "VLLM_API_KEY", "value": TOKEN},
        {"name": "SOME_SETTING", "value": TOKEN},
    ]
    container = {
        "name": "vllm",
        "image": REFERENCE_IMAGE,
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
        "args": ["--api-key", TOKEN, f"--hf-token={TOKEN}", "--tensor-parallel-size", "2"],
        "env": env,
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "llm", "annotations": {"token": TOKEN}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {
                "metadata": {"labels": {"app": "vllm"}},
                "spec": {"containers": [container], "initContainers": [dict(container)]},
            },
        },
    }
    serve = {
        "applications": [
            {
                "name": "llm",
                "import_path": "ray.serve.llm:build_openai_app",
                "runtime_env": {"env_vars": {"HF_TOKEN": TOKEN}},
                "args": {
                    "llm_configs": [
                        {
                            "model_loading_config": {"model_id": "llama"},
                            "engine_kwargs": {"hf_token": TOKEN, "tensor_parallel_size": 4},
                            "runtime_env": {"env_vars": {"HUGGING_FACE_HUB_TOKEN": TOKEN}},
                        }
                    ]
                },
            }
        ]
    }
    rayservice = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "llm", "namespace": "ray"},
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve),
            "rayClusterConfig": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "ray-head", "image": "rayproject/ray:2.46.0", "env": env}
                            ]
                        }
                    },
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "rayStartParams": {"num-gpus": "4"},
                        "template": {"spec": {"containers": [container]}},
                    }
                ],
            },
        },
    }
    others = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf"},
            "stringData": {"t": TOKEN},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"t": TOKEN}},
        {
            "apiVersion": "helm.sh/v3",
            "kind": "HelmRelease",
            "metadata": {"name": "gpu-operator", "namespace": "gpu-operator"},
            "spec": {"chart": "gpu-operator", "version": "v25.10.0", "values": {"token": TOKEN}},
        },
        # Identity (kind, namespace, name) and images are quoted by design; data is not.
        {"apiVersion": "x.io/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": TOKEN},
    ]
    return yaml.safe_dump_all([deployment, rayservice, *others])


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "markdown"])
@pytest.mark.parametrize("env", STACKS)
def test_check_never_prints_a_token(env: str, fmt: str) -> None:
    code, output = _cli(["check", "--environment", env, "--format", fmt, "-"], _manifests())
    assert code == 1, output  # K014 finds the literal tokens (mandatory)
    assert TOKEN not in output
    if fmt == "json":
        found = {(f["rule"], f["resource"]) for f in json.loads(output)["findings"]}
        assert ("K014", "Deployment/llm/vllm") in found and ("K014", "RayService/ray/llm") in found


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_plaintext_secret_like_config_is_warned_about_unquoted(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19 item 14: `aws:secretKey`, `gpustrata:apiKey` in plaintext get an advisory
    warning naming the file and line (other providers' keys: plan still runs); a `secure:`
    value and ordinary keys do not."""
    from gpustrata.cli.app import main

    value = "wJalrXUtnFEMI" + "K7MDENGbPxRfiCY"
    text = stack_path("dev").read_text(encoding="utf-8")
    text = text.replace(
        "  aws:region: us-west-2\n",
        f"  aws:region: us-west-2\n  aws:secretKey: {value}\n  gpustrata:apiKey: {value}\n"
        "  aws:accessKey:\n    secure: v1:AAAA\n",
        1,
    )
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["plan", "--file", str(path), "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert value not in out + err
    lines = text.splitlines()
    at = {
        k: 1 + next(i for i, t in enumerate(lines) if t.startswith(f"  {k}:"))
        for k in ("aws:secretKey", "gpustrata:apiKey")
    }
    for key, line in at.items():
        assert f"{path}:{line}: config.{key}: is named like a credential but stored in " in (
            out.replace("\\", "")
        ), out
    assert "aws:accessKey" not in out and "aws:region:" not in out
