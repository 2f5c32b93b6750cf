"""Karpenter on EKS: the controller (IAM through EKS Pod Identity, the interruption queue
and its EventBridge rules, the pinned Helm chart) and one EC2NodeClass + NodePool per pool.

What the controller needs follows the upstream install (aws/karpenter-provider-aws@v1.14.1
website/content/en/docs/getting-started/getting-started-with-karpenter/cloudformation.yaml):
a node role with an instance profile and an EKS access entry, a controller role, an SQS
queue fed by EventBridge with Spot, rebalance, state-change, health and capacity-reservation
events. The controller policy below grants the same API actions, written for gpustrata.
"""

import json
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpustrata.catalog.aws import pod_identity_trust_policy
from gpustrata.components._helm import pinned_release
from gpustrata.components._options import child_options
from gpustrata.components.serving import register_object

# EventBridge events Karpenter's interruption controller reads (source, detail-type).
INTERRUPTION_EVENTS = (
    ("aws.health", "AWS Health Event"),
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("aws.ec2", "EC2 Instance State-change Notification"),
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
)
QUEUE_RETENTION_S = 300
"""Interruption messages older than five minutes are stale (upstream MessageRetentionPeriod)."""
_EC2_LIFECYCLE = [
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
    "ec2:CreateTags",
    "ec2:TerminateInstances",
    "ec2:DeleteLaunchTemplate",
]
_READ = [
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
    "pricing:GetProducts",
    "iam:ListInstanceProfiles",
    "iam:GetInstanceProfile",
]


def _controller_policy(
    args: tuple[str, str, str, str],
) -> str:
    cluster_arn, queue_arn, node_role_arn, region = args
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "NodeLifecycle",
                    "Effect": "Allow",
                    "Action": _EC2_LIFECYCLE,
                    "Resource": "*",
                    "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
                },
                {
                    "Sid": "Discovery",
                    "Effect": "Allow",
                    "Action": _READ,
                    "Resource": "*",
                },
                {
                    "Sid": "AmiParameters",
                    "Effect": "Allow",
                    "Action": "ssm:GetParameter",
                    "Resource": f"arn:aws:ssm:{region}::parameter/aws/service/*",
                },
                {
                    "Sid": "PassNodeRole",
                    "Effect": "Allow",
                    "Action": "iam:PassRole",
                    "Resource": node_role_arn,
                    "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
                },
                {
                    "Sid": "ClusterEndpoint",
                    "Effect": "Allow",
                    "Action": "eks:DescribeCluster",
                    "Resource": cluster_arn,
                },
                {
                    "Sid": "InterruptionQueue",
                    "Effect": "Allow",
                    "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                    "Resource": queue_arn,
                },
            ],
        }
    )


class KarpenterArgs(TypedDict):
    """Inputs of :class:`Karpenter`."""

    cluster_name: pulumi.Input[str]
    """EKS cluster name."""
    cluster_arn: pulumi.Input[str]
    """EKS cluster ARN (the controller may describe only this cluster)."""
    region: str
    """AWS region of the cluster."""
    node_role_name: pulumi.Input[str]
    """IAM role of the nodes Karpenter launches (gets an instance profile)."""
    node_role_arn: pulumi.Input[str]
    """Its ARN (access entry, iam:PassRole)."""
    instance_profile_name: str
    """Name of the nodes' instance profile (the EC2NodeClasses name it)."""
    queue_name: str
    """Name of the interruption queue (settings.interruptionQueue)."""
    namespace: str
    """Namespace of the controller."""
    service_account: str
    """Service account of the controller (the Pod Identity association's)."""
    chart: str
    """OCI chart reference."""
    chart_version: str
    """Chart version (pinned)."""
    values: dict[str, Any]
    """Chart values (settings.interruptionQueue is filled in)."""
    install_pod_identity_agent: NotRequired[bool]
    """Install the eks-pod-identity-agent add-on (default true; false when the cluster
    already manages it, as :class:`EksCluster` does)."""


class Karpenter(pulumi.ComponentResource):
    """The Karpenter controller with its AWS side: roles, instance profile, access entry,
    interruption queue and rules, Pod Identity, and the pinned Helm release."""

    release: k8s.helm.v3.Release
    """The controller's Helm release (its CRDs come with it)."""

    def __init__(
        self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:Karpenter", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        aws.iam.InstanceProfile(
            f"{name}-node-profile",
            name=args["instance_profile_name"],
            role=args["node_role_name"],
            opts=child,
        )
        # No access entry for the node role: the planner requires a managed node group
        # (the controller runs there), which uses the same role, and EKS creates that role's
        # EC2_LINUX entry itself; a second one fails with ResourceInUseException
        # (docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html).
        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=args["queue_name"],
            message_retention_seconds=QUEUE_RETENTION_S,
            sqs_managed_sse_enabled=True,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruption-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {
                                    "Service": ["events.amazonaws.com", "sqs.amazonaws.com"]
                                },
                                "Action": "sqs:SendMessage",
                                "Resource": arn,
                            },
                            {
                                "Sid": "DenyHTTP",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "sqs:*",
                                "Resource": arn,
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            },
                        ],
                    }
                )
            ),
            opts=child,
        )
        for i, (source, detail) in enumerate(INTERRUPTION_EVENTS):
            rule = aws.cloudwatch.EventRule(
                f"{name}-event-{i}",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail]}),
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-event-{i}-target", rule=rule.name, arn=queue.arn, opts=child
            )
        role = aws.iam.Role(
            f"{name}-controller-role",
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-controller-policy",
            role=role.name,
            policy=pulumi.Output.all(
                args["cluster_arn"], queue.arn, args["node_role_arn"], args["region"]
            ).apply(lambda v: _controller_policy((v[0], v[1], v[2], v[3]))),
            opts=child,
        )
        # The agent add-on, unless the cluster already manages it (EksCluster does: a
        # second aws.eks.Addon of the same name fails with ResourceInUseException).
        agent: list[pulumi.Resource] = []
        if args.get("install_pod_identity_agent", True):
            agent.append(
                aws.eks.Addon(
                    f"{name}-pod-identity-agent",
                    cluster_name=args["cluster_name"],
                    addon_name="eks-pod-identity-agent",
                    opts=child,
                )
            )
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args["cluster_name"],
            namespace=args["namespace"],
            service_account=args["service_account"],
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=agent),
        )
        self.release = pinned_release(
            self,
            f"{name}-release",
            opts,
            release="karpenter",
            chart=args["chart"],
            version=args["chart_version"],
            namespace=args["namespace"],
            values=args["values"],
            depends_on=[identity, queue],
        )
        self.register_outputs({})


class KarpenterNodePoolArgs(TypedDict):
    """Inputs of :class:`KarpenterNodePool`."""

    node_class: dict[str, Any]
    """The EC2NodeClass object (gpustrata.render.karpenter.node_class_object)."""
    node_pool: dict[str, Any]
    """The NodePool object (gpustrata.render.karpenter.node_pool_object)."""


class KarpenterNodePool(pulumi.ComponentResource):
    """A GPU pool Karpenter provisions: its EC2NodeClass and NodePool (after the chart,
    which installs their CRDs)."""

    def __init__(
        self, name: str, args: KarpenterNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:KarpenterNodePool", name, {}, opts)
        node_class = register_object(
            f"{name}-nodeclass", args["node_class"], child_options(self, opts)
        )
        register_object(
            f"{name}-nodepool", args["node_pool"], child_options(self, opts, [node_class])
        )
        self.register_outputs({})


def subnet_terms(subnet_ids: pulumi.Input[Sequence[str]]) -> pulumi.Output[list[dict[str, str]]]:
    """EC2NodeClass subnetSelectorTerms selecting *subnet_ids* by id."""
    return pulumi.Output.from_input(subnet_ids).apply(lambda ids: [{"id": i} for i in ids])
