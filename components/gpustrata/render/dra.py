"""Dynamic Resource Allocation for pools with ``gpu_allocation: dra``: the engine's
ResourceClaimTemplate, the Pod fields that use it, and the NVIDIA DRA driver's values."""

from __future__ import annotations

from typing import Any

from gpustrata.core.contract import DRA_GPU_DEVICE_CLASS, POOL_LABEL
from gpustrata.render.workload_args import TolerationArgs

__all__ = [
    "CLAIM_NAME",
    "DRA_API_VERSION",
    "claim_template_name",
    "dra_driver_values",
    "gpu_claim_template",
    "use_gpu_claim",
]

DRA_API_VERSION = "resource.k8s.io/v1"
"""DRA's GA API (Kubernetes 1.34); the spec refuses DRA pools on older clusters."""
CLAIM_NAME = "gpus"
"""Name of the claim in the Pod (``spec.resourceClaims``) and of its one device request."""


def claim_template_name(workload: str) -> str:
    """The ResourceClaimTemplate of a workload's engine Pods: ``<workload>-gpus``."""
    return f"{workload}-{CLAIM_NAME}"


def gpu_claim_template(
    workload: str, namespace: str, gpus: int, labels: dict[str, str]
) -> dict[str, Any]:
    """A ResourceClaimTemplate of exactly *gpus* devices (TP x PP of one engine Pod) on the
    driver's ``gpu.nvidia.com`` DeviceClass: each Pod gets its own claim of that many GPUs."""
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": claim_template_name(workload),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": CLAIM_NAME,
                            "exactly": {
                                "deviceClassName": DRA_GPU_DEVICE_CLASS,
                                "allocationMode": "ExactCount",
                                "count": gpus,
                            },
                        }
                    ]
                }
            }
        },
    }


def use_gpu_claim(pod_spec: dict[str, Any], container: dict[str, Any], workload: str) -> None:
    """Point a Pod at its workload's claim template instead of ``nvidia.com/gpu`` limits:
    ``spec.resourceClaims`` names the template, the container's ``resources.claims`` the claim."""
    pod_spec["resourceClaims"] = [
        {"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name(workload)}
    ]
    resources = container["resources"]
    for section in ("requests", "limits"):
        resources[section].pop("nvidia.com/gpu", None)
    resources["claims"] = [{"name": CLAIM_NAME}]


def dra_driver_values(
    pools: list[str], tolerations: list[TolerationArgs], *, operator_driver: bool
) -> dict[str, Any]:
    """Values of the ``nvidia-dra-driver-gpu`` chart (k8s-dra-driver-gpu@v25.12.0
    values.yaml keys): GPUs published, compute domains off, the kubelet plugin confined
    to the DRA *pools* (their nodes carry no device plugin, rule O008)."""
    tols = [{k: v for k, v in t.items() if v or k == "operator"} for t in tolerations]
    return {
        # templates/validation.yaml refuses gpus without the override: the device plugin
        # is off on these nodes (nvidia.com/gpu.deploy.device-plugin=false).
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "gpuResourcesEnabledOverride": True,
        # The operator's driver container mounts the driver at /run/nvidia/driver.
        "nvidiaDriverRoot": "/run/nvidia/driver" if operator_driver else "/",
        "kubeletPlugin": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": POOL_LABEL, "operator": "In", "values": pools}
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": tols,
        },
    }
