"""EksCluster: the VPC, the EKS control plane, its IAM roles, the untainted system node
group, the EKS add-ons, and a Kubernetes provider for the cluster."""

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from gpustrata.catalog.aws import pod_identity_trust_policy
from gpustrata.render.foundation import (
    EBS_CSI_ADDON,
    EBS_CSI_POLICY,
    EBS_CSI_SERVICE_ACCOUNT,
    SYSTEM_POOL,
    SYSTEM_SELECTOR,
    subnet_tags,
)
from gpustrata.render.foundation import subnet_layout as subnet_layout_of

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


class NetworkArgs(TypedDict):
    """The VPC :class:`EksCluster` creates when no subnets are given."""

    vpc_cidr: str
    """IPv4 CIDR of the VPC."""
    availability_zones: int
    """How many zones get a public and a private subnet."""
    nat_gateways: str
    """'single' or 'per-az'."""


class SystemPoolArgs(TypedDict):
    """The untainted node group for controllers and Ray heads."""

    instance_type: str
    """EC2 instance type."""
    capacity_type: str
    """ON_DEMAND or SPOT."""
    min_size: int
    """Minimum (and initial) nodes."""
    max_size: int
    """Maximum nodes."""
    disk_size_gib: int
    """Root volume size."""


class EksClusterArgs(TypedDict):
    """Inputs of :class:`EksCluster`."""

    cluster_name: str
    """EKS cluster name."""
    kubernetes_version: str
    """Kubernetes minor version, e.g. '1.33'."""
    region: str
    """AWS region (written into the kubeconfig's ``aws eks get-token``)."""
    subnet_ids: NotRequired[pulumi.Input[Sequence[str]]]
    """Private subnets for the control plane ENIs and the node groups; absent: a VPC is
    created from ``network``."""
    network: NotRequired[NetworkArgs]
    """The VPC to create when ``subnet_ids`` is absent."""
    system_pool: NotRequired[SystemPoolArgs]
    """The untainted node group for controllers (absent: none is created)."""
    addons: NotRequired[Mapping[str, str | None]]
    """EKS add-ons to manage: name -> pinned version (None: EKS's default for the
    cluster's version). ``coredns`` waits for the system nodes."""
    profile: NotRequired[str]
    """AWS CLI profile for ``aws eks get-token`` (the ``aws:profile`` config)."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster with its network, IAM roles, an untainted system node group, its
    add-ons, and a Kubernetes provider for it."""

    cluster_name: pulumi.Output[str]
    """Name of the EKS cluster."""
    node_role_arn: pulumi.Output[str]
    """ARN of the IAM role the node groups use."""
    node_role_name: pulumi.Output[str]
    """Name of that role (Karpenter's instance profile wraps it)."""
    cluster_arn: pulumi.Output[str]
    """ARN of the EKS cluster."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (exec-based, `aws eks get-token --region`) for the cluster."""
    subnet_ids: pulumi.Output[list[str]]
    """The private subnets the node groups use."""
    vpc_id: pulumi.Output[str]
    """The cluster's VPC (EKS's ``vpcConfig.vpcId``)."""
    cluster_security_group_id: pulumi.Output[str]
    """The security group EKS creates for the cluster and puts managed nodes in
    (``vpcConfig.clusterSecurityGroupId``); a launch template that names its own security
    groups must name this one too."""

    def __init__(
        self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:EksCluster", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        given = args.get("subnet_ids")
        self._zones_of: pulumi.Output[dict[str, str]] | None = None
        subnets: pulumi.Input[Sequence[str]] = (
            given if given is not None else self._network(name, args)
        )
        self.subnet_ids = pulumi.Output.from_input(subnets).apply(list)
        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            assume_role_policy=_assume_role("eks.amazonaws.com"),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy", role=cluster_role.name, policy_arn=CLUSTER_POLICY, opts=child
        )
        node_role = aws.iam.Role(
            f"{name}-node-role", assume_role_policy=_assume_role("ec2.amazonaws.com"), opts=child
        )
        node_policies = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-policy-{i}", role=node_role.name, policy_arn=arn, opts=child
            )
            for i, arn in enumerate(NODE_POLICIES)
        ]
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=args["cluster_name"],
            version=args["kubernetes_version"],
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=subnets),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API_AND_CONFIG_MAP",
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster_policy]),
        )
        self.cluster_name = cluster.name
        self.node_role_arn = node_role.arn
        self.node_role_name = node_role.name
        self.cluster_arn = cluster.arn
        self.vpc_id = cluster.vpc_config.vpc_id.apply(lambda v: v or "")
        self.cluster_security_group_id = cluster.vpc_config.cluster_security_group_id.apply(
            lambda v: v or ""
        )
        region, profile = args["region"], args.get("profile")
        self.kubeconfig = pulumi.Output.all(
            cluster.name, cluster.endpoint, cluster.certificate_authority
        ).apply(
            lambda v: _kubeconfig(
                v[0], v[1], getattr(v[2], "data", None) or "", region=region, profile=profile
            )
        )
        addons = dict(args.get("addons") or {})
        # The CNI and kube-proxy make a node Ready; they come before any node group.
        early = [
            self._addon(name, cluster, addon, addons.pop(addon), [])
            for addon in ("vpc-cni", "kube-proxy")
            if addon in addons
        ]
        self._ready: list[pulumi.Resource] = []
        pool = args.get("system_pool")
        if pool is not None:
            system = aws.eks.NodeGroup(
                f"{name}-system",
                cluster_name=cluster.name,
                node_group_name=SYSTEM_POOL,
                node_role_arn=node_role.arn,
                subnet_ids=subnets,
                instance_types=[pool["instance_type"]],
                ami_type=system_ami_type(pool["instance_type"]),
                version=args["kubernetes_version"],
                capacity_type=pool["capacity_type"],
                disk_size=pool["disk_size_gib"],
                # No taint: this is where every Pod without a GPU toleration lands.
                labels=dict(SYSTEM_SELECTOR),
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=pool["min_size"],
                    max_size=pool["max_size"],
                    desired_size=pool["min_size"],
                ),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[*node_policies, *early],
                    ignore_changes=["scalingConfig.desiredSize"],
                ),
            )
            self._ready.append(system)
        # CoreDNS and the Pod Identity agent run Pods: after the nodes they land on.
        for addon, version in addons.items():
            self._ready.append(self._addon(name, cluster, addon, version, list(self._ready)))
        self._ready.extend(early)
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "node_role_arn": self.node_role_arn,
                "node_role_name": self.node_role_name,
                "cluster_arn": self.cluster_arn,
                "kubeconfig": self.kubeconfig,
                "subnet_ids": self.subnet_ids,
                "vpc_id": self.vpc_id,
                "cluster_security_group_id": self.cluster_security_group_id,
            }
        )

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a controller's Pod waits for: the system node group and the add-ons that
        make a node usable (CNI, kube-proxy, CoreDNS, the Pod Identity agent)."""
        return list(self._ready)

    def _addon(
        self,
        name: str,
        cluster: aws.eks.Cluster,
        addon: str,
        version: str | None,
        after: list[pulumi.Resource],
    ) -> aws.eks.Addon:
        identities: list[aws.eks.AddonPodIdentityAssociationArgs] = []
        if addon == EBS_CSI_ADDON:
            # The controller creates volumes with its own role (EKS Pod Identity).
            role = aws.iam.Role(
                f"{name}-ebs-csi-role",
                assume_role_policy=json.dumps(pod_identity_trust_policy()),
                opts=pulumi.ResourceOptions(parent=self),
            )
            after = [
                *after,
                aws.iam.RolePolicyAttachment(
                    f"{name}-ebs-csi-policy",
                    role=role.name,
                    policy_arn=EBS_CSI_POLICY,
                    opts=pulumi.ResourceOptions(parent=self),
                ),
            ]
            identities.append(
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                )
            )
        return aws.eks.Addon(
            f"{name}-addon-{addon}",
            cluster_name=cluster.name,
            addon_name=addon,
            addon_version=version,
            # EKS installs self-managed CoreDNS, kube-proxy and the VPC CNI with the
            # cluster; the managed add-on takes them over.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=identities or None,
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )

    def _network(self, name: str, args: EksClusterArgs) -> pulumi.Output[list[str]]:
        """A VPC with a public and a private subnet per zone, NAT for the private ones;
        returns the private subnet ids."""
        network = args.get("network") or NetworkArgs(
            vpc_cidr="10.0.0.0/16", availability_zones=2, nat_gateways="single"
        )
        cluster = args["cluster_name"]
        child = pulumi.ResourceOptions(parent=self)
        zones = aws.get_availability_zones_output(
            state="available",
            filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=network["vpc_cidr"],
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": f"{cluster}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            opts=child,
        )
        layout = subnet_layout_of(network["vpc_cidr"], network["availability_zones"])
        private_ids: list[pulumi.Output[str]] = []
        nat: aws.ec2.NatGateway | None = None
        pairs: list[pulumi.Output[list[str]]] = []
        for block in layout:
            zone: pulumi.Output[str] = zones.names.apply(
                functools.partial(_zone, index=block.index)
            )
            public = _zone_subnet(
                f"{name}-public-{block.index}",
                vpc,
                zone,
                block.public_cidr,
                public_rt,
                cluster=cluster,
                public=True,
                opts=child,
            )
            if nat is None or network["nat_gateways"] == "per-az":
                eip = aws.ec2.Eip(f"{name}-nat-{block.index}-eip", domain="vpc", opts=child)
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{block.index}",
                    allocation_id=eip.id,
                    subnet_id=public.id,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                )
            private_rt = aws.ec2.RouteTable(
                f"{name}-private-{block.index}-rt",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                opts=child,
            )
            private = _zone_subnet(
                f"{name}-private-{block.index}",
                vpc,
                zone,
                block.private_cidr,
                private_rt,
                cluster=cluster,
                public=False,
                opts=child,
            )
            private_ids.append(private.id)
            pairs.append(pulumi.Output.all(private.id, zone))
        # Subnet id -> zone, for the node groups of instance types not offered everywhere.
        self._zones_of = pulumi.Output.all(*pairs).apply(
            lambda found: {str(p[0]): str(p[1]) for p in found}
        )
        return pulumi.Output.all(*private_ids).apply(lambda ids: [str(i) for i in ids])

    def subnets_offering(self, instance_type: str) -> pulumi.Input[Sequence[str]]:
        """The private subnets in zones that offer *instance_type* (EC2
        DescribeInstanceTypeOfferings); all of them for subnets given by the stack."""
        if self._zones_of is None:
            return self.subnet_ids
        offers = aws.ec2.get_instance_type_offerings_output(
            location_type="availability-zone",
            filters=[{"name": "instance-type", "values": [instance_type]}],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        return pulumi.Output.all(self._zones_of, offers.locations).apply(
            lambda v: _offering(instance_type, v[0], v[1])
        )

    def provider(self, name: str) -> k8s.Provider:
        """A Kubernetes provider for this cluster (child of the component)."""
        return k8s.Provider(
            name, kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )


def _zone(names: Sequence[str], *, index: int) -> str:
    if index >= len(names):
        raise ValueError(
            f"the region has {len(names)} availability zones without opt-in, fewer than "
            f"cluster.network.availability_zones ({index + 1}); lower it"
        )
    return str(sorted(names)[index])


def _offering(instance_type: str, zones_of: Mapping[str, str], offered: Sequence[str]) -> list[str]:
    """Subnet ids whose zone offers the instance type; an error naming the zones if none."""
    ids = [subnet for subnet, zone in zones_of.items() if zone in set(offered)]
    if not ids:
        raise ValueError(
            f"{instance_type} is offered in none of the VPC's zones "
            f"({', '.join(sorted(zones_of.values()))}); raise "
            "cluster.network.availability_zones, or pick an instance type the region's "
            "zones offer (aws ec2 describe-instance-type-offerings --location-type "
            f"availability-zone --filters Name=instance-type,Values={instance_type})"
        )
    return ids


def system_ami_type(instance_type: str) -> str:
    """EKS AMI type of the system pool: AL2023 standard, ARM for Graviton families."""
    family = instance_type.split(".", 1)[0]
    return (
        "AL2023_ARM_64_STANDARD"
        if re.fullmatch(r"[a-z]+[0-9]+g[a-z]*", family)
        else ("AL2023_x86_64_STANDARD")
    )


def _kubeconfig(
    cluster: str, endpoint: str, ca: str, *, region: str, profile: str | None = None
) -> str:
    """An exec-based kubeconfig: ``aws eks get-token`` with the cluster's region (and the
    stack's AWS profile), so it works whatever the shell's default region is."""
    token_args = ["eks", "get-token", "--cluster-name", cluster, "--region", region]
    if profile:
        token_args += ["--profile", profile]
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
                            "args": token_args,
                        }
                    },
                }
            ],
        }
    )


def _zone_subnet(
    name: str,
    vpc: aws.ec2.Vpc,
    zone: pulumi.Output[str],
    cidr: str,
    route_table: aws.ec2.RouteTable,
    *,
    cluster: str,
    public: bool,
    opts: pulumi.ResourceOptions,
) -> aws.ec2.Subnet:
    """One subnet of a zone, associated with its route table. The association is
    ``<subnet>-rt`` on a public subnet and ``<subnet>-rta`` on a private one (the private
    route table holds ``-rt``): the names stacks already hold, so their URNs stay."""
    subnet = aws.ec2.Subnet(
        name,
        vpc_id=vpc.id,
        cidr_block=cidr,
        availability_zone=zone,
        map_public_ip_on_launch=True if public else None,
        tags=subnet_tags(cluster, public=public),
        opts=opts,
    )
    aws.ec2.RouteTableAssociation(
        f"{name}-{'rt' if public else 'rta'}",
        subnet_id=subnet.id,
        route_table_id=route_table.id,
        opts=opts,
    )
    return subnet
