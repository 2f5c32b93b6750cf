"""AWS facts of the cluster foundation (``data/aws.yaml``, each cited): the EKS add-on
versions pinned per Kubernetes minor, the EC2 vCPU quota each instance family counts
against, and the vCPUs of a non-GPU instance type by its size."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpustrata.core.yamlio import safe_load

__all__ = [
    "AddonVersion",
    "VcpuQuota",
    "eks_addon_version",
    "instance_vcpus",
    "quota_increase_command",
    "vcpu_quota",
]


@dataclass(frozen=True, slots=True)
class AddonVersion:
    """An EKS add-on version to pin."""

    version: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VcpuQuota:
    """An EC2 vCPU quota (Service Quotas, service code ec2)."""

    code: str
    name: str
    default_vcpus: int | None
    """The value a new account has, where a source states it (None: the account's own)."""
    sources: tuple[str, ...]


@functools.cache
def _doc() -> Any:
    text = resources.files("gpustrata.catalog").joinpath("data/aws.yaml").read_text("utf-8")
    return safe_load(text)


def eks_addon_version(name: str, kubernetes_minor: str) -> AddonVersion | None:
    """The catalogued version of add-on *name* for *kubernetes_minor*, or None (EKS then
    installs its default version for the cluster)."""
    for entry in _doc()["eks_addons"]:
        if entry["name"] == name:
            version = entry["versions"].get(kubernetes_minor)
            if version:
                return AddonVersion(str(version), tuple(entry["sources"]))
    return None


_FAMILY = re.compile(r"^([a-z]+?)\d")


def vcpu_quota(instance_type: str, capacity_type: str) -> VcpuQuota | None:
    """The vCPU quota *instance_type* counts against at *capacity_type* (ON_DEMAND or
    SPOT), or None for a family not catalogued."""
    match = _FAMILY.match(instance_type.lower())
    if match is None:
        return None
    family = match.group(1)
    doc = _doc()
    for entry in doc["vcpu_quotas"]:
        if entry["capacity"] == capacity_type and family in entry["families"]:
            return VcpuQuota(
                str(entry["code"]), str(entry["name"]), None, tuple(doc["vcpu_quota_sources"])
            )
    return None


def quota_increase_command(quota: VcpuQuota, vcpus: int, region: str) -> str:
    """The AWS CLI command that asks for *vcpus* of *quota* in *region*."""
    return (
        "aws service-quotas request-service-quota-increase --service-code ec2 "
        f"--quota-code {quota.code} --desired-value {vcpus} --region {region}"
    )


_SIZE = re.compile(r"^(m|c|r)\d+[a-z]*\.(large|xlarge|(\d+)xlarge)$")


def instance_vcpus(instance_type: str) -> int | None:
    """vCPUs of an m/c/r instance by its size (large 2, xlarge 4, Nxlarge 4N); None for
    metal, other families or sizes (not guessed)."""
    match = _SIZE.match(instance_type)
    if match is None:
        return None
    if match.group(2) == "large":
        return 2
    return 4 * int(match.group(3) or 1)
