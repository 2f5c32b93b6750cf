"""The components as a Pulumi user composes them (issue 16): Inputs for names,
namespaces and labels, Args exported, a GpuNodePoolArgs helper from an instance type,
outputs to build on, errors that name the property, and nothing read from disk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _stacks import ROOT, stack_doc

from gpustrata.runtime.mockrun import SECRET_PLACEHOLDER, Registered, run_program

TYPED_PROGRAM = """
import pulumi

from gpustrata.components import (
    GpuNodePool,
    GpuOperator,
    GpuOperatorArgs,
    StackArgs,
    VllmDeploymentArgs,
    gpu_node_pool_args,
)

namespace: pulumi.Output[str] = pulumi.Output.from_input("gpu-operator")
team: pulumi.Output[str] = pulumi.Output.from_input("ml")
pool = GpuNodePool(
    "l4",
    gpu_node_pool_args(
        "g6.xlarge", pool_name="l4", kubernetes_version="1.34", labels={"team": team}
    ),
)
operator: GpuOperatorArgs = {
    "namespace": namespace,
    "chart_version": "v26.7.0",
    "values": {},
    "device_plugin_config": {},
}
GpuOperator("gpu-operator", operator)


def in_namespace(args: VllmDeploymentArgs, ns: pulumi.Output[str]) -> VllmDeploymentArgs:
    args["namespace"] = ns
    args["name"] = pulumi.Output.concat("chat-", ns)
    return args


names: pulumi.Output[str] = pool.node_group_name

# The stack typed from the spec: literal values of its closed sets type-check.
stack: StackArgs = {
    "environment": "dev",
    "cluster": {"name": "llm-dev", "kubernetes_version": "1.34", "mode": "existing"},
    "node_pools": [{"name": "gpu-l4", "instance_type": "g6.xlarge", "capacity_type": "SPOT"}],
    "gpu_operator": {"chart_version": "v26.7.0"},
}
"""


def _mypy(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "user_program.py").write_text(program)
    (tmp_path / "mypy.ini").write_text(
        textwrap.dedent(
            f"""
            [mypy]
            strict = True
            mypy_path = {ROOT / "components"}:{ROOT / "policies"}
            plugins = pydantic.mypy
            cache_dir = {ROOT / ".mypy_cache"}
            [mypy-pulumi_policy.*,kubernetes_validate.*]
            ignore_missing_imports = True
            [mypy-ray,ray.*]
            ignore_missing_imports = True
            follow_imports = skip
            """
        )
    )
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "user_program.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_a_strict_user_program_passes_outputs_to_namespace_and_label(tmp_path: Path) -> None:
    done = _mypy(tmp_path, TYPED_PROGRAM)
    assert done.returncode == 0, done.stdout + done.stderr
    wrong = TYPED_PROGRAM.replace(
        '"namespace": namespace,', '"namespace": pulumi.Output.from_input(3),'
    ).replace('"SPOT"', '"SPOTT"')
    done = _mypy(tmp_path, wrong)
    assert done.returncode == 1 and "Output[str]" in done.stdout, done.stdout
    assert "TypedDict item \"capacity_type\" has type \"Literal['ON_DEMAND', 'SPOT']" in done.stdout


def _run(tmp_path: Path, body: str, doc: dict[str, Any] | None = None) -> list[Registered]:
    program = tmp_path / "__main__.py"
    program.write_text(textwrap.dedent(body))
    return run_program(doc or stack_doc("dev"), stack="dev", program=program)


def _by_type(resources: list[Registered], token: str) -> list[Registered]:
    return [r for r in resources if r.type == token]


def test_output_namespace_and_name_reach_every_object(tmp_path: Path) -> None:
    resources = _run(
        tmp_path,
        """
        import pulumi
        from gpustrata.components import VllmDeployment
        from gpustrata.planning.build import build_plan
        from gpustrata.render.from_plan import vllm_deployment_args

        plan = build_plan(pulumi.Config("gpustrata").require_object("stack"))
        (model,) = plan.models.values()
        args = vllm_deployment_args(model, plan.spec)
        args["namespace"] = pulumi.Output.from_input("team-a")
        args["name"] = pulumi.Output.concat("chat", "-", "v1")
        vllm = VllmDeployment("chat", args)
        pulumi.export("endpoint", vllm.endpoint)
        """,
    )
    text = json.dumps([r.inputs for r in resources])
    assert "gpustrata-input-" not in text
    (deploy,) = _by_type(resources, "kubernetes:apps/v1:Deployment")
    assert deploy.inputs["metadata"]["namespace"] == "team-a"
    assert deploy.inputs["metadata"]["name"] == "chat-v1"
    (service,) = _by_type(resources, "kubernetes:core/v1:Service")
    assert service.inputs["metadata"] == {**service.inputs["metadata"], "name": "chat-v1"}


def test_gpu_node_pool_args_from_the_catalogue() -> None:
    from gpustrata.components import ComponentInputError, gpu_node_pool_args

    args = gpu_node_pool_args("g6.xlarge", pool_name="l4", kubernetes_version="1.34")
    assert (args["gpu_count"], args["vcpu"], args["gpu_product"]) == (1, 4, "NVIDIA-L4")
    assert args["ami_type"].endswith("NVIDIA")
    assert args["kubelet"]["kube_reserved"]["memory"].endswith("Mi")
    assert args["labels"]["gpustrata.io/pool"] == "l4"
    assert [t["key"] for t in args["taints"]] == ["nvidia.com/gpu"]
    with pytest.raises(ComponentInputError) as info:
        gpu_node_pool_args("m5.large", pool_name="l4", kubernetes_version="1.34")
    assert info.value.property_path == "instanceType" and "m5.large" in str(info.value)
    with pytest.raises(ComponentInputError) as info:
        gpu_node_pool_args("g6.xlarge", pool_name="l4", kubernetes_version="1.34", max_size=0)
    assert info.value.property_path == "maxSize"


def test_inference_stack_outputs_and_errors(tmp_path: Path) -> None:
    resources = _run(
        tmp_path,
        """
        import pulumi
        import pulumi_kubernetes as k8s
        from gpustrata.components import InferenceStack

        stack = InferenceStack(
            "gpustrata", {"stack": pulumi.Config("gpustrata").require_object("stack")}
        )
        assert isinstance(stack.provider, k8s.Provider)
        k8s.core.v1.ConfigMap(
            "outputs",
            data={
                "cluster": stack.cluster_name,
                "services": stack.service_names.apply(pulumi.Output.json_dumps),
                "endpoints": stack.endpoints.apply(pulumi.Output.json_dumps),
                "nodeGroups": stack.node_group_names.apply(pulumi.Output.json_dumps),
            },
        )
        k8s.core.v1.ConfigMap("secret", data={"kubeconfig": stack.kubeconfig})
        bad = {**pulumi.Config("gpustrata").require_object("stack"), "models": [{"name": 3}]}
        try:
            InferenceStack("bad", {"stack": bad})
        except pulumi.InputPropertyError as exc:
            assert isinstance(exc, pulumi.RunError)
            k8s.core.v1.ConfigMap("error", data={"path": exc.property_path})
        """,
    )
    maps = {r.name: r.inputs["data"] for r in _by_type(resources, "kubernetes:core/v1:ConfigMap")}
    out = maps["outputs"]
    model = stack_doc("dev")["models"][0]
    assert out["cluster"] == "gpustrata-dev"
    assert json.loads(out["services"]) == {model["name"]: model["name"]}
    namespace = model.get("namespace", "llm")
    assert json.loads(out["endpoints"]) == {
        # The Service's port (80), which clients reach; 8000 is the container's (K021).
        model["name"]: f"http://{model['name']}.{namespace}.svc.cluster.local:80/v1"
    }
    assert set(json.loads(out["nodeGroups"])) == {"gpu-l4"}
    assert SECRET_PLACEHOLDER in json.dumps(maps["secret"])  # kubeconfig is a secret
    assert maps["error"]["path"].startswith("stack.models[0]")


def test_an_existing_cluster_reads_no_kubeconfig_file(tmp_path: Path) -> None:
    doc = stack_doc("dev")
    missing = tmp_path / "nowhere" / "kubeconfig"
    doc["cluster"] = {**doc["cluster"], "mode": "existing", "kubeconfig": str(missing)}
    resources = run_program(doc, stack="dev", program=ROOT / "__main__.py")
    (provider,) = _by_type(resources, "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == str(missing)


def test_gpu_node_pool_with_efa_names_what_it_lacks(tmp_path: Path) -> None:
    """EFA interfaces need the cluster's VPC and security group: without them the error
    names the input and the fix, and nothing is registered."""
    resources = _run(
        tmp_path,
        """
        import pulumi
        import pulumi_kubernetes as k8s
        from gpustrata.components import GpuNodePool, gpu_node_pool_args

        args = gpu_node_pool_args(
            "p5.48xlarge", pool_name="h100", kubernetes_version="1.34", max_size=2,
            cluster_name="c", node_role_arn="arn:aws:iam::123456789012:role/n",
            subnet_ids=["subnet-a", "subnet-b"],
        )
        args["efa_interfaces"] = 32
        try:
            GpuNodePool("h100", args)
        except pulumi.InputPropertyError as exc:
            k8s.core.v1.ConfigMap("error", data={"path": exc.property_path, "why": str(exc)})
        """,
    )
    (error,) = _by_type(resources, "kubernetes:core/v1:ConfigMap")
    assert error.inputs["data"]["path"] == "vpcId"
    assert "EksCluster.vpc_id" in error.inputs["data"]["why"]
    assert not _by_type(resources, "aws:ec2/placementGroup:PlacementGroup")
    assert not _by_type(resources, "aws:eks/nodeGroup:NodeGroup")
    assert not _by_type(resources, "gpustrata:index:GpuNodePool")
