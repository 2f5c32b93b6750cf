"""The pack as `pulumi policy publish` ships it and a stack that enforces it installs it.

Publishing uploads only the ``policies/`` folder (pkg/backend/httpstate/policypack.go:
``archive.TGZ(pwd, "package", ...)``); installing unpacks it, keeps (or sets) the
``virtualenv`` runtime option and installs ``requirements.txt`` into that virtualenv
(``installRequiredPolicy``). The engine then starts the analyzer shim
(``pulumi-analyzer-policy-python ENGINE .  -virtualenv=venv``), which runs
``venv/bin/python -u -m pulumi.policy ENGINE .`` in the pack folder. This test does the
same with a wheel built from this tree standing in for the released one (the only
thing fetched from an index is the wheel's dependencies). It takes about 2-3 minutes
(a fresh virtualenv with pulumi, pulumi-kubernetes and pulumi-aws).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from _grpc import plugin_channel
from _wheel import build_wheel, clean_env
from conftest import REPO, fixture

grpc = pytest.importorskip("grpc")
from google.protobuf import empty_pb2, struct_pb2  # noqa: E402
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc  # noqa: E402

from gpustrata_policies import all_rules  # noqa: E402
from gpustrata_policies.inputs.manifests import load_paths  # noqa: E402

POLICIES = REPO / "policies"


def _version() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def test_pack_pins_the_wheel_it_was_built_with() -> None:
    """requirements.txt pins the gpustrata release of the pack's own version, and the
    pack declares its virtualenv the way the analyzer shim reads it."""
    pins = [
        line.strip()
        for line in (POLICIES / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert f"gpustrata=={_version()}" in pins
    assert not [p for p in pins if p.startswith("-e") or p.startswith(".")]
    project = yaml.safe_load((POLICIES / "PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    assert project["version"] == _version()


@pytest.mark.slow
def test_published_pack_installs_and_serves(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    pack = tmp_path / "package"
    shutil.copytree(
        POLICIES, pack, ignore=shutil.ignore_patterns("__pycache__", "venv", "*.egg-info")
    )
    env = clean_env()
    venv = pack / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--find-links",
            str(wheel.parent),
            "-r",
            "requirements.txt",
        ],
        cwd=pack,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout[-4000:] + installed.stderr[-4000:]

    # As the shim runs it: the venv's python on PATH, from the pack folder, nothing else.
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    with plugin_channel(
        [str(venv / "bin" / "python"), "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=pack,
        env=env,
        no_port="installed pack did not print a port",
        timeout=60,
    ) as channel:
        stub = analyzer_pb2_grpc.AnalyzerStub(channel)
        info = stub.GetAnalyzerInfo(empty_pb2.Empty())
        assert info.name == "gpustrata"
        assert {p.name for p in info.policies} == {r.meta.name for r in all_rules()}

        bad = load_paths([str(fixture("K001", "bad-request-without-limit.yaml"))])[0].raw
        props = struct_pb2.Struct()
        props.update(dict(bad))
        token = "kubernetes:apps/v1:Deployment"
        resp = stub.Analyze(
            analyzer_pb2.AnalyzeRequest(
                type=token,
                properties=props,
                urn=f"urn:pulumi:prod::gpustrata::{token}::vllm",
                name="vllm",
            )
        )
        assert {d.policyName for d in resp.diagnostics} == {"gpu-requests-equal-limits"}
