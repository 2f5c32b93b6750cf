"""Pure renderers for Karpenter-provisioned pools: the EC2NodeClass, the NodePool and the
controller chart's values, in the upstream shapes (karpenter.sh/v1, karpenter.k8s.aws/v1).

Field names and accepted values follow the CRDs of the pinned release
(aws/karpenter-provider-aws@v1.14.1 pkg/apis/crds/, copied under tests/schemas/ for the
schema test). The kubelet settings are the planner's, as for a managed node group.
"""

from __future__ import annotations

from typing import Any

from gpustrata.core.contract import POOL_LABEL

NODE_POOL_API = "karpenter.sh/v1"
NODE_CLASS_API = "karpenter.k8s.aws/v1"
NODE_CLASS_GROUP = "karpenter.k8s.aws"
GPU_RESOURCE = "nvidia.com/gpu"
# Karpenter's well-known requirement keys (karpenter.sh/v1 NodePool requirements).
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"
ARCH_KEY = "kubernetes.io/arch"
CAPACITY_TYPES = {"ON_DEMAND": "on-demand", "SPOT": "spot"}
ARCHES = {"x86_64": "amd64", "arm64": "arm64"}
DISRUPTION_BUDGET_NODES = "1"
"""At most one node of the pool disrupted at a time (empty, drifted or expired)."""
# Bottlerocket boots from a small OS volume; images and Pod storage live on /dev/xvdb
# (karpenter.sh docs, concepts/nodeclasses.md "blockDeviceMappings", Bottlerocket).
BOTTLEROCKET_OS_GIB = 4
CONTROLLER_RESOURCES = {"cpu": "1", "memory": "1Gi"}
"""Controller requests and limits as the upstream install sets them (aws/karpenter-provider-aws
@v1.14.1 website/.../getting-started-with-karpenter/scripts/step08-apply-helm-chart.sh)."""


SERVICE_ACCOUNT = "karpenter"
"""The chart's service account (fullname of release 'karpenter'), bound by Pod Identity."""


def instance_profile_name(cluster_name: str) -> str:
    """Name of the instance profile of the nodes Karpenter launches for *cluster_name*."""
    return f"{cluster_name}-karpenter-nodes"


def interruption_queue_name(cluster_name: str) -> str:
    """Name of the SQS queue Karpenter reads interruption events from."""
    return f"{cluster_name}-karpenter"


def node_class_object(
    *,
    name: str,
    ami_alias: str,
    instance_profile: Any,
    cluster_name: str,
    subnet_ids: Any,
    disk_size_gib: int,
    kubelet: dict[str, Any],
) -> dict[str, Any]:
    """The pool's ``EC2NodeClass``: node image alias, root or data volume sized for the
    weights (``disk_size_gib``), and the kubelet reservations of ``kubelet``
    (a :func:`gpustrata.render.nodes.kubelet_config` mapping).

    ``subnet_ids`` selects subnets by id (a list, or an Output in a Pulumi program);
    ``None`` selects them by the ``karpenter.sh/discovery: <cluster>`` tag. The security
    group is the EKS cluster security group (EKS tags it ``aws:eks:cluster-name``).
    """
    volume: dict[str, Any] = {
        "volumeSize": f"{disk_size_gib}Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }
    if ami_alias.startswith("bottlerocket@"):
        devices: list[dict[str, Any]] = [
            {
                "deviceName": "/dev/xvda",
                "ebs": {**volume, "volumeSize": f"{BOTTLEROCKET_OS_GIB}Gi"},
            },
            {"deviceName": "/dev/xvdb", "ebs": volume},
        ]
    else:
        devices = [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": volume}]
    subnets: Any = (
        [{"tags": {"karpenter.sh/discovery": cluster_name}}] if subnet_ids is None else subnet_ids
    )
    return {
        "apiVersion": NODE_CLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": ami_alias}],
            "instanceProfile": instance_profile,
            "subnetSelectorTerms": subnets,
            "securityGroupSelectorTerms": [{"tags": {"aws:eks:cluster-name": cluster_name}}],
            "blockDeviceMappings": devices,
            "kubelet": {
                "maxPods": kubelet["maxPods"],
                "systemReserved": dict(kubelet["systemReserved"]),
                "kubeReserved": dict(kubelet["kubeReserved"]),
                # KubeletConfiguration spelling: bare quantities ("500Mi"), not "<500Mi".
                "evictionHard": {k: v.lstrip("<") for k, v in kubelet["evictionHard"].items()},
            },
            "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2},
            "tags": {POOL_LABEL: name},
        },
    }


def node_pool_object(
    *,
    name: str,
    instance_types: list[str],
    arch: str,
    capacity_type: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    gpu_limit: int,
    consolidate_after: str,
) -> dict[str, Any]:
    """The pool's ``NodePool``: its instance types and capacity type, the pool's labels and
    taints on every node, at most ``gpu_limit`` GPUs, and a disruption policy that never
    consolidates a node an engine serves or loads on (``WhenEmpty``: only nodes without
    Pods), never expires nodes, and disrupts one node at a time."""
    return {
        "apiVersion": NODE_POOL_API,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeClassRef": {
                        "group": NODE_CLASS_GROUP,
                        "kind": "EC2NodeClass",
                        "name": name,
                    },
                    "requirements": [
                        {
                            "key": INSTANCE_TYPE_KEY,
                            "operator": "In",
                            "values": list(instance_types),
                        },
                        {
                            "key": CAPACITY_TYPE_KEY,
                            "operator": "In",
                            "values": [CAPACITY_TYPES[capacity_type]],
                        },
                        {"key": ARCH_KEY, "operator": "In", "values": [ARCHES[arch]]},
                    ],
                    "taints": [{k: v for k, v in t.items() if v or k != "value"} for t in taints],
                    "expireAfter": "Never",
                },
            },
            "limits": {GPU_RESOURCE: str(gpu_limit)},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": DISRUPTION_BUDGET_NODES}],
            },
        },
    }


def controller_values(
    *,
    cluster_name: str,
    interruption_queue: Any,
    replicas: int,
    tolerations: list[dict[str, Any]],
) -> dict[str, Any]:
    """Chart values of the Karpenter controller: the cluster and interruption queue, one
    replica per standing node, and tolerations for the managed pools' taints (the chart
    keeps it off the nodes Karpenter provisions)."""
    return {
        "replicas": replicas,
        "settings": {"clusterName": cluster_name, "interruptionQueue": interruption_queue},
        "tolerations": tolerations,
        "controller": {
            "resources": {"requests": CONTROLLER_RESOURCES, "limits": CONTROLLER_RESOURCES}
        },
    }
