"""The render -> rules contract: names gpustrata writes on the objects it renders and the
rules read back. Written once here; the renderers, the view and the reports import them.
"""

from __future__ import annotations

__all__ = [
    "API_VERSION",
    "CLUSTER_PROFILE_ANNOTATION",
    "CLUSTER_PROFILE_FILE",
    "DECLARED_OVERRIDES_ANNOTATION",
    "DERIVED_FROM_ANNOTATION",
    "DEVICE_PLUGIN_DEPLOY_LABEL",
    "DRA_GPU_DEVICE_CLASS",
    "GPU_COUNT_LABEL",
    "GPU_LABEL",
    "POOL_LABEL",
    "STARTUP_ESTIMATE_ANNOTATION",
]

API_VERSION = "gpustrata.io/v1alpha1"
"""apiVersion of the descriptions gpustrata renders for the rules (``GpuNodePool``,
``GpuOperator``): what the cluster holds but Kubernetes has no object for."""
POOL_LABEL = "gpustrata.io/pool"
"""Node label naming a pool; workloads select their pool by it."""
GPU_LABEL = "gpustrata.io/gpu"
"""Node label with the catalogue id of a pool's GPU."""
GPU_COUNT_LABEL = "gpustrata.io/gpu-count"
"""Node label with the number of GPUs on each of a pool's nodes."""
STARTUP_ESTIMATE_ANNOTATION = "gpustrata.io/startup-estimate-seconds"
"""The planner's startup estimate (seconds, before the safety factor) on rendered objects."""
DERIVED_FROM_ANNOTATION = "gpustrata.io/derived-from"
"""On a pool the view derived from another source (Node objects, a node group)."""
CLUSTER_PROFILE_FILE = ".gpustrata/cluster.yaml"
"""Where ``gpustrata check`` finds a cluster profile, relative to each folder it checks (or
the folder of each file it checks); folder walks skip it as a manifest."""
CLUSTER_PROFILE_ANNOTATION = "gpustrata.io/cluster-profile"
"""On a pool description made from a cluster profile: the profile's file."""
DECLARED_OVERRIDES_ANNOTATION = "gpustrata.io/declared-overrides"
"""GPU Operator components whose version differs from the release's tested set on purpose."""
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
"""Node label the GPU Operator's device-plugin DaemonSet selects (value "true"); the operator
sets it only where it is absent or empty, so "false" keeps the device plugin off a node
(gpu-operator@v26.7.0:controllers/state_manager.go addGPUStateLabels;
assets/state-device-plugin/0500_daemonset.yaml nodeSelector). DRA pools carry "false"."""
DRA_GPU_DEVICE_CLASS = "gpu.nvidia.com"
"""The DeviceClass of whole GPUs the NVIDIA DRA driver's chart creates
(k8s-dra-driver-gpu@v25.12.0:deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-gpu.yaml)."""
