"""What a change under review cannot do: relax enforcement by declaring a laxer environment.

The stack file (``environment:``, ``gpustrata:environment``) is part of the pull request;
the stack's name and ``GPUSTRATA_ENVIRONMENT`` come from CI. Declared environments may
make checks stricter, never more relaxed (docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from _grpc import policy_pack
from conftest import REPO

grpc = pytest.importorskip("grpc")
from google.protobuf import empty_pb2  # noqa: E402

from gpustrata.cli.app import main  # noqa: E402
from gpustrata.reports.text import rules_environment  # noqa: E402


@pytest.mark.parametrize(
    ("declared", "stack", "expected"),
    [
        ("dev", "prod", "prod"),
        ("prod", "dev", "prod"),
        ("dev", "staging", "staging"),
        # A name that is no environment follows the file (with a warning, tested below).
        ("staging", "my-sandbox", "staging"),
        ("dev", "s13", "dev"),
    ],
)
def test_plan_enforces_the_stricter_of_file_and_stack_name(
    declared: str, stack: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUSTRATA_ENVIRONMENT", raising=False)
    assert rules_environment(declared, stack) == expected


def test_ci_chooses_the_environment_for_other_stack_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSTRATA_ENVIRONMENT", "dev")
    assert rules_environment("prod", "alice-sandbox") == "dev"  # CI configuration is trusted


def test_a_prod_stack_declaring_dev_is_still_checked_as_prod(tmp_path: Path) -> None:
    text = (REPO / "stacks" / "Pulumi.prod.yaml").read_text(encoding="utf-8")
    text = text.replace("environment: prod", "environment: dev", 1)
    text = text.replace(
        "enable_prefix_caching: true",
        "enable_prefix_caching: true\n          enforce_eager: true",
        1,
    )
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", "--file", str(path), "--project-dir", str(REPO), "--format", "json"])
    v008 = [f for f in json.loads(out.getvalue())["findings"] if f["rule"] == "V008"]
    assert v008 and {f["enforcement"] for f in v008} == {"mandatory"}  # prod: mandatory
    assert code == 1


def _levels(env: dict[str, str]) -> dict[str, int]:
    base = {k: v for k, v in os.environ.items() if k != "GPUSTRATA_ENVIRONMENT"}
    with policy_pack(REPO, {**base, **env}) as stub:
        info: Any = stub.GetAnalyzerInfo(empty_pb2.Empty())
    return {p.name: p.enforcementLevel for p in info.policies}


def test_the_pack_ignores_a_laxer_environment_in_stack_config() -> None:
    config = json.dumps({"gpustrata:environment": "dev"})
    prod = _levels({"PULUMI_STACK": "org/gpustrata/prod", "PULUMI_CONFIG": config})
    dev = _levels({"PULUMI_STACK": "org/gpustrata/dev"})
    # no-eager-in-production (V008): advisory in dev, mandatory in prod.
    assert prod["no-eager-in-production"] != dev["no-eager-in-production"]
    stricter = _levels(
        {
            "PULUMI_STACK": "org/gpustrata/dev",
            "PULUMI_CONFIG": json.dumps({"gpustrata:environment": "prod"}),
        }
    )
    assert stricter == prod
    # A stack named like no environment follows its config's claim, else counts as prod.
    other = _levels({"PULUMI_STACK": "org/gpustrata/prod-eu", "PULUMI_CONFIG": config})
    assert other == dev
    assert _levels({"PULUMI_STACK": "org/gpustrata/prod-eu"}) == prod


def test_plan_says_which_environment_it_enforced_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUSTRATA_ENVIRONMENT", raising=False)
    path = tmp_path / "Pulumi.alice.yaml"  # declares environment: staging
    text = (REPO / "stacks" / "Pulumi.staging.yaml").read_text(encoding="utf-8")
    path.write_text(text)
    line = 1 + text.splitlines().index(
        next(x for x in text.splitlines() if x.strip() == "environment: staging")
    )
    argv = ["plan", "--file", str(path), "--project-dir", str(REPO)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main([*argv, "--format", "json"])
    data = json.loads(out.getvalue())
    assert data["environment"]["enforced"] == "staging"
    assert "'alice' is named like no environment" in data["environment"]["why"]
    # The mismatch is a warning naming the file's line and how CI pins the environment.
    assert data["warnings"][0] == (
        f"{path}:{line}: stack 'alice' is named like no environment: rules are enforced for "
        "staging, the environment its stack file states; in CI, pin it with "
        "GPUSTRATA_ENVIRONMENT=staging (or name the stack dev, staging or prod)"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv)
    assert out.getvalue().splitlines()[1].startswith("Rules enforced for staging: stack 'alice'")


def test_a_named_stack_whose_file_claims_another_environment_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUSTRATA_ENVIRONMENT", raising=False)
    path = tmp_path / "Pulumi.dev.yaml"
    text = (REPO / "stacks" / "Pulumi.staging.yaml").read_text(encoding="utf-8")
    path.write_text(text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["plan", "--file", str(path), "--project-dir", str(REPO), "--format", "json"])
    data = json.loads(out.getvalue())
    assert data["environment"]["enforced"] == "staging"  # the stricter one
    assert "states environment staging but the stack is named 'dev'" in data["warnings"][0]
