"""Node-pool planning: each pool's instance facts, kubelet reservations and eviction
thresholds, AMI type and allowed instance types, and the Karpenter controller's release.

Pure functions over a :class:`~gpustrata.spec.StackSpec` and the catalogues; no Pulumi
import. Each derived value is recorded in a :class:`~gpustrata.planning.provenance.Ledger`.
"""

from __future__ import annotations

from gpustrata.catalog.charts import dra_node_labels
from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.hardware import HardwareCatalog, InstanceType
from gpustrata.core.contract import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    GPU_COUNT_LABEL,
    GPU_LABEL,
    POOL_LABEL,
)
from gpustrata.planning.plan_types import KarpenterPlan, PlanError, PoolPlan
from gpustrata.planning.provenance import Ledger, Source
from gpustrata.planning.serving import (
    pool_cost_per_hour,
)
from gpustrata.spec.cluster import KarpenterPoolSpec, NodePoolSpec
from gpustrata.spec.stack import StackSpec

NODEADM_SOURCE = "awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go"

KARPENTER_MAX_REPLICAS = 2
"""The chart's default replica count (aws/karpenter-provider-aws charts/karpenter/values.yaml)."""


def _plan_karpenter(spec: StackSpec, ledger: Ledger) -> KarpenterPlan | None:
    """The controller release and replicas, or None when no pool uses Karpenter."""
    indices = [i for i, p in enumerate(spec.node_pools) if p.provisioner == "karpenter"]
    if not indices:
        return None
    where = f"gpustrata:stack.node_pools[{indices[0]}].provisioner"
    if spec.cluster.mode != "create":
        raise PlanError(
            where,
            "karpenter pools are created with the EKS cluster (its IAM roles, interruption "
            "queue and controller); with cluster.mode existing use managed-node-group or "
            "describe the pool without provisioner",
        )
    compat = load_compat_catalog()
    wanted = spec.karpenter.chart_version
    if wanted is None:
        release = compat.karpenter_releases()[0]
        why = f"newest catalogued release ({release.sources[0]})"
        source: Source = "catalogue"
    else:
        found = compat.karpenter(wanted)
        if found is None:
            known = ", ".join(r.version for r in compat.karpenter_releases())
            raise PlanError(
                "gpustrata:stack.karpenter.chart_version",
                f"'{wanted}' is not a catalogued Karpenter release (its CRDs' API shapes the "
                f"NodePool gpustrata renders); use one of {known} or add it to "
                "compat-karpenter.yaml with its source",
            )
        release, why, source = found, "set in the stack", "spec"
    ledger.add("karpenter.chartVersion", release.version, source, why)
    kubernetes = spec.cluster.kubernetes_version
    if not release.kubernetes.supports(kubernetes):
        raise PlanError(
            "gpustrata:stack.karpenter.chart_version",
            f"Karpenter {release.version} supports Kubernetes {release.kubernetes.min} to "
            f"{release.kubernetes.max}, not {kubernetes} ({release.sources[1]}); pick a "
            "release that lists it",
        )
    # The chart keeps the controller off the nodes it provisions (nodeAffinity
    # karpenter.sh/nodepool DoesNotExist) and one replica per node (podAntiAffinity on
    # kubernetes.io/hostname): it runs on the system pool's standing nodes, never on a GPU
    # node (a spot GPU node's interruption would take the controller with it).
    standing = spec.cluster.system_pool.min_size
    replicas = ledger.add(
        "karpenter.replicas",
        min(KARPENTER_MAX_REPLICAS, standing),
        "formula",
        f"min(chart default {KARPENTER_MAX_REPLICAS}, {standing} standing system-pool "
        "nodes (cluster.system_pool.min_size)): one replica per node, never on Karpenter's "
        "own nodes",
    )
    return KarpenterPlan(release=release, replicas=replicas)


def kube_reserved_cpu_millicores(vcpu: int) -> int:
    """EKS kubeReserved CPU: 6% of the first core, 1% of the second, 0.5% of cores 3-4,
    0.25% above 4 (``getCPUMillicoresToReserve`` in amazon-eks-ami nodeadm)."""
    total = vcpu * 1000
    ranges = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)]
    reserved = 0
    for start, end, per_10k in ranges:
        if total > start:
            reserved += (min(total, end) - start) * per_10k // 10000
    return reserved


def kube_reserved_memory_mib(max_pods: int) -> int:
    """EKS kubeReserved memory: 11 MiB x maxPods + 255 MiB (amazon-eks-ami nodeadm)."""
    return 11 * max_pods + 255


def nearest_instance_hint(name: str, hardware: HardwareCatalog) -> str:
    """The fix for an unknown EKS instance type: catalogued AWS GPU types of its family or
    of the family closest in name, else the GPU families the catalogue knows."""
    near = hardware.related_instances(name, aws=True)
    if near:
        return "did you mean " + " or ".join(repr(n) for n in near) + "?"
    families = ", ".join(hardware.instance_families(aws=True))
    return (
        f"its family is none of the catalogued AWS GPU families ({families}); use one of "
        "their types (docs/reference/catalogue.md), or add it under catalog.instances"
    )


def _plan_pool(
    pool: NodePoolSpec,
    index: int,
    hardware: HardwareCatalog,
    ledger: Ledger,
    *,
    create: bool = True,
) -> PoolPlan:
    """A pool's instance facts, kubelet settings and labels; *create*: gpustrata creates
    its nodes (else they exist, and only labels the user states describe them)."""
    key = f"pools.{pool.name}"
    instance = hardware.instance(pool.instance_type)
    if instance is None:
        raise PlanError(
            f"gpustrata:stack.node_pools[{index}].instance_type",
            f"'{pool.instance_type}' is not in the hardware catalogue; "
            + nearest_instance_hint(pool.instance_type, hardware),
        )
    if instance.max_pods is None or instance.eks_ami_type is None:
        raise PlanError(
            f"gpustrata:stack.node_pools[{index}].instance_type",
            f"'{pool.instance_type}' is a {instance.provider} machine type; gpustrata plans EKS "
            "node groups, so use an AWS instance type such as 'g6e.xlarge' or 'p5.48xlarge' "
            "(the catalogue's GKE and AKS types serve `gpustrata check` and `capacity`)",
        )
    gpu = hardware.gpu(instance.gpu)
    if gpu is None:  # the catalogue guarantees this; kept for user-extended catalogues
        raise PlanError(
            f"gpustrata:stack.node_pools[{index}].instance_type",
            f"'{pool.instance_type}' names GPU '{instance.gpu}', which the catalogue lacks",
        )
    src = f"hardware catalogue entry {instance.name}"
    ledger.add(f"{key}.gpu", gpu.id, "catalogue", f"{instance.gpu_count} x {gpu.name} ({src})")
    ledger.add(f"{key}.gpuCount", instance.gpu_count, "catalogue", src)
    ledger.add(f"{key}.vcpu", instance.vcpu, "catalogue", src)
    ledger.add(f"{key}.memoryMiB", instance.memory_mib, "catalogue", src)

    types = _allowed_types(pool, index, hardware, instance, ledger)
    kubelet = pool.kubelet
    if kubelet.max_pods is not None:
        max_pods = ledger.add(f"{key}.maxPods", kubelet.max_pods, "spec", "set in the stack")
    elif len(types) == 1:
        max_pods = ledger.add(
            f"{key}.maxPods",
            instance.max_pods,
            "catalogue",
            f"EKS default for {instance.name} (amazon-eks-ami eni-max-pods.txt)",
        )
    else:  # one EC2NodeClass maxPods for every type: the lowest ENI limit holds on each
        max_pods = ledger.add(
            f"{key}.maxPods",
            min(t.max_pods or 0 for t in types),
            "catalogue",
            "lowest EKS default of the allowed types ("
            + ", ".join(f"{t.name} {t.max_pods}" for t in types)
            + "; amazon-eks-ami eni-max-pods.txt): holds on each",
        )

    kube_reserved = dict(kubelet.kube_reserved)
    if "cpu" not in kube_reserved:
        widest = max(types, key=lambda t: t.vcpu)
        cpu_m = kube_reserved_cpu_millicores(widest.vcpu)
        others = (
            f"; the most of {', '.join(f'{t.name} {t.vcpu}' for t in types)} vCPU, so "
            "enough on each type"
            if len(types) > 1
            else ""
        )
        kube_reserved["cpu"] = ledger.add(
            f"{key}.kubeReserved.cpu",
            f"{cpu_m}m",
            "formula",
            f"6%/1%/0.5%/0.25% tiers over {widest.vcpu} vCPU ({NODEADM_SOURCE}){others}",
        )
    if "memory" not in kube_reserved:
        mem = kube_reserved_memory_mib(max_pods)
        kube_reserved["memory"] = ledger.add(
            f"{key}.kubeReserved.memory",
            f"{mem}Mi",
            "formula",
            f"11 MiB x maxPods {max_pods} + 255 MiB ({NODEADM_SOURCE})",
        )

    system_reserved = dict(kubelet.system_reserved)
    if not system_reserved:
        system_reserved = ledger.add(
            f"{key}.systemReserved",
            {"cpu": "500m", "memory": "1Gi"},
            "default",
            "gpustrata default: systemd, containerd and the NVIDIA host daemons "
            "(nvidia-persistenced, fabric manager) run outside Pods; EKS reserves none",
        )
    stated = dict(kubelet.eviction_hard)
    # Setting any hard threshold zeroes the kubelet's other defaults, so the ones not
    # stated are written out (KUBELET_EVICTION_SOURCE).
    kept = ", ".join(f"{k}<{v}" for k, v in KUBELET_EVICTION_DEFAULTS.items() if k not in stated)
    if stated:
        eviction_hard = ledger.add(
            f"{key}.evictionHard",
            {**KUBELET_EVICTION_DEFAULTS, **stated},
            "spec",
            f"kubelet.eviction_hard in the stack, plus the kubelet defaults it would zero "
            f"({kept}; {KUBELET_EVICTION_SOURCE})",
        )
    else:
        eviction_hard = ledger.add(
            f"{key}.evictionHard",
            {**KUBELET_EVICTION_DEFAULTS, "memory.available": "500Mi"},
            "default",
            "gpustrata default memory.available<500Mi: the kubelet's own 100Mi leaves too "
            f"little room for page cache while weights load; the other kubelet defaults "
            f"written out, since setting one threshold zeroes the rest "
            f"({KUBELET_EVICTION_SOURCE})",
        )
    labels = {
        **pool.labels,
        POOL_LABEL: pool.name,
        GPU_LABEL: gpu.id,
        GPU_COUNT_LABEL: str(instance.gpu_count),
        # Existing nodes carry only the labels they have: an unstated device-plugin label
        # is left for O008 to ask for, not assumed.
        **(dra_pool_labels(pool) if create else {}),
    }
    if create and _ami_type(pool, instance).startswith("BOTTLEROCKET"):
        # Bottlerocket's NVIDIA variants run the device plugin as a host service; a second
        # one from the GPU Operator conflicts (bottlerocket-os/bottlerocket#4309).
        labels[DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
    cost = pool_cost_per_hour(instance, pool.min_size, pool.max_size)
    if cost is not None:
        ledger.add(f"{key}.costPerHour", round(cost.value, 2), "catalogue", cost.explanation)
    return PoolPlan(
        spec=pool,
        instance=instance,
        gpu=gpu,
        max_pods=max_pods,
        ami_type=_ami_type(pool, instance),
        kube_reserved=kube_reserved,
        system_reserved=system_reserved,
        eviction_hard=eviction_hard,
        labels=labels,
        instance_types=tuple(t.name for t in types),
        cost_per_hour=cost,
    )


KUBELET_EVICTION_DEFAULTS = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "imagefs.available": "15%",
    "nodefs.inodesFree": "5%",
    "imagefs.inodesFree": "5%",
}
"""The kubelet's default hard eviction thresholds on Linux nodes."""
KUBELET_EVICTION_SOURCE = (
    "https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/"
    "#hard-eviction-thresholds (the defaults apply only when no threshold is set; setting "
    "one sets the others to zero)"
)

# Karpenter's EC2NodeClass kubelet.evictionHard accepts fewer signals than the kubelet
# (aws/karpenter-provider-aws@v1.14.1 pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml).
KARPENTER_EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)


def _ami_type(pool: NodePoolSpec, instance: InstanceType) -> str:
    """The EKS amiType of the pool's node image (a Karpenter alias names the family; the
    NVIDIA variant of AL2023 or Bottlerocket is what Karpenter picks for GPU types)."""
    assert instance.eks_ami_type is not None  # _plan_pool checked it
    family = pool.karpenter.ami_alias.split("@")[0] if pool.karpenter else "al2023"
    if pool.provisioner == "karpenter" and family == "bottlerocket":
        return (
            "BOTTLEROCKET_x86_64_NVIDIA"
            if instance.arch == "x86_64"
            else "BOTTLEROCKET_ARM_64_NVIDIA"
        )
    return instance.eks_ami_type


def _allowed_types(
    pool: NodePoolSpec,
    index: int,
    hardware: HardwareCatalog,
    instance: InstanceType,
    ledger: Ledger,
) -> list[InstanceType]:
    """The instance types the pool may launch: ``instance_type``, plus a Karpenter pool's
    ``karpenter.instance_types``, each with the same GPUs and at least its vCPU and memory
    (so every per-node number the plan derives from ``instance_type`` holds on each)."""
    if pool.provisioner != "karpenter":
        return [instance]
    where = f"gpustrata:stack.node_pools[{index}]"
    extra = pool.karpenter.instance_types if pool.karpenter else []
    bad = next((k for k in pool.kubelet.eviction_hard if k not in KARPENTER_EVICTION_SIGNALS), None)
    if bad is not None:
        raise PlanError(
            f"{where}.kubelet.eviction_hard",
            f"'{bad}' is not an eviction signal Karpenter's EC2NodeClass accepts; use one of "
            f"{', '.join(KARPENTER_EVICTION_SIGNALS)}",
        )
    types = [instance]
    for j, name in enumerate(extra):
        other = hardware.instance(name)
        path = f"{where}.karpenter.instance_types[{j}]"
        if other is None or other.max_pods is None:
            raise PlanError(
                path, f"'{name}' is not an AWS GPU instance type in the hardware catalogue"
            )
        if name in (t.name for t in types):
            raise PlanError(path, f"'{name}' is listed twice (instance_type counts once)")
        if (other.gpu, other.gpu_count) != (instance.gpu, instance.gpu_count):
            raise PlanError(
                path,
                f"'{name}' has {other.gpu_count} x {other.gpu}, '{instance.name}' "
                f"{instance.gpu_count} x {instance.gpu}; a pool's types share their GPUs "
                "(engine layouts and labels assume them): use another pool",
            )
        if other.vcpu < instance.vcpu or other.memory_mib < instance.memory_mib:
            raise PlanError(
                path,
                f"'{name}' ({other.vcpu} vCPU, {other.memory_mib} MiB) is smaller than "
                f"instance_type '{instance.name}' ({instance.vcpu} vCPU, "
                f"{instance.memory_mib} MiB), which Pod sizes assume; make the smallest "
                "type instance_type",
            )
        types.append(other)
    ledger.add(
        f"pools.{pool.name}.assumedInstanceType",
        instance.name,
        "spec",
        "instance_type: the smallest the NodePool may launch ("
        + ", ".join(t.name for t in types)
        + "; same GPUs), so per-node vCPU and memory hold on each",
    )
    key = f"pools.{pool.name}.nodePool"
    ledger.add(
        f"{key}.limits.nvidia.com/gpu",
        pool.max_size * instance.gpu_count,
        "formula",
        f"max_size {pool.max_size} x {instance.gpu_count} GPUs per node (Karpenter keeps no "
        "standing nodes: it launches them for pending Pods, up to this limit)",
    )
    settings = pool.karpenter or KarpenterPoolSpec()
    after = settings.consolidate_after
    ledger.add(
        f"{key}.disruption",
        f"WhenEmpty after {after}, one node at a time, expireAfter Never",
        "spec" if "consolidate_after" in settings.model_fields_set else "default",
        "gpustrata default: a node with an engine Pod (serving or still loading weights) is "
        "never consolidated or expired; only an empty node goes, after karpenter."
        "consolidate_after, so a restarted engine finds its node and cached image",
    )
    return types


def dra_pool_labels(pool: NodePoolSpec) -> dict[str, str]:
    """Labels a DRA pool's nodes carry: the GPU Operator's device plugin kept off them, so
    only the DRA driver advertises their GPUs (rule O008), and its validator too, which
    would otherwise wait forever for ``nvidia.com/gpu`` capacity (the chart catalogue's
    cited ``dra_node`` fact)."""
    if pool.gpu_allocation != "dra":
        return {}
    return {DEVICE_PLUGIN_DEPLOY_LABEL: "false", **dra_node_labels()}
