"""Inputs of the workload components, as plain typed dicts.

These TypedDicts are the ``args`` of the Pulumi components and the input of the pure
renderers, so a Pulumi program, ``gpustrata render`` and the component provider host
(other Pulumi languages) all describe a workload the same way. No unions, no
Literals: Pulumi's component analyzer reads these annotations.

Names and namespaces are :data:`StrInput`: ``pulumi.Input[str]`` to a type checker (a
program may pass an ``Output``; the components resolve it), plain ``str`` at run time,
so this module imports no Pulumi and the analyzer still sees a string.
"""

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    import pulumi

    StrInput = pulumi.Input[str]
else:
    StrInput = str


class TolerationArgs(TypedDict):
    """A Kubernetes toleration."""

    key: str
    """Taint key to tolerate."""
    operator: str
    """'Equal' or 'Exists'."""
    value: str
    """Taint value ('' with Exists)."""
    effect: str
    """Taint effect in Kubernetes spelling ('' tolerates every effect)."""


class SecretRefArgs(TypedDict):
    """A key of a Kubernetes Secret."""

    name: str
    """Secret name."""
    key: str
    """Key inside the Secret."""


class ProbeArgs(TypedDict):
    """Probe timing for an engine container."""

    startup_period_s: int
    """startupProbe periodSeconds."""
    startup_failure_threshold: int
    """startupProbe failureThreshold (window = period x threshold)."""
    liveness_period_s: int
    """livenessProbe periodSeconds."""
    liveness_failure_threshold: int
    """livenessProbe failureThreshold."""
    readiness_period_s: int
    """readinessProbe periodSeconds."""
    timeout_s: int
    """timeoutSeconds of every probe."""


class WeightsArgs(TypedDict):
    """Where weights come from and where they are cached."""

    source: str
    """huggingface, s3, pvc or local-nvme."""
    uri: NotRequired[str]
    """s3:// URI or a path (source-specific)."""
    pvc_name: NotRequired[str]
    """Existing PersistentVolumeClaim with the weights or the cache."""


class AutoscalingArgs(TypedDict):
    """Replica autoscaling of one workload (one autoscaler)."""

    kind: str
    """none, hpa or keda."""
    min_replicas: int
    """Minimum replicas."""
    max_replicas: int
    """Maximum replicas."""
    target_waiting_requests: int
    """Scale out above this many vllm:num_requests_waiting per replica."""
    prometheus_url: NotRequired[str]
    """Prometheus KEDA queries (the stack's monitoring)."""


class MultiNodeArgs(TypedDict):
    """One engine across the Pods of a LeaderWorkerSet group (TP within a node, PP across)."""

    nodes: int
    """Pods per group (LeaderWorkerSet ``size``), one per node: pipeline_parallel_size."""
    executor: str
    """vLLM --distributed-executor-backend: ``ray`` (a Ray head on the leader, the workers
    join it) or ``mp`` (``--nnodes``/``--node-rank``/``--master-addr``, workers headless)."""
    efa_interfaces: int
    """Elastic Fabric Adapter interfaces each Pod requests (0: none)."""
    efa_resource: str
    """The EFA device plugin's resource name (``vpc.amazonaws.com/efa``)."""
    efa_env: dict[str, str]
    """Libfabric settings for NCCL over EFA (set when ``efa_interfaces`` > 0)."""
    efa_capabilities: list[str]
    """Container capabilities RDMA needs (added when ``efa_interfaces`` > 0)."""


class VllmDeploymentArgs(TypedDict):
    """A plain `vllm serve` Deployment and what goes with it."""

    name: StrInput
    """Workload name (Deployment, Service, PDB, autoscaler)."""
    namespace: StrInput
    """Namespace."""
    model: str
    """Model id or path passed to `vllm serve`."""
    served_model_name: str
    """Name clients use in the OpenAI API."""
    image: str
    """vLLM image, pinned."""
    replicas: int
    """Replicas (the autoscaler's minimum when autoscaling)."""
    gpus: int
    """GPUs per Pod: tensor_parallel_size x pipeline_parallel_size."""
    gpu_claim: NotRequired[bool]
    """True: the GPUs come from a DRA ResourceClaimTemplate of ``gpus`` devices (pool
    ``gpu_allocation: dra``), not from ``nvidia.com/gpu`` limits."""
    cpu: str
    """CPU request."""
    memory: str
    """Memory request and limit."""
    shm_size: str
    """Memory-backed /dev/shm size."""
    ephemeral_storage: str
    """Ephemeral-storage request and limit (weights downloaded to the Pod)."""
    engine_args: dict[str, Any]
    """vLLM engine arguments by EngineArgs name, rendered as flags."""
    node_selector: dict[str, str]
    """Node selector of the GPU pool."""
    tolerations: list[TolerationArgs]
    """Tolerations for the pool's taints."""
    probes: ProbeArgs
    """Probe timing."""
    autoscaling: AutoscalingArgs
    """Autoscaling."""
    weights: WeightsArgs
    """Weight source."""
    service_monitor: bool
    """Create a Prometheus Operator ServiceMonitor for vLLM's /metrics."""
    hf_token: NotRequired[SecretRefArgs]
    """Secret with the Hugging Face token."""
    startup_estimate_s: NotRequired[int]
    """Planner's engine startup estimate (load + init), annotated for the rules."""
    service_account: NotRequired[str]
    """ServiceAccount of the engine Pods (the one bound to a cloud identity that reads
    object-store weights); unset: the namespace's default."""
    multi_node: NotRequired[MultiNodeArgs]
    """Serve each engine from a LeaderWorkerSet group across nodes instead of a Deployment
    (``gpus`` is then the GPUs of one Pod, one node's)."""


class RayLlmModelArgs(TypedDict):
    """One Ray Serve LLM `llm_config`."""

    model_id: str
    """Name clients use (model_loading_config.model_id)."""
    model_source: str
    """Hugging Face id, s3:// URI or path the weights load from."""
    engine_kwargs: dict[str, Any]
    """vLLM engine arguments."""
    min_replicas: int
    """Serve autoscaling min_replicas."""
    max_replicas: int
    """Serve autoscaling max_replicas."""
    target_ongoing_requests: int
    """Serve autoscaling target_ongoing_requests."""
    placement_strategy: str
    """Placement group strategy (STRICT_PACK, PACK, SPREAD)."""
    bundles: list[dict[str, float]]
    """Placement group bundles, one per GPU of the engine."""
    accelerator_type: NotRequired[str]
    """Ray accelerator type (e.g. H100) to pin engines to a GPU model."""
    health_check_period_s: int
    """Serve deployment health_check_period_s of the engine replicas."""
    health_check_timeout_s: int
    """Serve deployment health_check_timeout_s of the engine replicas."""
    engine_start_timeout_s: int
    """RAYLLM_ENGINE_START_TIMEOUT_S: seconds Ray Serve LLM waits for the engine to start."""


class RayWorkerGroupArgs(TypedDict):
    """A KubeRay worker group on one GPU pool."""

    group_name: str
    """workerGroupSpecs[].groupName."""
    replicas: int
    """Initial worker Pods."""
    min_replicas: int
    """Minimum worker Pods."""
    max_replicas: int
    """Maximum worker Pods."""
    gpus: int
    """GPUs per worker Pod (also rayStartParams num-gpus)."""
    gpu_claim: NotRequired[bool]
    """True: the worker's GPUs come from a DRA ResourceClaimTemplate of ``gpus`` devices."""
    cpu: str
    """CPU request and limit."""
    memory: str
    """Memory request and limit."""
    shm_size: str
    """Memory-backed /dev/shm size."""
    ephemeral_storage: str
    """Ephemeral-storage request and limit (weights are downloaded to the worker)."""
    node_selector: dict[str, str]
    """Node selector of the GPU pool."""
    tolerations: list[TolerationArgs]
    """Tolerations for the pool's taints."""


class RayLlmServiceArgs(TypedDict):
    """A RayService running Ray Serve LLM (`ray.serve.llm:build_openai_app`)."""

    name: StrInput
    """RayService name."""
    namespace: StrInput
    """Namespace."""
    image: str
    """Ray image with vLLM (rayproject/ray-llm), pinned."""
    ray_version: str
    """rayVersion; must match the image."""
    models: list[RayLlmModelArgs]
    """The LLM configs served by this application."""
    worker_groups: list[RayWorkerGroupArgs]
    """GPU worker groups."""
    head_cpu: str
    """Head Pod CPU."""
    head_memory: str
    """Head Pod memory."""
    probes: ProbeArgs
    """Timing used for Serve health checks."""
    upgrade_strategy: str
    """RayService upgradeStrategy.type: NewCluster, NewClusterWithIncrementalUpgrade or None."""
    startup_estimate_s: NotRequired[int]
    """Planner's engine startup estimate (load + init), annotated for the rules."""
    weights: NotRequired[WeightsArgs]
    """Weight source (a PVC is mounted on the workers as the model cache)."""
    hf_token: NotRequired[SecretRefArgs]
    """Secret with the Hugging Face token."""
    head_node_selector: NotRequired[dict[str, str]]
    """Node selector of the head Pod (the untainted system pool in create mode)."""
    service_account: NotRequired[str]
    """ServiceAccount of the head and worker Pods (bound to the identity that reads
    object-store weights); unset: the namespace's default."""
