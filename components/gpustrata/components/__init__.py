"""Pulumi components: one ComponentResource per concept (tokens ``gpustrata:index:<Type>``)."""

from gpustrata.components._inputs import ComponentInputError, StackInputError
from gpustrata.components.cluster import EksCluster, EksClusterArgs
from gpustrata.components.inference_stack import InferenceStack, InferenceStackArgs
from gpustrata.components.nodepool import (
    GpuNodePool,
    GpuNodePoolArgs,
    KubeletArgs,
    TaintArgs,
    gpu_node_pool_args,
)
from gpustrata.components.operators import (
    GpuOperator,
    GpuOperatorArgs,
    KubeRayOperator,
    KubeRayOperatorArgs,
)
from gpustrata.components.serving import RayLlmService, VllmDeployment
from gpustrata.components.stack_args import StackArgs
from gpustrata.render.workload_args import (
    AutoscalingArgs,
    ProbeArgs,
    RayLlmModelArgs,
    RayLlmServiceArgs,
    RayWorkerGroupArgs,
    SecretRefArgs,
    TolerationArgs,
    VllmDeploymentArgs,
    WeightsArgs,
)

__all__ = [
    "AutoscalingArgs",
    "ComponentInputError",
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
    "KubeletArgs",
    "ProbeArgs",
    "RayLlmModelArgs",
    "RayLlmService",
    "RayLlmServiceArgs",
    "RayWorkerGroupArgs",
    "SecretRefArgs",
    "StackArgs",
    "StackInputError",
    "TaintArgs",
    "TolerationArgs",
    "VllmDeployment",
    "VllmDeploymentArgs",
    "WeightsArgs",
    "gpu_node_pool_args",
]
