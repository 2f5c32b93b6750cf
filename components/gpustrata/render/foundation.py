"""Pure renderers for the cluster foundation: the VPC's subnet layout and tags, the system
node group, and the chart values that put every controller on it.

GPU pools carry a GPU taint (rule K003), so a Pod that does not tolerate it (the GPU
Operator and NFD controllers, the KubeRay and Karpenter operators, KEDA, CoreDNS, a Ray
head) needs an untainted node: the system pool. Which values key of each chart places
which Pod comes from the chart catalogue (:mod:`gpustrata.catalog.charts`, cited per
chart and version), so no chart key is spelled here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.aws import eks_addon_version
from gpustrata.catalog.charts import (
    ChartRelease,
    chart_release,
    newest_chart_release,
    placement_values,
)
from gpustrata.core.contract import POOL_LABEL
from gpustrata.core.helmmerge import merge_helm_values
from gpustrata.spec.stack import StackSpec

SYSTEM_POOL = "system"
"""Name of the system node group (and its ``gpustrata.io/pool`` label value)."""
SYSTEM_SELECTOR: dict[str, str] = {POOL_LABEL: SYSTEM_POOL}
"""The node selector that lands a Pod on the system pool."""

# Subnet tags read by the AWS Load Balancer Controller / in-tree service controller
# (EKS user guide, "View Amazon EKS networking requirements for VPC and subnets":
# kubernetes.io/role/elb on public, kubernetes.io/role/internal-elb on private subnets)
# and by Karpenter's subnetSelectorTerms (karpenter.sh/discovery, the getting-started
# guide of aws/karpenter-provider-aws@v1.14.1).
ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
DISCOVERY_TAG = "karpenter.sh/discovery"


@dataclass(frozen=True, slots=True)
class SubnetLayout:
    """One availability zone's subnets (by index: the zone is resolved at deploy time)."""

    index: int
    public_cidr: str
    private_cidr: str


def subnet_layout(vpc_cidr: str, zones: int) -> list[SubnetLayout]:
    """Carve the VPC CIDR: 16 equal blocks, private subnets take blocks 0..n-1 (one per
    zone, where the nodes and their Pod IPs live: the VPC CNI gives each Pod a VPC
    address), public subnets blocks 8..8+n-1 (NAT gateways and load balancers)."""
    vpc = ipaddress.ip_network(vpc_cidr)
    blocks = list(vpc.subnets(prefixlen_diff=4))
    return [SubnetLayout(i, str(blocks[8 + i]), str(blocks[i])) for i in range(zones)]


def subnet_tags(cluster_name: str, *, public: bool) -> dict[str, str]:
    """Tags of a created subnet: load-balancer role, and Karpenter discovery on private."""
    if public:
        return {ELB_TAG: "1"}
    return {INTERNAL_ELB_TAG: "1", DISCOVERY_TAG: cluster_name}


def catalogued_chart(chart: str, version: str) -> tuple[ChartRelease | None, str]:
    """The chart's catalogued facts at *version*, else the newest catalogued release of
    that chart (its values keys), with a note saying which was used; (None, note) when
    the chart is not catalogued at all."""
    found = chart_release(chart, version)
    if found is not None:
        return found, f"{chart} {found.version} (chart catalogue)"
    newest = newest_chart_release(chart)
    if newest is None:
        return None, f"{chart} is not in the chart catalogue"
    return newest, (
        f"{chart} {version} is not catalogued; its controllers are placed with the values "
        f"keys of {newest.version}"
    )


def system_values(chart: str, version: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """*values* with every Pod of the chart pinned to the system pool (its node selector
    set through the chart's own values keys, from the chart catalogue). A chart that is
    not catalogued keeps *values* unchanged (the rehearsal then says it is not evaluated).
    """
    release, _ = catalogued_chart(chart, version)
    if release is None:
        return dict(values)
    return merge_helm_values(placement_values(release, SYSTEM_SELECTOR, ()), values)


def system_pool_placement(spec: StackSpec) -> dict[str, str] | None:
    """The node selector of controllers and Ray heads: the system pool in create mode;
    None on an existing cluster (its nodes' labels are the cluster's own)."""
    return dict(SYSTEM_SELECTOR) if spec.cluster.mode == "create" else None


def s3_prefix(uri: str) -> tuple[str, str]:
    """(bucket, key prefix) of an ``s3://bucket/prefix/`` URI."""
    rest = uri.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix


def s3_read_policy(uri: str) -> dict[str, Any]:
    """An IAM policy that may list and read the objects under *uri* and nothing else
    (Amazon S3 user guide, "Policies and permissions in Amazon S3": s3:ListBucket on the
    bucket with an s3:prefix condition, s3:GetObject on the keys)."""
    bucket, prefix = s3_prefix(uri)
    keys = f"{prefix}*" if prefix else "*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [keys]}},
            },
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [f"arn:aws:s3:::{bucket}/{keys}"],
            },
        ],
    }


MONITORING_REPO = "https://prometheus-community.github.io/helm-charts"
MONITORING_CHART = "kube-prometheus-stack"
KEDA_REPO = "https://kedacore.github.io/charts"
KEDA_CHART = "keda"


def chart_version(chart: str, stated: str | None, where: str) -> str:
    """The version to install: *stated*, else the newest catalogued release of *chart*.
    Raises ValueError naming *where* when neither exists."""
    if stated:
        return stated
    release, note = catalogued_chart(chart, "")
    if release is None:
        raise ValueError(f"{where}: {note}; set chart_version")
    return release.version


def monitoring_values() -> dict[str, Any]:
    """kube-prometheus-stack values: its Prometheus selects every ServiceMonitor, not only
    the release's own (``serviceMonitorSelectorNilUsesHelmValues: false``), so the models'
    and the DCGM exporter's monitors are scraped."""
    return {
        "prometheus": {
            "prometheusSpec": {
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "nodeSelector": dict(SYSTEM_SELECTOR),
            }
        },
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": dict(SYSTEM_SELECTOR)}},
        # Dashboards are the user's choice; the stack needs the operator and Prometheus.
        "grafana": {"enabled": False},
    }


def addon_versions(kubernetes_version: str, *, csi: bool) -> dict[str, str | None]:
    """The EKS add-ons a created cluster manages, each pinned where the AWS catalogue
    cites a version for *kubernetes_version* (None: EKS's default for that version).
    The EBS CSI driver only when a model's volume needs it (*csi*)."""
    names = ["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"]
    if csi:
        names.append(EBS_CSI_ADDON)
    out: dict[str, str | None] = {}
    for name in names:
        found = eks_addon_version(name, kubernetes_version)
        out[name] = found.version if found is not None else None
    return out


EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
"""The add-on's controller ServiceAccount in kube-system (EKS user guide, "Use Kubernetes
volume storage with Amazon EBS": the role is associated with this account)."""
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
"""The AWS managed policy the EBS CSI controller's role needs (same guide)."""
CACHE_STORAGE_CLASS = "gpustrata-gp3"
"""The StorageClass of the model-cache volumes the stack creates."""


def needs_ebs_csi(spec: StackSpec) -> bool:
    """Does a model ask the stack for a model-cache volume (pvc source, cache_size_gib)?"""
    return spec.cluster.mode == "create" and any(
        m.weights.source == "pvc" and m.weights.cache_size_gib > 0 for m in spec.models
    )


def cache_storage_class() -> dict[str, Any]:
    """gp3 EBS volumes, bound where the Pod is scheduled (WaitForFirstConsumer: the volume
    is created in the zone of the Pod's node, not a random one), deleted with the claim."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CACHE_STORAGE_CLASS},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "parameters": {"type": "gp3"},
    }


def cache_claim(name: str, namespace: str, size_gib: int) -> dict[str, Any]:
    """The model-cache claim of one model: ReadWriteOnce (one node at a time; the spec
    refuses it for models that may run more than one replica)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": CACHE_STORAGE_CLASS,
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
    }
