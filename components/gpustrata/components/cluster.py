"""EksCluster: the EKS control plane, its IAM roles, and a Kubernetes provider for it."""

import json
from collections.abc import Sequence
from typing import TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

# Managed policies an EKS node role needs (EKS user guide, "Amazon EKS node IAM role").
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
CLUSTER_POLICY = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"


def _assume_role(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
            ],
        }
    )


class EksClusterArgs(TypedDict):
    """Inputs of :class:`EksCluster`."""

    cluster_name: str
    """EKS cluster name."""
    kubernetes_version: str
    """Kubernetes minor version, e.g. '1.33'."""
    subnet_ids: pulumi.Input[Sequence[str]]
    """Subnets for the control plane ENIs and the node groups."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with its IAM roles, a node role for GPU pools, and a k8s provider."""

    cluster_name: pulumi.Output[str]
    """Name of the EKS cluster."""
    node_role_arn: pulumi.Output[str]
    """ARN of the IAM role the node groups use."""
    node_role_name: pulumi.Output[str]
    """Name of that role (Karpenter's instance profile wraps it)."""
    cluster_arn: pulumi.Output[str]
    """ARN of the EKS cluster."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (exec-based, `aws eks get-token`) for the cluster."""

    def __init__(
        self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:EksCluster", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            assume_role_policy=_assume_role("eks.amazonaws.com"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=cluster_role.name, policy_arn=CLUSTER_POLICY, opts=child
        )
        node_role = aws.iam.Role(
            f"{name}-node-role", assume_role_policy=_assume_role("ec2.amazonaws.com"), opts=child
        )
        for i, arn in enumerate(NODE_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{name}-node-policy-{i}", role=node_role.name, policy_arn=arn, opts=child
            )
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=args["cluster_name"],
            version=args["kubernetes_version"],
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=args["subnet_ids"]),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API_AND_CONFIG_MAP",
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            opts=child,
        )
        self.cluster_name = cluster.name
        self.node_role_arn = node_role.arn
        self.node_role_name = node_role.name
        self.cluster_arn = cluster.arn
        self.kubeconfig = pulumi.Output.all(
            cluster.name, cluster.endpoint, cluster.certificate_authority
        ).apply(lambda v: _kubeconfig(v[0], v[1], getattr(v[2], "data", None) or ""))
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "cluster_arn": self.cluster_arn,
                "kubeconfig": self.kubeconfig,
            }
        )

    def provider(self, name: str) -> k8s.Provider:
        """A Kubernetes provider for this cluster (child of the component)."""
        return k8s.Provider(
            name, kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )


def _kubeconfig(cluster: str, endpoint: str, ca: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": cluster, "cluster": {"server": endpoint, "certificate-authority-data": ca}}
            ],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
            "current-context": cluster,
            "users": [
                {
                    "name": cluster,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster],
                        }
                    },
                }
            ],
        }
    )
