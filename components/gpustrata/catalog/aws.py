"""AWS facts of the cluster foundation (``data/aws.yaml``, each cited): the EKS add-on
versions pinned per Kubernetes minor, the EC2 vCPU quota each instance family counts
against on demand and on spot, the vCPUs of an m/c/r instance type by its size, and what
an EKS Pod Identity association needs (trust principal and actions, the agent add-on)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpustrata.catalog.packaged import packaged_model

__all__ = [
    "AddonVersion",
    "EfaFacts",
    "PodIdentity",
    "VcpuQuota",
    "efa_facts",
    "eks_addon_version",
    "eks_addon_versions",
    "instance_vcpus",
    "pod_identity",
    "pod_identity_trust_policy",
    "quota_increase_command",
    "vcpu_quota",
    "vcpu_quotas",
]

CAPACITY_TYPES = ("ON_DEMAND", "SPOT")


class _Fact(BaseModel):
    """Base of the AWS facts: the keys of ``data/aws.yaml``, no others, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class AddonVersion(_Fact):
    """An EKS add-on version the foundation pins for one Kubernetes minor."""

    name: str
    kubernetes: str
    version: str
    sources: tuple[str, ...]


class VcpuQuota(_Fact):
    """An EC2 vCPU quota (Service Quotas, service code ``ec2``)."""

    code: str
    name: str
    capacity_type: str = Field(alias="capacity")
    """``ON_DEMAND`` or ``SPOT`` (the file's ``capacity``)."""
    families: tuple[str, ...]
    default_vcpus: int | None = None
    """AWS's default before any increase, where a cited AWS page states it; None: the
    account's own value (read it with ``aws service-quotas get-service-quota``)."""
    sources: tuple[str, ...]


class PodIdentity(_Fact):
    """What an EKS Pod Identity association needs: the role's trust policy, the agent
    add-on that serves the credentials on each node, and the node role's permission."""

    addon: str
    """The EKS add-on that runs the agent (``eks-pod-identity-agent``)."""
    trust_principal: str
    """The service principal a Pod Identity role trusts (``pods.eks.amazonaws.com``)."""
    trust_actions: tuple[str, ...]
    """The actions that principal is allowed (``sts:AssumeRole``, ``sts:TagSession``)."""
    node_role_action: str
    """The action the node role needs for the agent (``eks-auth:AssumeRoleForPodIdentity``)."""
    node_role_policy: str
    """The AWS managed policy that grants ``node_role_action``."""
    sources: tuple[str, ...]


class _InstanceSizes(_Fact):
    families: tuple[str, ...]
    """Families whose vCPUs follow the size (large 2, xlarge 4, Nxlarge 4N)."""
    sources: tuple[str, ...]


@functools.cache
def eks_addon_versions() -> tuple[AddonVersion, ...]:
    """Every catalogued (add-on, Kubernetes minor) pin."""
    return _doc().eks_addons


def eks_addon_version(name: str, kubernetes_minor: str) -> AddonVersion | None:
    """The catalogued version of EKS add-on *name* for *kubernetes_minor* ("1.34"), or
    None: no cited version, so EKS installs its default version for the cluster."""
    for entry in eks_addon_versions():
        if entry.name == name and entry.kubernetes == kubernetes_minor:
            return entry
    return None


def vcpu_quotas() -> tuple[VcpuQuota, ...]:
    """Every catalogued EC2 vCPU quota."""
    return _doc().vcpu_quotas


_FAMILY = re.compile(r"^([a-z]+)\d")


def _family(instance_type: str) -> str | None:
    match = _FAMILY.match(instance_type.strip().lower())
    return match.group(1) if match else None


def vcpu_quota(instance_type: str, capacity_type: str) -> VcpuQuota | None:
    """The vCPU quota *instance_type* counts against at *capacity_type* ("ON_DEMAND" or
    "SPOT"): p5.48xlarge -> the P quota, g6e.2xlarge -> G and VT, m7i.xlarge -> Standard.
    None for a family or capacity type not catalogued."""
    family = _family(instance_type)
    if family is None or capacity_type not in CAPACITY_TYPES:
        return None
    for quota in vcpu_quotas():
        if quota.capacity_type == capacity_type and family in quota.families:
            return quota
    return None


def quota_increase_command(quota: VcpuQuota, vcpus: int, region: str) -> str:
    """The AWS CLI command that asks for *vcpus* of *quota* in *region*."""
    return (
        "aws service-quotas request-service-quota-increase --service-code ec2 "
        f"--quota-code {quota.code} --desired-value {vcpus} --region {region}"
    )


_SIZE = re.compile(r"^([a-z]+)\d+[a-z-]*\.(large|xlarge|(\d+)xlarge)$")


def instance_vcpus(instance_type: str) -> int | None:
    """vCPUs of an m, c or r instance type by its size (large 2, xlarge 4, Nxlarge 4N):
    m7i.xlarge -> 4. None for metal sizes, other families or sizes (not guessed)."""
    match = _SIZE.match(instance_type.strip().lower())
    if match is None or match.group(1) not in _size_families():
        return None
    if match.group(2) == "large":
        return 2
    return 4 * int(match.group(3) or 1)


@functools.cache
def _size_families() -> frozenset[str]:
    return frozenset(_doc().instance_sizes.families)


def pod_identity() -> PodIdentity:
    """The catalogued EKS Pod Identity facts."""
    return _doc().pod_identity


def pod_identity_trust_policy() -> dict[str, Any]:
    """The trust policy (an IAM policy document) of a role used through EKS Pod Identity,
    as the EKS user guide gives it; serialise with ``json.dumps``."""
    facts = pod_identity()
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": facts.trust_principal},
                "Action": list(facts.trust_actions),
            }
        ],
    }


class EfaFacts(_Fact):
    """What a Pod needs to use Elastic Fabric Adapter interfaces for NCCL (``data/aws.yaml``
    ``efa``); how many interfaces an instance type has is ``InstanceType.efa_interfaces``."""

    resource: str
    """The extended resource the EFA device plugin advertises (``vpc.amazonaws.com/efa``)."""
    env: tuple[tuple[str, str], ...]
    """Libfabric settings for NCCL over EFA (``FI_PROVIDER=efa`` ...)."""
    capabilities: tuple[str, ...]
    """Container capabilities RDMA needs (``IPC_LOCK``)."""
    device_plugin_chart: str
    """The chart of the EFA Kubernetes device plugin."""
    device_plugin_version: str
    """The chart version the stack installs (its facts are in ``charts.yaml``)."""
    device_plugin_repository: str
    """Its Helm repository."""
    device_plugin_namespace: str
    """Where the EKS user guide installs it (``kube-system``)."""
    sources: tuple[str, ...]

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        """The file's ``env`` map as pairs and its ``device_plugin`` section as the
        ``device_plugin_*`` fields."""
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        if isinstance(out.get("env"), Mapping):
            out["env"] = tuple(out["env"].items())
        plugin = out.pop("device_plugin", None)
        if isinstance(plugin, Mapping):
            out |= {f"device_plugin_{key}": value for key, value in plugin.items()}
        return out


class _AwsFile(_Fact):
    """``data/aws.yaml``."""

    eks_addons: tuple[AddonVersion, ...]
    vcpu_quotas: tuple[VcpuQuota, ...]
    instance_sizes: _InstanceSizes
    pod_identity: PodIdentity
    efa: EfaFacts


@functools.cache
def _doc() -> _AwsFile:
    return packaged_model("data/aws.yaml", _AwsFile)


def efa_facts() -> EfaFacts:
    """The catalogued EFA facts."""
    return _doc().efa
