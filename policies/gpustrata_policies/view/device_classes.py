"""The DRA DeviceClasses an input installs, and the GPU claims that need one.

A ResourceClaim (or a Pod's claim made from a ResourceClaimTemplate) on a DeviceClass that
does not exist is never allocated: the scheduler reports the class missing and the Pod
stays Pending (kubernetes@v1.34.0:pkg/scheduler/framework/plugins/dynamicresources/
dynamicresources.go, "device class %s does not exist"). The ``gpu.nvidia.com`` class is
created by the NVIDIA DRA driver, installed any of the catalogued ways
(catalog/data/dra-driver.yaml):

* NVIDIA's ``nvidia-dra-driver-gpu`` chart or the kubernetes-sigs ``dra-driver-nvidia-gpu``
  chart, with ``resources.gpus.enabled`` (k8s-dra-driver-gpu@v25.12.0:deployments/helm/
  nvidia-dra-driver-gpu/templates/deviceclass-gpu.yaml);
* the GPU Operator's own DRA stack (v26.7.0+: ``gpuCluster.deployCR``, or a GPUCluster CR),
  whose driver always deploys the gpus capability (NVIDIA/gpu-operator@v26.7.0:
  deployments/gpu-operator/values.yaml ``draDriver``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpustrata.core.unknown import UnknownInput
from gpustrata_policies.view.dra import (
    GPU_DEVICE_CLASS,
    DraDriverView,
    claim_gpus,
    dra_driver_view,
)
from gpustrata_policies.view.gpu_operator import GpuOperatorView, operators_of
from gpustrata_policies.view.helm_values import values_flag
from gpustrata_policies.view.objects import K8sObject

__all__ = [
    "DRIVER_FIX",
    "claims_gpu_class",
    "device_classes_installed",
    "gpu_claims",
    "operator_dra",
]

DRIVER_FIX = (
    "install the NVIDIA DRA driver: in a gpustrata stack, a pool with gpu_allocation: dra "
    "makes the stack install the driver of dra.driver (nvidia-chart, kubernetes-sigs-chart or "
    "gpu-operator); in a manifest set, a HelmRelease of nvidia-dra-driver-gpu or "
    "dra-driver-nvidia-gpu (resources.gpus.enabled), or the GPU Operator v26.7+ with "
    "gpuCluster.deployCR: true; on a cluster that has it, list gpu.nvidia.com in the cluster "
    "profile's device_classes"
)
"""What installs the ``gpu.nvidia.com`` DeviceClass, for messages."""


def operator_dra(op: GpuOperatorView) -> DraDriverView | None:
    """The DRA driver a GPU Operator chart installs itself (``gpuCluster.deployCR``, v26.7+;
    its ``draDriver`` values), or ``None``."""
    if not op.is_helm or not values_flag(op.value("gpuCluster", "deployCR"), False):
        return None
    draw = op.value("draDriver")
    version = draw.get("version") if isinstance(draw, dict) else None
    return DraDriverView(op.obj, draw or {}, version if isinstance(version, str) else None, True)


def device_classes_installed(
    objects: Sequence[K8sObject], operators: Sequence[GpuOperatorView] | None = None
) -> dict[str, str]:
    """DeviceClass name -> what installs it: DeviceClass objects, the NVIDIA DRA driver's
    charts (unless ``resources.gpus.enabled`` is false), GPUCluster CRs and GPU Operator
    charts that deploy one. A driver whose values are unknown (preview) counts as
    installing it. *operators*: the GPU Operator installations among *objects*, where the
    caller has them (else found here)."""
    out: dict[str, str] = {}
    for obj in objects:
        if obj.kind == "DeviceClass" and obj.api_version.startswith("resource.k8s.io/"):
            out.setdefault(obj.name, obj.resource)
            continue
        try:
            driver = dra_driver_view(obj)
            gpus = driver is not None and driver.allocates_gpus
        except UnknownInput:
            gpus = True
            driver = None
        if gpus:
            out.setdefault(GPU_DEVICE_CLASS, driver.label if driver else obj.resource)
    for op in operators_of(objects) if operators is None else operators:
        found = operator_dra(op)
        if found is not None:
            out.setdefault(GPU_DEVICE_CLASS, f"{found.label} ({op.obj.resource})")
    return out


def claims_gpu_class(obj: K8sObject) -> bool:
    """Does the ResourceClaim / ResourceClaimTemplate ask for devices of the
    ``gpu.nvidia.com`` DeviceClass? (An unknown request counts as not known to.)"""
    try:
        found = claim_gpus(obj)
    except UnknownInput:
        return False
    return found is not None and bool(found.requests)


def gpu_claims(objects: Iterable[K8sObject]) -> list[K8sObject]:
    """The claims and claim templates on the ``gpu.nvidia.com`` DeviceClass."""
    return [o for o in objects if claims_gpu_class(o)]
