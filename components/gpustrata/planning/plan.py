"""The planner: every number the stack does not state, derived from the ones it does.

Pure functions over a :class:`~gpustrata.spec.StackSpec` and the catalogues; no
Pulumi import. Each derived value is recorded in a :class:`Ledger` with its source
so that ``gpustrata plan`` can show the working.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpustrata.catalog.hardware import GpuModel, HardwareCatalog, InstanceType
from gpustrata.planning.provenance import Derived, Ledger
from gpustrata.spec.models import ModelSpec, NodePoolSpec, StackSpec

NODEADM_SOURCE = "awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go"
POOL_LABEL = "gpustrata.io/pool"

# Until the capacity planner estimates load time from the weights, the startup window is
# a fixed budget: generous enough for a 70B model streamed from S3 at ~1 GB/s plus init.
DEFAULT_STARTUP_BUDGET_S = 1800
STARTUP_PERIOD_S = 10
LIVENESS_PERIOD_S = 10
LIVENESS_FAILURES = 3
PROBE_TIMEOUT_S = 5
READINESS_PERIOD_S = 5


@dataclass(frozen=True)
class PoolPlan:
    """A node pool with its instance facts and kubelet settings resolved."""

    spec: NodePoolSpec
    instance: InstanceType
    gpu: GpuModel
    max_pods: int
    kube_reserved: dict[str, str]
    system_reserved: dict[str, str]
    eviction_hard: dict[str, str]
    labels: dict[str, str]

    @property
    def name(self) -> str:
        """The pool name."""
        return self.spec.name

    @property
    def gfd_product(self) -> str:
        """The ``nvidia.com/gpu.product`` label GPU Feature Discovery sets on these nodes."""
        return self.gpu.gfd_products[0] if self.gpu.gfd_products else self.gpu.id


@dataclass(frozen=True)
class RayLayout:
    """How one model's engines map onto a KubeRay worker group."""

    gpus_per_worker: int
    workers_per_replica: int
    min_workers: int
    max_workers: int
    placement_strategy: str
    bundles: list[dict[str, float]]


@dataclass(frozen=True)
class Probes:
    """Probe settings for an engine container (seconds and counts)."""

    startup_period_s: int
    startup_failure_threshold: int
    liveness_period_s: int
    liveness_failure_threshold: int
    readiness_period_s: int
    timeout_s: int

    @property
    def startup_window_s(self) -> int:
        """Time the engine gets to come up before the kubelet restarts it."""
        return self.startup_period_s * self.startup_failure_threshold


@dataclass(frozen=True)
class ModelPlan:
    """A served model with its GPU count, replica range, layout and probes resolved."""

    spec: ModelSpec
    pool: PoolPlan
    gpus_per_replica: int
    min_replicas: int
    max_replicas: int
    probes: Probes
    ray: RayLayout | None

    @property
    def name(self) -> str:
        """The model's name in the stack."""
        return self.spec.name

    @property
    def gpus_per_pod(self) -> int:
        """GPUs in one engine Pod's limits (a Ray worker Pod on the Ray path)."""
        return self.ray.gpus_per_worker if self.ray else self.gpus_per_replica


@dataclass(frozen=True)
class StackPlan:
    """The resolved stack: pools, models and the ledger of derived values."""

    spec: StackSpec
    pools: dict[str, PoolPlan]
    models: dict[str, ModelPlan]
    derived: list[Derived] = field(default_factory=list)


class PlanError(ValueError):
    """A stack that validates but cannot be planned (e.g. an unknown instance type)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


def plan_stack(spec: StackSpec, hardware: HardwareCatalog) -> StackPlan:
    """Derive every value the components need; raises :class:`PlanError` on missing facts."""
    ledger = Ledger()
    pools = {p.name: _plan_pool(p, i, hardware, ledger) for i, p in enumerate(spec.node_pools)}
    models = {m.name: _plan_model(m, pools[m.pool], ledger) for m in spec.models}
    return StackPlan(spec=spec, pools=pools, models=models, derived=ledger.items)


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


def _plan_pool(
    pool: NodePoolSpec, index: int, hardware: HardwareCatalog, ledger: Ledger
) -> PoolPlan:
    key = f"pools.{pool.name}"
    instance = hardware.instance(pool.instance_type)
    if instance is None:
        raise PlanError(
            f"gpustrata:stack.node_pools[{index}].instance_type",
            f"'{pool.instance_type}' is not in the hardware catalogue; use a GPU instance "
            "type such as 'g6e.xlarge' or 'p5.48xlarge'",
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

    kubelet = pool.kubelet
    if kubelet.max_pods is not None:
        max_pods = ledger.add(f"{key}.maxPods", kubelet.max_pods, "spec", "set in the stack")
    else:
        max_pods = ledger.add(
            f"{key}.maxPods",
            instance.max_pods,
            "catalogue",
            f"EKS default for {instance.name} (amazon-eks-ami eni-max-pods.txt)",
        )

    kube_reserved = dict(kubelet.kube_reserved)
    if "cpu" not in kube_reserved:
        cpu_m = kube_reserved_cpu_millicores(instance.vcpu)
        kube_reserved["cpu"] = ledger.add(
            f"{key}.kubeReserved.cpu",
            f"{cpu_m}m",
            "formula",
            f"6%/1%/0.5%/0.25% tiers over {instance.vcpu} vCPU ({NODEADM_SOURCE})",
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
    eviction_hard = dict(kubelet.eviction_hard)
    if not eviction_hard:
        eviction_hard = ledger.add(
            f"{key}.evictionHard",
            {"memory.available": "500Mi", "nodefs.available": "10%"},
            "default",
            "gpustrata default; the kubelet's own memory.available<100Mi leaves too little "
            "room for page cache while weights load",
        )
    labels = {
        **pool.labels,
        POOL_LABEL: pool.name,
        "gpustrata.io/gpu": gpu.id,
    }
    return PoolPlan(
        spec=pool,
        instance=instance,
        gpu=gpu,
        max_pods=max_pods,
        kube_reserved=kube_reserved,
        system_reserved=system_reserved,
        eviction_hard=eviction_hard,
        labels=labels,
    )


def _plan_model(model: ModelSpec, pool: PoolPlan, ledger: Ledger) -> ModelPlan:
    key = f"models.{model.name}"
    engine = model.engine
    gpus = ledger.add(
        f"{key}.gpusPerReplica",
        engine.gpus_per_engine,
        "formula",
        f"tensor_parallel_size {engine.tensor_parallel_size} x pipeline_parallel_size "
        f"{engine.pipeline_parallel_size}",
    )
    auto = model.autoscaling
    if auto.kind != "none" or auto.max_replicas > auto.min_replicas:
        min_replicas, max_replicas = auto.min_replicas, auto.max_replicas
        why = "autoscaling.min_replicas / max_replicas"
    else:
        min_replicas = max_replicas = model.replicas
        why = "replicas (no autoscaling)"
    ledger.add(f"{key}.replicas", f"{min_replicas}..{max_replicas}", "spec", why)

    failures = math.ceil(DEFAULT_STARTUP_BUDGET_S / STARTUP_PERIOD_S)
    probes = Probes(
        startup_period_s=STARTUP_PERIOD_S,
        startup_failure_threshold=failures,
        liveness_period_s=LIVENESS_PERIOD_S,
        liveness_failure_threshold=LIVENESS_FAILURES,
        readiness_period_s=READINESS_PERIOD_S,
        timeout_s=PROBE_TIMEOUT_S,
    )
    ledger.add(
        f"{key}.startupProbe.failureThreshold",
        failures,
        "default",
        f"{DEFAULT_STARTUP_BUDGET_S} s startup budget / periodSeconds {STARTUP_PERIOD_S} "
        "(fixed budget; no load-time estimate for this model yet)",
    )

    ray = None
    if model.runtime == "rayservice":
        ray = _ray_layout(model, pool, gpus, min_replicas, max_replicas, ledger)
    return ModelPlan(
        spec=model,
        pool=pool,
        gpus_per_replica=gpus,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        probes=probes,
        ray=ray,
    )


def _ray_layout(
    model: ModelSpec,
    pool: PoolPlan,
    gpus_per_replica: int,
    min_replicas: int,
    max_replicas: int,
    ledger: Ledger,
) -> RayLayout:
    key = f"models.{model.name}.ray"
    node_gpus = pool.instance.gpu_count
    if gpus_per_replica <= node_gpus:
        # One engine per worker Pod: the placement group packs onto that Pod's GPUs.
        gpus_per_worker = gpus_per_replica
        workers_per_replica = 1
        strategy = "STRICT_PACK"
        why = f"TP x PP = {gpus_per_replica} fits one {pool.instance.name} ({node_gpus} GPUs)"
    else:
        gpus_per_worker = node_gpus
        workers_per_replica = math.ceil(gpus_per_replica / node_gpus)
        strategy = "PACK"
        why = (
            f"TP x PP = {gpus_per_replica} spans {workers_per_replica} {pool.instance.name} "
            f"nodes of {node_gpus} GPUs"
        )
    ledger.add(f"{key}.gpusPerWorker", gpus_per_worker, "formula", why)
    ledger.add(f"{key}.placementStrategy", strategy, "formula", why)
    min_workers = ledger.add(
        f"{key}.minReplicas",
        min_replicas * workers_per_replica,
        "formula",
        f"min engine replicas {min_replicas} x workers per replica {workers_per_replica}",
    )
    max_workers = ledger.add(
        f"{key}.maxReplicas",
        max_replicas * workers_per_replica,
        "formula",
        f"max engine replicas {max_replicas} x workers per replica {workers_per_replica}",
    )
    bundles = [{"GPU": 1.0} for _ in range(gpus_per_replica)]
    return RayLayout(
        gpus_per_worker=gpus_per_worker,
        workers_per_replica=workers_per_replica,
        min_workers=min_workers,
        max_workers=max_workers,
        placement_strategy=strategy,
        bundles=bundles,
    )
