"""GpuNodePool: an EKS managed node group of GPU instances with kubelet reservations."""

import base64
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from gpustrata.components._inputs import ComponentInputError, Placeholders
from gpustrata.render.nodes import (
    EKS_EFFECTS,
    kubelet_config,
    nodeadm_user_data,
    pool_description,
)

if TYPE_CHECKING:
    from gpustrata.planning.plan_types import PoolPlan


class TaintArgs(TypedDict):
    """A node taint in Kubernetes spelling."""

    key: str
    """Taint key."""
    value: str
    """Taint value."""
    effect: str
    """NoSchedule, NoExecute or PreferNoSchedule."""


class KubeletArgs(TypedDict):
    """Kubelet settings rendered into the nodeadm NodeConfig."""

    max_pods: int
    """maxPods."""
    system_reserved: dict[str, str]
    """systemReserved."""
    kube_reserved: dict[str, str]
    """kubeReserved."""
    eviction_hard: dict[str, str]
    """evictionHard."""


class GpuNodePoolArgs(TypedDict):
    """Inputs of :class:`GpuNodePool`."""

    create: bool
    """Create the node group (false: the pool exists and is only described)."""
    pool_name: str
    """Pool name (node label gpustrata.io/pool)."""
    instance_type: str
    """EC2 instance type."""
    ami_type: str
    """EKS amiType, e.g. AL2023_x86_64_NVIDIA."""
    kubernetes_version: str
    """Kubernetes minor of the nodes (the node group's version), e.g. '1.34'."""
    capacity_type: str
    """ON_DEMAND or SPOT."""
    min_size: int
    """Minimum nodes."""
    max_size: int
    """Maximum nodes."""
    desired_size: int
    """Initial nodes."""
    disk_size_gib: int
    """Root volume size in GiB."""
    labels: Mapping[str, pulumi.Input[str]]
    """Node labels (values may be Outputs)."""
    taints: list[TaintArgs]
    """Node taints."""
    kubelet: KubeletArgs
    """Kubelet reservations."""
    gpu_product: str
    """GFD product label of the GPUs (for the pool description)."""
    gpu_count: int
    """GPUs per node."""
    vcpu: int
    """vCPUs per node."""
    memory_mib: int
    """Memory per node in MiB."""
    driver_version: NotRequired[str]
    """NVIDIA driver preinstalled in the node image (for the rules' driver checks)."""
    provisioner: NotRequired[str]
    """'karpenter': the nodes come from a Karpenter NodePool of the pool's name, so only
    the description is registered here (default 'managed-node-group')."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """EKS cluster name (create mode)."""
    node_role_arn: NotRequired[pulumi.Input[str]]
    """IAM role of the nodes (create mode)."""
    subnet_ids: NotRequired[pulumi.Input[Sequence[str]]]
    """Subnets of the nodes (create mode)."""
    efa_interfaces: NotRequired[int]
    """EFA interfaces to attach to each node (create mode; 0 or absent: none). With EFA the
    launch template gets one EFA interface per network card, the nodes a cluster placement
    group and an EFA security group, and the node group the first of ``subnet_ids`` only."""
    vpc_id: NotRequired[pulumi.Input[str]]
    """The cluster's VPC (create mode with EFA: the EFA security group's VPC)."""
    cluster_security_group_id: NotRequired[pulumi.Input[str]]
    """EKS's cluster security group (create mode with EFA: each interface keeps it, since
    EKS adds it to no interface a launch template declares)."""


class GpuNodePool(pulumi.ComponentResource):
    """A GPU node pool: launch template with nodeadm kubelet config + EKS managed node group.

    Its ``description`` output is the ``GpuNodePool`` object the policy rules read, so
    rules know the pool's GPUs, taints and reservations even when it is only described.
    """

    description: pulumi.Output[dict[str, Any]]
    """The pool as the rules see it (kind GpuNodePool)."""
    node_group_name: pulumi.Output[str]
    """Name of the EKS node group ('' when described only)."""

    def __init__(
        self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        kubelet = kubelet_config(**args["kubelet"])
        karpenter = args.get("provisioner", "managed-node-group") == "karpenter"
        if args["create"] and not karpenter and args.get("efa_interfaces"):
            _Efa.check(args)  # before anything is registered
        inputs = Placeholders()
        description = pool_description(
            name=args["pool_name"],
            instance_type=args["instance_type"],
            gpu_product=args["gpu_product"],
            gpu_count=args["gpu_count"],
            vcpu=args["vcpu"],
            memory_mib=args["memory_mib"],
            labels=inputs.plain_map(args["labels"]),
            taints=[
                {"key": t["key"], "value": t["value"], "effect": t["effect"]}
                for t in args["taints"]
            ],
            kubelet=kubelet,
            min_size=args["min_size"],
            max_size=args["max_size"],
            kubernetes_version=args["kubernetes_version"],
            # A described pool's node image is not known to the stack.
            ami_type=args["ami_type"] if args["create"] else None,
            driver_version=args.get("driver_version"),
            disk_size_gib=args["disk_size_gib"] if args["create"] else None,
            provisioner="karpenter" if karpenter else None,
        )
        description = inputs.restore(description)
        super().__init__("gpustrata:index:GpuNodePool", name, {"description": description}, opts)
        self.description = pulumi.Output.from_input(description)
        if not args["create"] or karpenter:
            self.node_group_name = pulumi.Output.from_input("")
            self.register_outputs({"description": description, "node_group_name": ""})
            return
        child = pulumi.ResourceOptions(parent=self)
        user_data = nodeadm_user_data(
            pool=args["pool_name"], instance_type=args["instance_type"], kubelet=kubelet
        )
        efa = _Efa.create(name, args, child) if args.get("efa_interfaces") else None
        template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            user_data=base64.b64encode(user_data.encode()).decode(),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args["disk_size_gib"],
                        volume_type="gp3",
                        delete_on_termination="true",
                    ),
                )
            ],
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_tokens="required", http_put_response_hop_limit=2
            ),
            network_interfaces=efa.interfaces if efa is not None else None,
            placement=efa.placement if efa is not None else None,
            # The interfaces' security group rules exist before a node starts.
            opts=pulumi.ResourceOptions(parent=self, depends_on=efa.rules if efa else None),
        )
        group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.get("cluster_name", ""),
            node_group_name=args["pool_name"],
            node_role_arn=args.get("node_role_arn", ""),
            subnet_ids=efa.subnet_ids if efa is not None else args.get("subnet_ids", []),
            instance_types=[args["instance_type"]],
            ami_type=args["ami_type"],
            # Nodes follow the cluster's minor: a control-plane upgrade in the stack rolls them.
            version=args["kubernetes_version"],
            capacity_type=args["capacity_type"],
            labels=args["labels"],
            taints=[
                aws.eks.NodeGroupTaintArgs(
                    key=t["key"], value=t["value"] or None, effect=EKS_EFFECTS[t["effect"]]
                )
                for t in args["taints"]
            ],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=args["min_size"],
                max_size=args["max_size"],
                desired_size=args["desired_size"],
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            # The cluster autoscaler owns desired size after creation.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.node_group_name = group.node_group_name
        self.register_outputs({"description": description, "node_group_name": self.node_group_name})


class _Efa:
    """What a node group needs for EFA: the launch template's interfaces and placement,
    the node group's one subnet, and the security group rules the interfaces rely on."""

    def __init__(
        self,
        interfaces: list[aws.ec2.LaunchTemplateNetworkInterfaceArgs],
        placement: aws.ec2.LaunchTemplatePlacementArgs,
        subnet_ids: pulumi.Output[list[str]],
        rules: list[pulumi.Resource],
    ) -> None:
        self.interfaces = interfaces
        self.placement = placement
        self.subnet_ids = subnet_ids
        self.rules = rules

    @staticmethod
    def check(args: GpuNodePoolArgs) -> tuple[pulumi.Input[str], pulumi.Input[str]]:
        """The VPC and cluster security group EFA needs; raises :class:`ComponentInputError`
        naming the missing input."""
        vpc_id = args.get("vpc_id")
        cluster_sg = args.get("cluster_security_group_id")
        if vpc_id is None or cluster_sg is None:
            raise ComponentInputError(
                "vpcId" if vpc_id is None else "clusterSecurityGroupId",
                "efa_interfaces needs vpc_id and cluster_security_group_id (the EKS "
                "cluster's VPC and cluster security group): pass EksCluster.vpc_id and "
                "EksCluster.cluster_security_group_id",
            )
        return vpc_id, cluster_sg

    @staticmethod
    def create(name: str, args: GpuNodePoolArgs, child: pulumi.ResourceOptions) -> "_Efa":
        """The placement group, the EFA security group with its rules, and the interfaces.

        AWS requirements (EC2 user guide):
        - one EFA per network card; the primary interface (network card 0) at device index
          0, every other at the next network card and device index 1
          (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html,
          https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/p5-efa.html);
        - a security group that allows all inbound and outbound traffic to and from itself
          (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html, "Prepare an
          EFA-enabled security group");
        - EFA's OS-bypass traffic stays within one subnet, and a cluster placement group
          within one Availability Zone
          (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html,
          https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html).
        EKS (https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html, read at
        awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:
        latest/ug/nodes/launch-templates.adoc): a launch template's interfaces name no
        subnet (the node group's subnets apply); "If you specify custom security groups in
        the launch template ... Amazon EKS doesn't add the cluster security group", so each
        interface keeps it here; the one-interface limit there is the console's only. The
        EKS guide's own EFA node group (latest/ug/ml/node-efa.adoc) is a managed node group
        in one Availability Zone.
        """
        count = args.get("efa_interfaces", 0)
        vpc_id, cluster_sg = _Efa.check(args)
        group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", opts=child)
        sg = aws.ec2.SecurityGroup(
            f"{name}-efa-sg",
            vpc_id=vpc_id,
            description=f"EFA traffic between the nodes of pool {args['pool_name']}",
            opts=child,
        )
        directions = (
            ("in", aws.vpc.SecurityGroupIngressRule, "from"),
            ("out", aws.vpc.SecurityGroupEgressRule, "to"),
        )
        rules: list[pulumi.Resource] = [
            rule(
                f"{name}-efa-{way}",
                security_group_id=sg.id,
                referenced_security_group_id=sg.id,
                ip_protocol="-1",
                description=f"EFA: all traffic {side} the same security group",
                opts=child,
            )
            for way, rule, side in directions
        ]
        interfaces = [
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=card,
                device_index=0 if card == 0 else 1,
                interface_type="efa",
                security_groups=[cluster_sg, sg.id],
                delete_on_termination="true",
            )
            for card in range(count)
        ]
        subnets = pulumi.Output.from_input(args.get("subnet_ids", [])).apply(
            lambda ids: list(ids)[:1]
        )
        return _Efa(
            interfaces,
            aws.ec2.LaunchTemplatePlacementArgs(group_name=group.name),
            subnets,
            rules,
        )


def gpu_node_pool_args(
    instance_type: str,
    *,
    pool_name: str,
    kubernetes_version: str,
    create: bool = True,
    min_size: int = 0,
    max_size: int = 1,
    desired_size: int | None = None,
    capacity_type: str = "ON_DEMAND",
    disk_size_gib: int | None = None,
    labels: Mapping[str, pulumi.Input[str]] | None = None,
    taints: Sequence[TaintArgs] | None = None,
    driver_version: str | None = None,
    cluster_name: pulumi.Input[str] | None = None,
    node_role_arn: pulumi.Input[str] | None = None,
    subnet_ids: pulumi.Input[Sequence[str]] | None = None,
) -> GpuNodePoolArgs:
    """:class:`GpuNodePoolArgs` for *instance_type*, with what the catalogue knows filled
    in: GPU product and count, vCPUs, memory, the EKS AMI type, maxPods and the kubelet
    reservations (the same planner ``InferenceStack`` uses). ``taints`` default to the
    usual ``nvidia.com/gpu=true:NoSchedule``. Raises :class:`ComponentInputError` naming
    the argument for an unknown instance type or an invalid value."""
    from pydantic import ValidationError

    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.planning.node_pools import _plan_pool
    from gpustrata.planning.plan_types import PlanError
    from gpustrata.planning.provenance import Ledger
    from gpustrata.spec.cluster import NodePoolSpec

    plain = {k: v for k, v in (labels or {}).items() if isinstance(v, str)}
    fields: dict[str, Any] = {
        "name": pool_name,
        "instance_type": instance_type,
        "capacity_type": capacity_type,
        "min_size": min_size,
        "max_size": max_size,
        "labels": plain,
    }
    if desired_size is not None:
        fields["desired_size"] = desired_size
    if disk_size_gib is not None:
        fields["disk_size_gib"] = disk_size_gib
    if taints is not None:
        fields["taints"] = [dict(t) for t in taints]
    try:
        spec = NodePoolSpec.model_validate(fields)
        pool = _plan_pool(spec, 0, load_hardware_catalog(), Ledger())
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "args"
        raise ComponentInputError(_camel(where), f"{where}: {err['msg']}") from None
    except PlanError as exc:
        where = exc.path.rsplit(".", 1)[-1]
        raise ComponentInputError(_camel(where), f"{where}: {exc}") from None
    args = pool_plan_args(
        pool,
        create=create,
        kubernetes_version=kubernetes_version,
        # The planner's labels (pool, GPU, count) plus the caller's, Outputs included.
        labels={**(labels or {}), **pool.labels},
    )
    if driver_version:
        args["driver_version"] = driver_version
    if cluster_name is not None:
        args["cluster_name"] = cluster_name
    if node_role_arn is not None:
        args["node_role_arn"] = node_role_arn
    if subnet_ids is not None:
        args["subnet_ids"] = subnet_ids
    return args


def pool_plan_args(
    pool: "PoolPlan",
    *,
    create: bool,
    kubernetes_version: str,
    labels: Mapping[str, pulumi.Input[str]] | None = None,
) -> GpuNodePoolArgs:
    """:class:`GpuNodePoolArgs` of a planned pool: instance facts, taints and kubelet
    reservations as the planner resolved them (labels: the planner's unless given)."""
    spec = pool.spec
    return GpuNodePoolArgs(
        create=create,
        pool_name=pool.name,
        instance_type=pool.instance.name,
        ami_type=pool.ami_type,
        kubernetes_version=kubernetes_version,
        capacity_type=spec.capacity_type,
        min_size=spec.min_size,
        max_size=spec.max_size,
        desired_size=spec.desired_size if spec.desired_size is not None else spec.min_size,
        disk_size_gib=spec.disk_size_gib,
        labels=dict(labels) if labels is not None else pool.labels,
        taints=[TaintArgs(key=t.key, value=t.value, effect=t.effect) for t in spec.taints],
        provisioner=spec.provisioner,
        kubelet=KubeletArgs(
            max_pods=pool.max_pods,
            system_reserved=pool.system_reserved,
            kube_reserved=pool.kube_reserved,
            eviction_hard=pool.eviction_hard,
        ),
        gpu_product=pool.gfd_product,
        gpu_count=pool.instance.gpu_count,
        vcpu=pool.instance.vcpu,
        memory_mib=pool.instance.memory_mib,
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)
