"""Pulumi components: one ComponentResource per concept (tokens ``gpustrata:index:<Type>``)."""

from gpustrata.components.cluster import EksCluster, EksClusterArgs
from gpustrata.components.inference_stack import InferenceStack, InferenceStackArgs
from gpustrata.components.nodepool import GpuNodePool, GpuNodePoolArgs
from gpustrata.components.operators import (
    GpuOperator,
    GpuOperatorArgs,
    KubeRayOperator,
    KubeRayOperatorArgs,
)
from gpustrata.components.serving import RayLlmService, VllmDeployment

__all__ = [
    "EksCluster",
    "EksClusterArgs",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "InferenceStack",
    "InferenceStackArgs",
    "KubeRayOperator",
    "KubeRayOperatorArgs",
    "RayLlmService",
    "VllmDeployment",
]
