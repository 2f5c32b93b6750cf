"""WeightsIdentity: a ServiceAccount whose Pods may read one S3 prefix (EKS Pod Identity)."""

import json
from typing import TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpustrata.catalog.aws import pod_identity_trust_policy
from gpustrata.components._options import child_options
from gpustrata.render.foundation import s3_read_policy
from gpustrata.render.from_plan import weights_service_account_object


class WeightsIdentityArgs(TypedDict):
    """Inputs of :class:`WeightsIdentity`."""

    cluster_name: pulumi.Input[str]
    """EKS cluster the association belongs to."""
    namespace: str
    """Namespace of the ServiceAccount."""
    service_account: str
    """Name of the ServiceAccount the engines run under."""
    uri: str
    """``s3://bucket/prefix/`` the engines read their weights from."""


class WeightsIdentity(pulumi.ComponentResource):
    """An IAM role that may only list and read ``uri``, trusted by EKS Pod Identity and
    associated with ``namespace/service_account`` (rule K019). The cluster needs the
    ``eks-pod-identity-agent`` add-on, which InferenceStack installs."""

    role_arn: pulumi.Output[str]
    """ARN of the role the Pods get."""

    def __init__(
        self, name: str, args: WeightsIdentityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:WeightsIdentity", name, {}, opts)
        child = child_options(self, opts)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=weights_service_account_object(args["service_account"], args["namespace"])[
                "metadata"
            ],
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(pod_identity_trust_policy()),
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.iam.RolePolicy(
            f"{name}-read",
            role=role.id,
            policy=json.dumps(s3_read_policy(args["uri"])),
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=args["cluster_name"],
            namespace=args["namespace"],
            service_account=args["service_account"],
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
