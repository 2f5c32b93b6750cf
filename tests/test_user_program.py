"""A user's own Pulumi project is testable offline (issue 16 item 7).

The project lives outside this repository: its own Pulumi.yaml (``stackConfigDir``), a
``__main__.py`` that imports gpustrata's components and a module beside it, a stack file
with its own config keys. ``gpustrata plan --project-dir`` plans it (a subprocess, as a
user runs it) and :func:`gpustrata.runtime.mockrun.run_project` runs it from a test
function, as docs/howto/test-your-program.md tells a user to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _stacks import ROOT, stack_doc

from gpustrata.core.errors import InputError, StackError
from gpustrata.runtime.mockrun import ProgramError, run_project

PULUMI_YAML = """\
name: team-llm
runtime:
  name: python
stackConfigDir: infra
"""

STACK_PROGRAM = """\
import pulumi

from gpustrata.components import InferenceStack
from naming import team_label  # a module of the project, beside __main__.py

llm = InferenceStack("llm", {"stack": pulumi.Config("gpustrata").require_object("stack")})
pulumi.export("endpoints", llm.endpoints)
pulumi.export("team", team_label())
"""

COMPONENTS_PROGRAM = """\
import pulumi

from gpustrata.components import (
    GpuNodePool,
    VllmDeployment,
    VllmDeploymentArgs,
    gpu_node_pool_args,
)
from naming import team_label

team = team_label()
pool = GpuNodePool(
    "l4",
    gpu_node_pool_args(
        "g6.xlarge", pool_name="l4", kubernetes_version="1.34", create=False,
        labels={"team": team},
    ),
)
args: VllmDeploymentArgs = {
    "name": pulumi.Output.concat("chat-", team),
    "namespace": pulumi.Config().require("namespace"),
    "model": "Qwen/Qwen2.5-1.5B-Instruct",
    "served_model_name": "qwen",
    "image": "vllm/vllm-openai:v0.33.0",
    "replicas": 1,
    "gpus": 1,
    "cpu": "3",
    "memory": "12Gi",
    "shm_size": "2Gi",
    "ephemeral_storage": "20Gi",
    "engine_args": {"max_model_len": 8192},
    "node_selector": {"gpustrata.io/pool": "l4"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": ""}],
    "probes": {
        "startup_period_s": 10, "startup_failure_threshold": 30, "liveness_period_s": 10,
        "liveness_failure_threshold": 3, "readiness_period_s": 5, "timeout_s": 5,
    },
    "autoscaling": {"kind": "none", "min_replicas": 1, "max_replicas": 1,
                    "target_waiting_requests": 5},
    "weights": {"source": "huggingface"},
    "service_monitor": False,
}
VllmDeployment("chat", args, pulumi.ResourceOptions(depends_on=[pool]))
"""


def _project(root: Path, program: str, config: dict[str, object]) -> Path:
    (root / "infra").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text(PULUMI_YAML)
    (root / "__main__.py").write_text(program)
    (root / "naming.py").write_text(
        "import pulumi\n\n\ndef team_label() -> str:\n"
        '    return pulumi.Config().get("team") or "nobody"\n'
    )
    (root / "infra" / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    return root


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_plan_runs_a_project_that_is_not_this_repository(tmp_path: Path) -> None:
    project = _project(
        tmp_path / "team-llm",
        STACK_PROGRAM,
        {"gpustrata:stack": stack_doc("dev"), "team": "ranking"},
    )
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'components'}:{ROOT / 'policies'}"}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "gpustrata.cli.app", "plan"),
            *("--project-dir", str(project), "--stack", "dev", "--format", "json"),
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["file"] == str(project / "infra" / "Pulumi.dev.yaml")
    resources = {(r["type"], r["name"]) for r in report["resources"]}
    assert ("gpustrata:index:InferenceStack", "llm") in resources
    (top,) = [r for r in report["resources"] if r["type"] == "gpustrata:index:InferenceStack"]
    assert top["parent"] == "team-llm-dev"  # the root Stack of the project's own name
    model = stack_doc("dev")["models"][0]["name"]
    assert ("kubernetes:apps/v1:Deployment", f"llm-{model}-deployment") in resources
    assert report["findings"] == [] or all(
        f["enforcement"] != "mandatory" for f in report["findings"]
    )


def test_run_project_runs_a_users_components_with_its_own_config(tmp_path: Path) -> None:
    project = _project(
        tmp_path / "team-llm", COMPONENTS_PROGRAM, {"team": "ranking", "namespace": "search"}
    )
    resources = run_project(project, "dev")
    (deploy,) = [r for r in resources if r.type == "kubernetes:apps/v1:Deployment"]
    # Config of the stack file, a project key read through pulumi.Config() ...
    assert deploy.inputs["metadata"]["namespace"] == "search"
    # ... reaching the name through an Output, via a module beside the program.
    assert deploy.inputs["metadata"]["name"] == "chat-ranking"
    (pool,) = [r for r in resources if r.type == "gpustrata:index:GpuNodePool"]
    assert pool.inputs["description"]["spec"]["labels"]["team"] == "ranking"
    # A test can override config, as `pulumi config set` would.
    again = run_project(project, "dev", config={"team-llm:namespace": "other"})
    (deploy,) = [r for r in again if r.type == "kubernetes:apps/v1:Deployment"]
    assert deploy.inputs["metadata"]["namespace"] == "other"


def test_run_project_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    bad_stack = stack_doc("dev")
    bad_stack["node_pools"][0]["instance_type"] = "g6.nosuch"
    project = _project(tmp_path / "a", STACK_PROGRAM, {"gpustrata:stack": bad_stack})
    with pytest.raises(StackError, match=r"g6\.nosuch"):
        run_project(project, "dev")
    broken = _project(tmp_path / "b", STACK_PROGRAM + "\n1 / 0\n", {"team": "x"})
    with pytest.raises(ProgramError) as caught:
        run_project(broken, "dev", config={"gpustrata:stack": json.dumps(stack_doc("dev"))})
    line = STACK_PROGRAM.count("\n") + 2
    assert str(caught.value) == (
        f"{broken / '__main__.py'}:{line}: the program raised ZeroDivisionError: division by zero"
    )
    (broken / "Pulumi.yaml").write_text("runtime: python\n")
    with pytest.raises(InputError, match=r"Pulumi\.yaml"):
        run_project(broken, "dev")


def test_the_helper_is_documented() -> None:
    page = (ROOT / "docs" / "howto" / "test-your-program.md").read_text(encoding="utf-8")
    assert "run_project" in page and "--project-dir" in page
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "howto/test-your-program.md" in nav
