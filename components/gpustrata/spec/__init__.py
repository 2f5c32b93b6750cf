"""The typed stack spec (pydantic v2) and its loader. No Pulumi import here."""

from gpustrata.catalog.inputs import Taint
from gpustrata.spec.cluster import (
    ClusterSpec,
    GpuOperatorSpec,
    GpuSharingSpec,
    KubeletSpec,
    KubeRaySpec,
    NodePoolSpec,
)
from gpustrata.spec.loader import CONFIG_KEY, load_stack_file, stack_file, validate_stack
from gpustrata.spec.serving import (
    AutoscalingSpec,
    EngineSpec,
    ModelSpec,
    SecretRef,
    WeightsSpec,
    WorkloadSpec,
)
from gpustrata.spec.stack import StackSpec

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
