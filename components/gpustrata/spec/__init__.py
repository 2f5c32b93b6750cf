"""The typed stack spec (pydantic v2) and its loader. No Pulumi import here."""

from gpustrata.catalog.inputs import Taint
from gpustrata.spec.loader import CONFIG_KEY, load_stack_file, stack_file, validate_stack
from gpustrata.spec.stack import (
    AutoscalingSpec,
    ClusterSpec,
    EngineSpec,
    GpuOperatorSpec,
    GpuSharingSpec,
    KubeletSpec,
    KubeRaySpec,
    ModelSpec,
    NodePoolSpec,
    SecretRef,
    StackSpec,
    WeightsSpec,
    WorkloadSpec,
)

__all__ = [
    "CONFIG_KEY",
    "AutoscalingSpec",
    "ClusterSpec",
    "EngineSpec",
    "GpuOperatorSpec",
    "GpuSharingSpec",
    "KubeRaySpec",
    "KubeletSpec",
    "ModelSpec",
    "NodePoolSpec",
    "SecretRef",
    "StackSpec",
    "Taint",
    "WeightsSpec",
    "WorkloadSpec",
    "load_stack_file",
    "stack_file",
    "validate_stack",
]
