"""What a plan is: the node pools, models, probes and Ray layout that
:func:`~gpustrata.planning.plan.plan_stack` derives, and the :class:`PlanError` it raises."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpustrata.catalog.compat import KarpenterRelease
from gpustrata.catalog.hardware import GpuModel, InstanceType
from gpustrata.catalog.model_sources import ModelSources
from gpustrata.planning.multinode import MultiNodePlan
from gpustrata.planning.provenance import Derived
from gpustrata.planning.serving import (
    ServingAtSettings,
)
from gpustrata.spec.cluster import NodePoolSpec
from gpustrata.spec.serving import ModelSpec
from gpustrata.spec.stack import StackSpec
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.terms import Term


@dataclass(frozen=True)
class PoolPlan:
    """A node pool with its instance facts and kubelet settings resolved."""

    spec: NodePoolSpec
    instance: InstanceType
    gpu: GpuModel
    max_pods: int
    ami_type: str
    """The EKS managed node group amiType of the instance's NVIDIA AL2023 AMI."""
    kube_reserved: dict[str, str]
    system_reserved: dict[str, str]
    eviction_hard: dict[str, str]
    labels: dict[str, str]
    instance_types: tuple[str, ...] = ()
    """Every instance type the pool may launch (a Karpenter NodePool may allow several;
    ``instance`` is the one the per-node numbers assume, the smallest of them)."""
    cost_per_hour: Term | None = None
    """USD per hour at max_size nodes (the explanation gives min..max), from the instance's
    catalogue price; None without a price."""

    @property
    def name(self) -> str:
        """The pool name."""
        return self.spec.name

    @property
    def max_gpus(self) -> int:
        """GPUs of the pool at its maximum size (a Karpenter NodePool's GPU limit)."""
        return self.spec.max_size * self.instance.gpu_count

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
    accelerator_type: str | None = None
    """Ray accelerator type of the pool's GPU (Ray Serve LLM ``accelerator_type``)."""
    upgrade_strategy: str = "NewCluster"
    """RayService ``upgradeStrategy.type``: NewCluster when the pool holds two clusters."""
    engine_start_timeout_s: int = 3600
    """``RAYLLM_ENGINE_START_TIMEOUT_S``: how long Ray Serve LLM waits for an engine."""
    health_check_period_s: int = 10
    """Serve ``health_check_period_s`` of the engine replicas (the liveness period)."""
    health_check_timeout_s: int = 10
    """Serve ``health_check_timeout_s`` of the engine replicas (the probe timeout)."""


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
    capacity: CapacityEstimate | None = None
    """Weights per GPU, KV-cache capacity, startup and longest-step estimates for this
    model on its pool's GPU (``capacity.startup.budget_s`` sizes the startup probe;
    ``capacity.longest_step.seconds`` is the longest engine step). None when the
    architecture is unknown or the settings cannot be estimated: see
    ``capacity_unavailable``."""
    capacity_unavailable: str | None = None
    """Why ``capacity`` is None (e.g. the model is not in the catalogue)."""
    serving: ServingAtSettings | None = None
    """Predicted TPOT, TTFT and throughput of one replica serving its share of the model's
    ``workload`` (the reference workload when the stack states none) at the largest replica
    count; None without a capacity estimate or when vLLM would not start."""
    cpu: str = "1"
    """CPU request of an engine Pod: the stack's ``cpu``, else derived from the pool."""
    memory: str = "1Gi"
    """Memory request and limit of an engine Pod: the stack's ``memory``, else derived."""
    route_timeout: str | None = None
    """HTTPRoute ``timeouts.request`` of a model behind the inference gateway (a Gateway
    API duration, derived from its longest generation: :mod:`gpustrata.planning.routing`);
    None for Service routing."""
    multi_node: MultiNodePlan | None = None
    """The engine's layout across nodes (a LeaderWorkerSet group); None: one Pod per engine.
    When set, ``spec`` carries the resolved TP, PP and ``multi_node.nodes``."""

    @property
    def name(self) -> str:
        """The model's name in the stack."""
        return self.spec.name

    @property
    def gpus_per_pod(self) -> int:
        """GPUs in one engine Pod's limits (a Ray worker Pod on the Ray path, one node's
        GPUs on a multi-node engine)."""
        if self.multi_node is not None:
            return self.multi_node.tensor_parallel_size
        return self.ray.gpus_per_worker if self.ray else self.gpus_per_replica


@dataclass(frozen=True)
class StackPlan:
    """The resolved stack: pools, models and the ledger of derived values."""

    spec: StackSpec
    pools: dict[str, PoolPlan]
    models: dict[str, ModelPlan]
    derived: list[Derived] = field(default_factory=list)
    karpenter: KarpenterPlan | None = None
    """The Karpenter controller, when a pool has provisioner karpenter."""
    sources: ModelSources | None = None
    """Where models' own files were looked for (the rules of ``plan`` look there too)."""


@dataclass(frozen=True)
class KarpenterPlan:
    """The Karpenter controller release and its replica count."""

    release: KarpenterRelease
    replicas: int
    """Controller replicas: one per node it may run on (never on its own nodes), at most 2."""


class PlanError(ValueError):
    """A stack that validates but cannot be planned (e.g. an unknown instance type)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)
