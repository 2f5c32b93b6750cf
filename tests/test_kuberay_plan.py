"""The KubeRay operator release against the stack's Ray: a plan error or an R004 finding."""

from __future__ import annotations

import json

import pytest
from _stacks import ROOT, stack_doc

from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.planning.build import build_plan
from gpustrata.render.operators import kuberay_values


def test_operator_that_does_not_support_the_ray_version_is_an_error() -> None:
    doc = stack_doc("staging")
    doc["kuberay"] = {"enabled": True, "chart_version": "1.4.2", "ray_version": "2.9.0"}
    with pytest.raises(StackError) as info:
        build_plan(doc, "stacks/Pulumi.staging.yaml")
    assert info.value.render() == (
        "stacks/Pulumi.staging.yaml: gpustrata:stack.kuberay.ray_version: Ray 2.9.0 is older "
        "than KubeRay v1.4.2 supports (Ray 2.38.0 and later, "
        "https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/upgrade-guide.html); set "
        "kuberay.ray_version to 2.38.0 or later (and the images with it), or pin an older "
        "kuberay.chart_version"
    )


def test_plan_records_the_operator_and_the_vllm_of_the_ray_image() -> None:
    derived = {d.key: d for d in build_plan(stack_doc("prod")).derived}
    assert derived["kuberay.rayVersionGates"].value == (
        "job-metadata, autoscaler-v2-default, token-auth, k8s-token-auth, "
        "unified-http-health-probe, worker-group-priority"
    )
    assert derived["kuberay.supportsRay"].value == "unchecked"  # no documented minimum
    assert derived["models.llama-70b.ray.vllmVersion"].value == "0.29.0"
    assert derived["models.llama-70b.ray.upgradeStrategy"].value == "NewCluster"


def test_operator_image_is_pinned_to_the_chart() -> None:
    assert kuberay_values("1.7.0") == {
        "image": {"repository": "quay.io/kuberay/operator", "tag": "v1.7.0"}
    }


def test_image_ray_older_than_ray_version_is_a_mandatory_finding(
    mutated_stack, capsys: pytest.CaptureFixture[str]
) -> None:
    path = mutated_stack(
        "image: rayproject/ray-llm:2.60.0-py311-cu128",
        "image: rayproject/ray-llm:2.46.0-py311-cu124",
    )
    code = main(["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    r004 = [f for f in data["findings"] if f["rule"] == "R004"]
    assert code == 1
    assert [(f["resource"], f["enforcement"]) for f in r004] == [
        ("RayService/inference/llama-70b", "mandatory")
    ]
    assert r004[0]["message"].startswith(
        "rayVersion 2.60.0 but the Ray image rayproject/ray-llm:2.46.0-py311-cu124 runs Ray "
        "2.46.0; KubeRay switches autoscaler-v2-default (Ray 2.47.0), unified-http-health-probe "
        "(Ray 2.53.0) on rayVersion (KubeRay v1.7.0 from HelmRelease/kuberay/kuberay-operator"
    )
