"""Pure renderers for the node layer: nodeadm user data and pool descriptions."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from gpustrata.core.contract import API_VERSION

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
BOUNDARY = "//gpustrata//"
POOL_API_VERSION = API_VERSION

# EKS managed node groups spell taint effects in upper snake case.
EKS_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
}


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def kubelet_config(
    *,
    max_pods: int,
    system_reserved: dict[str, str],
    kube_reserved: dict[str, str],
    eviction_hard: dict[str, str],
) -> dict[str, Any]:
    """The kubelet settings of a pool in KubeletConfiguration spelling.

    The same mapping goes into the nodeadm user data and the GpuNodePool description.
    """
    return {
        "maxPods": max_pods,
        "systemReserved": system_reserved,
        "kubeReserved": kube_reserved,
        "evictionHard": eviction_hard,
    }


def nodeadm_user_data(*, pool: str, instance_type: str, kubelet: dict[str, Any]) -> str:
    """MIME multi-part user data carrying an AL2023 nodeadm ``NodeConfig`` for the kubelet.

    ``kubelet`` is a :func:`kubelet_config` mapping.
    """
    template = _environment().get_template("nodeadm-userdata.mime.j2")
    return template.render(
        boundary=BOUNDARY,
        pool=pool,
        instance_type=instance_type,
        max_pods=kubelet["maxPods"],
        system_reserved=kubelet["systemReserved"],
        kube_reserved=kubelet["kubeReserved"],
        eviction_hard={k: _eviction_value(v) for k, v in kubelet["evictionHard"].items()},
    )


def _eviction_value(value: str) -> str:
    # KubeletConfiguration.evictionHard values are bare quantities ("500Mi", "10%");
    # accept the flag spelling "<500Mi" too.
    return value.lstrip("<")


def pool_description(
    *,
    name: str,
    instance_type: str,
    gpu_product: str,
    gpu_count: int,
    vcpu: int,
    memory_mib: int,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    kubelet: dict[str, Any],
    min_size: int,
    max_size: int,
    kubernetes_version: str | None = None,
    ami_type: str | None = None,
    driver_version: str | None = None,
    disk_size_gib: int | None = None,
    provisioner: str | None = None,
) -> dict[str, Any]:
    """The ``GpuNodePool`` object the rules read (same shape in manifests and Pulumi).

    ``provisioner`` is set for a pool Karpenter provisions (``karpenter``: its nodes come
    from the NodePool of the same name; the instance facts are its smallest type's).

    ``ami_type`` is the node image (the rules derive whether it ships the NVIDIA driver);
    ``driver_version`` the driver in that image. Both stay unset for a pool that is only
    described (an existing cluster's node image is not known to the stack).
    """
    spec: dict[str, Any] = {
        "instanceType": instance_type,
        "gpuProduct": gpu_product,
        "gpuCount": gpu_count,
        "cpu": vcpu,
        "memoryMiB": memory_mib,
        "labels": dict(labels),
        "taints": [dict(t) for t in taints],
        "kubelet": kubelet,
        "minSize": min_size,
        "maxSize": max_size,
    }
    for key, value in (
        ("kubernetesVersion", kubernetes_version),
        ("amiType", ami_type),
        ("driverVersion", driver_version),
        ("diskSizeGiB", disk_size_gib),
        ("provisioner", provisioner),
    ):
        if value is not None:
            spec[key] = value
    return {
        "apiVersion": POOL_API_VERSION,
        "kind": "GpuNodePool",
        "metadata": {"name": name},
        "spec": spec,
    }
