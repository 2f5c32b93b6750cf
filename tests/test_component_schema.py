"""Pulumi's component analyzer (what the component provider host uses) reads every component."""

from __future__ import annotations

import pytest
from pulumi.provider.experimental.analyzer import Analyzer

import gpustrata.components as components

EXPECTED_INPUTS = {
    "EksCluster": {"clusterName", "kubernetesVersion", "subnetIds"},
    "GpuNodePool": {"instanceType", "taints", "kubelet", "minSize", "maxSize", "create"},
    "GpuOperator": {"chartVersion", "namespace", "values"},
    "KubeRayOperator": {"chartVersion", "namespace", "values"},
    "RayLlmService": {"models", "workerGroups", "rayVersion", "image"},
    "VllmDeployment": {"engineArgs", "gpus", "probes", "tolerations", "autoscaling"},
    "InferenceStack": {"stack"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_INPUTS))
def test_analyzer_reads_component_args(name: str) -> None:
    component = getattr(components, name)
    result = Analyzer("gpustrata").analyze([component])
    definition = result["component_definitions"][name]
    assert EXPECTED_INPUTS[name] <= set(definition.inputs)
    for prop in definition.inputs.values():
        assert prop.description, f"{name}: an input has no docstring"
