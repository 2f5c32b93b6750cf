"""The serving side of the stack spec: a served model (ModelSpec), its vLLM engine,
weights, secrets, workload, autoscaling and multi-node layout."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpustrata.catalog.inputs import GP3_BASELINE_MIBPS, StorageKind, WeightSource
from gpustrata.catalog.vllm_releases import load_vllm_releases, minor_release
from gpustrata.core.vllm_choices import BlockSize, KvCacheDtype, ModelDtype
from gpustrata.spec.fields import (
    FLAG_NAME,
    IMAGE_REF,
    SECRET_FLAG,
    SECRET_PART,
    TOKEN_VALUE,
    Name,
    Quantity,
    SpecModel,
    model_path_problem,
)
from gpustrata.spec.routing import ModelRoutingSpec

_VLLM = load_vllm_releases()
"""The vLLM release catalogue (its reference release's defaults are quoted below)."""

Runtime = Literal["deployment", "rayservice"]
Autoscaler = Literal["none", "hpa", "keda"]


class WeightsSpec(SpecModel):
    """Where the engine loads its weights from (drives the startup estimate)."""

    source: WeightSource = Field(
        default="huggingface", description="Weight source for the startup estimate."
    )
    uri: str | None = Field(
        default=None,
        max_length=2048,
        description="s3:// URI or path on the PVC / NVMe (source-specific).",
    )
    pvc_name: str | None = Field(
        default=None, description="PersistentVolumeClaim holding the weights (source pvc)."
    )
    service_account: Name | None = Field(
        default=None,
        description="ServiceAccount the engines run under to read uri (source s3), bound "
        "to a cloud identity you manage (IRSA, Pod Identity). Empty in create mode: the "
        "stack creates '<model>-weights' with an EKS Pod Identity association to a role "
        "that may only read the uri's prefix.",
    )
    cache_size_gib: int = Field(
        default=0,
        ge=0,
        le=65536,
        description="Size of a model cache volume to create (0: an emptyDir sized by "
        "ephemeral storage).",
    )
    load_gbps: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        examples=[1.0],
        description="Measured weight load bandwidth in GB/s (10^9 bytes/s) from this source "
        "into the engine, for the startup estimate. Empty: the median fitted on published "
        "vLLM startup logs of the source (huggingface: a cold Hub download; s3: the Run:ai "
        "Model Streamer; local-nvme), or gpustrata's cited 0.3 for pvc; shown with its "
        "source by `plan` and `capacity`.",
    )

    storage: StorageKind | None = Field(
        default=None,
        description="What vLLM's loader reads the weights from, for the startup estimate: "
        "local-disk (instance NVMe or the node's own disk), ebs (an EBS volume), "
        "network-volume (EFS, NFS, FSx). Each has a load bandwidth fitted on published vLLM "
        "startup logs. Empty: local-disk for source local-nvme, ebs for a pvc with "
        "cache_size_gib (the stack's gp3 volume), else not stated (plan shows a range).",
    )
    volume_throughput_mibps: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="The volume's provisioned read throughput in MiB/s (gp3: 125 to 1,000; "
        "io2: up to 4,000), which caps the load. Empty with the stack's own gp3 cache "
        "volume: gp3's baseline 125 MiB/s.",
    )

    def storage_facts(self) -> tuple[str | None, float | None]:
        """(storage kind, read cap in GB/s) the startup estimate uses: as stated, else
        derived from the source (:attr:`storage`)."""
        kind = self.storage
        mibps = self.volume_throughput_mibps
        if kind is None and self.source == "local-nvme":
            kind = "local-disk"
        if kind is None and self.source == "pvc" and self.cache_size_gib > 0:
            kind = "ebs"
            mibps = mibps or GP3_BASELINE_MIBPS
        return kind, (mibps * (1 << 20) / 1e9 if mibps else None)

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is None:
            return value
        # userinfo (s3://KEY:SECRET@bucket) is refused for every string (SpecModel)
        scheme, sep, rest = value.partition("://")
        if sep and not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            raise ValueError(f"{value[:60]!r} has no valid scheme; use s3://bucket/key")
        if any(c.isspace() for c in value) or ".." in (rest if sep else value).split("/"):
            raise ValueError(
                f"{value[:60]!r} contains whitespace or a '..' segment; use s3://bucket/key "
                "or a path on the volume without '..'"
            )
        return value


class SecretRef(SpecModel):
    """A reference to a key of a Kubernetes Secret: no secret value lives in the stack."""

    name: Name = Field(description="Secret name.")
    key: str = Field(default="token", min_length=1, description="Key inside the Secret.")
    existing: bool = Field(
        default=False,
        description="The Secret is created outside the stack (kubectl, External Secrets) "
        "before the model starts. False: the stack creates it from the Pulumi secret "
        "gpustrata:hfToken, which must then be set.",
    )


class EngineSpec(SpecModel):
    """vLLM engine settings, named exactly as vLLM's EngineArgs names them."""

    tensor_parallel_size: int = Field(
        default=1, ge=1, le=64, description="vLLM --tensor-parallel-size."
    )
    pipeline_parallel_size: int = Field(
        default=1, ge=1, le=64, description="vLLM --pipeline-parallel-size."
    )
    max_model_len: int | None = Field(
        default=None,
        ge=16,
        le=10_485_760,
        description="vLLM --max-model-len (empty: the model's maximum).",
    )
    gpu_memory_utilization: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        examples=[0.9],
        json_schema_extra={"fix": "use a fraction such as 0.9"},
        description="vLLM --gpu-memory-utilization: fraction of GPU memory for the engine. "
        "gpustrata always passes it; its default 0.9 leaves more headroom than vLLM "
        f"{minor_release(_VLLM.reference)}'s own default of "
        f"{_VLLM.gpu_memory_utilization.value} (vllm/config/cache.py) for memory vLLM does "
        "not count "
        "(CUDA context, NCCL buffers).",
    )
    dtype: ModelDtype = Field(default="auto", description="vLLM --dtype.")
    kv_cache_dtype: KvCacheDtype = Field(default="auto", description="vLLM --kv-cache-dtype.")
    block_size: BlockSize | None = Field(
        default=None, description="vLLM --block-size (empty: the backend's default, 16 on CUDA)."
    )
    max_num_seqs: int | None = Field(
        default=None, ge=1, le=65536, description="vLLM --max-num-seqs."
    )
    max_num_batched_tokens: int | None = Field(
        default=None, ge=1, le=10_485_760, description="vLLM --max-num-batched-tokens."
    )
    enable_chunked_prefill: bool | None = Field(
        default=None, description="vLLM --enable-chunked-prefill (empty: vLLM's default)."
    )
    enable_prefix_caching: bool | None = Field(
        default=None, description="vLLM --enable-prefix-caching (empty: vLLM's default)."
    )
    enforce_eager: bool = Field(
        default=False, description="vLLM --enforce-eager (no CUDA graphs; slower decode)."
    )
    quantization: str | None = Field(
        default=None, examples=["fp8", "awq"], description="vLLM --quantization."
    )
    trust_remote_code: bool = Field(default=False, description="vLLM --trust-remote-code.")
    extra_args: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Further vLLM flags by their EngineArgs name (rendered as --flag value). "
        "Never secrets (api_key, hf_token): flags are readable in the Pod spec.",
    )

    @field_validator("extra_args")
    @classmethod
    def _no_secret_flags(cls, value: dict[str, object]) -> dict[str, object]:
        for key in value:
            # Names outside vLLM's grammar ('hf-token ', 'api-k\u0435y', 'api-key=hf_...')
            # could slip a credential past the name check; neither they nor values are quoted.
            if not FLAG_NAME.match(key) or len(key) > 64:
                raise ValueError(
                    "a flag name is not of vLLM's form (lowercase letters, digits, '-' and '_', "
                    "at most 64; the name is not shown: it may hold a secret): use the "
                    "EngineArgs name, e.g. max_num_seqs"
                )
            if SECRET_FLAG.search(key) or SECRET_PART.search(key):
                raise ValueError(
                    f"'{key[:40]}' would put a secret on the vLLM command line, readable by "
                    "anyone who can read the Pod; remove it and use hf_token (a Secret "
                    "reference) for the Hugging Face token"
                )
            if isinstance(value[key], str) and TOKEN_VALUE.search(str(value[key])):
                raise ValueError(
                    f"the value of '{key[:40]}' looks like a token (not shown); flags are "
                    "readable in the Pod spec: remove it and use a Secret reference"
                )
        return value

    @property
    def gpus_per_engine(self) -> int:
        """GPUs one engine replica occupies: TP x PP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


class AutoscalingSpec(SpecModel):
    """Replica autoscaling for a model (one autoscaler per workload)."""

    kind: Autoscaler = Field(
        default="none",
        description="'hpa' or 'keda' for the deployment runtime; Ray Serve autoscaling is "
        "used on the rayservice runtime whenever max_replicas > min_replicas.",
    )
    min_replicas: int = Field(default=1, ge=0, le=1000, description="Minimum replicas.")
    max_replicas: int = Field(default=1, ge=1, le=1000, description="Maximum replicas.")
    target_waiting_requests: int = Field(
        default=5,
        ge=1,
        le=10000,
        description="Scale out when vllm:num_requests_waiting per replica exceeds this.",
    )
    target_ongoing_requests: int = Field(
        default=32,
        ge=1,
        le=100000,
        description="Ray Serve target_ongoing_requests per replica (rayservice runtime).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}; "
                "raise max_replicas or lower min_replicas"
            )
        return self


class WorkloadSpec(SpecModel):
    """What a model serves: the workload ``plan`` predicts latency for and ``size`` sizes.

    The defaults are the reference workload (a chat turn, every replica full): 1,024 prompt
    and 256 output tokens at a concurrency of max_num_seqs per replica. Give at most one of
    ``concurrency`` (closed loop, all replicas together), ``request_rate`` (open loop) or
    ``burst`` (N requests at once). ``gpustrata size --input-tokens ... --concurrency ...``
    with the same fields predicts the same figures (it writes this section in its snippet).
    """

    input_tokens: int = Field(
        default=1024, ge=1, le=10_000_000, description="Prompt tokens per request."
    )
    output_tokens: int = Field(
        default=256, ge=1, le=10_000_000, description="Generated tokens per request."
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Requests in flight over all replicas (closed loop, as `vllm bench "
        "serve --max-concurrency`). Empty with no request_rate or burst: max_num_seqs per "
        "replica (every engine full).",
    )
    request_rate: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        description="Requests per second arriving over all replicas (open loop, as `vllm "
        "bench serve --request-rate`).",
    )
    burst: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Requests sent at once and not replaced (as `vllm bench serve "
        "--num-prompts N` at request rate inf), over all replicas.",
    )
    ttft_seconds: float | None = Field(
        default=None, gt=0, le=86400, description="TTFT target in seconds (SLO); empty: none."
    )
    tpot_seconds: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="TPOT (inter-token latency) target in seconds (SLO); empty: none.",
    )

    @model_validator(mode="after")
    def _one_load(self) -> WorkloadSpec:
        given = [
            k for k in ("concurrency", "request_rate", "burst") if getattr(self, k) is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)} are both set; give one of concurrency, request_rate "
                "or burst"
            )
        return self


# --- Multi-node engines (LeaderWorkerSet) ------------------------------------------------
# One engine across several nodes: TP within a node, PP across nodes, served by a
# LeaderWorkerSet (kubernetes-sigs/lws). Kept in its own section (spec merges).

MultiNodeExecutor = Literal["ray", "mp"]
EfaMode = Literal["auto", "off"]


class MultiNodeSpec(SpecModel):
    """An engine that spans nodes: one LeaderWorkerSet group of ``nodes`` Pods, each taking
    every GPU of its node (tensor parallel within the node, pipeline parallel across nodes,
    as vLLM's multi-node guide sets them)."""

    nodes: int | None = Field(
        default=None,
        ge=2,
        le=64,
        description="Nodes (Pods) per engine = pipeline_parallel_size. Empty: the fewest "
        "nodes of the pool whose GPUs hold the weights and one max_model_len sequence.",
    )
    executor: MultiNodeExecutor = Field(
        default="ray",
        description="vLLM --distributed-executor-backend across the nodes: 'ray' (the leader "
        "starts a Ray head, the workers join it: vLLM's multi-node-serving.sh) or 'mp' "
        "(multiprocessing: every Pod runs `vllm serve --nnodes N --node-rank R "
        "--master-addr <leader>`, the workers with --headless).",
    )
    efa: EfaMode = Field(
        default="auto",
        description="'auto': on instance types with Elastic Fabric Adapter interfaces, each "
        "Pod requests all of its node's (vpc.amazonaws.com/efa) and sets the Libfabric "
        "environment NCCL needs (FI_PROVIDER=efa), and a managed node group the stack "
        "creates attaches the interfaces (launch template, cluster placement group; a "
        "Karpenter pool gets none); 'off': NCCL over TCP sockets.",
    )


class ModelSpec(SpecModel):
    """A served model: what runs, where, and with which vLLM engine settings."""

    name: Name = Field(description="Name of the served model (Kubernetes object names).")
    model: str = Field(
        min_length=1,
        examples=["meta-llama/Llama-3.1-8B-Instruct"],
        description="Hugging Face model id (or a path, inside the project, for a local "
        "model's config.json).",
    )
    served_model_name: str | None = Field(
        default=None, description="Name clients use in the OpenAI API (default: model)."
    )
    runtime: Runtime = Field(
        default="deployment",
        description="'deployment' runs `vllm serve` in a Deployment; 'rayservice' runs Ray "
        "Serve LLM on a KubeRay RayService.",
    )
    pool: Name = Field(description="Name of the node pool the engines run on.")
    namespace: Name = Field(default="inference", description="Namespace of the workload.")
    image: str = Field(
        max_length=512,
        pattern=IMAGE_REF.pattern,
        examples=["vllm/vllm-openai:v0.11.0"],
        description="Container image, pinned by tag or digest.",
    )
    replicas: int = Field(
        default=1, ge=0, le=1000, description="Engine replicas (without autoscaling)."
    )
    engine: EngineSpec = Field(default_factory=EngineSpec, description="vLLM engine settings.")
    weights: WeightsSpec = Field(default_factory=WeightsSpec, description="Weight source.")
    hf_token: SecretRef | None = Field(
        default=None, description="Secret holding the Hugging Face token (gated models)."
    )
    autoscaling: AutoscalingSpec = Field(
        default_factory=AutoscalingSpec, description="Autoscaling."
    )
    workload: WorkloadSpec = Field(
        default_factory=WorkloadSpec,
        description="The workload and SLO targets `plan` predicts serving latency for (and "
        "`size` sizes for); the defaults are the reference workload.",
    )
    cpu: Quantity | None = Field(
        default=None,
        description="CPU request per engine Pod. Empty: the Pod's share of a node's "
        "allocatable CPU (its GPUs' share of the node's GPUs, 90% of it), shown by plan.",
    )
    memory: Quantity | None = Field(
        default=None,
        description="Memory request and limit per Pod. Empty: the Pod's share of a node's "
        "allocatable memory (its GPUs' share of the node's GPUs, 95% of it), shown by plan.",
    )
    shm_size: Quantity = Field(
        default="8Gi",
        description="Size of the memory-backed /dev/shm (NCCL needs more than the 64 MB "
        "container default when an engine spans GPUs).",
    )
    service_monitor: bool | None = Field(
        default=None,
        description="Create a Prometheus Operator ServiceMonitor for vLLM's /metrics "
        "(deployment runtime). Empty: when the stack has monitoring (mode install or "
        "existing), whose CRDs it needs.",
    )
    multi_node: MultiNodeSpec | None = Field(
        default=None,
        description="Serve one engine across several nodes with a LeaderWorkerSet (TP = GPUs "
        "per node, PP = nodes; deployment runtime). Empty: one node per engine, unless the "
        "engine's TP and PP are left unset and the weights and one max_model_len sequence do "
        "not fit one node of the pool: then the planner spans nodes and says so.",
    )
    startup_init_s: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Engine initialisation time in seconds after the weights are loaded "
        "(profiling, KV allocation, torch.compile, CUDA graph capture), for the startup "
        "estimate. Empty: fitted on published vLLM startup logs (a base, + torch.compile "
        "per decoder layer and CUDA graph capture without enforce_eager, + MoE kernel "
        "warm-up for MoE models).",
    )

    routing: ModelRoutingSpec = Field(
        default_factory=ModelRoutingSpec,
        description="How clients reach the replicas: the Service (default) or an inference "
        "gateway.",
    )

    @model_validator(mode="after")
    def _routing_runtime(self) -> ModelSpec:
        if self.routing.mode == "inference-gateway" and self.runtime != "deployment":
            raise ValueError(
                f"routing.mode inference-gateway needs runtime deployment (got {self.runtime}): "
                "an InferencePool selects vLLM Pods, and a RayService's Pods are Ray workers "
                "behind Ray Serve's proxy; use runtime: deployment or routing.mode: service"
            )
        return self

    @field_validator("model")
    @classmethod
    def _model_id_or_path(cls, value: str) -> str:
        problem = model_path_problem(value)
        if problem:
            raise ValueError(f"{value[:60]!r} {problem}")
        return value

    @model_validator(mode="after")
    def _multi_node_runtime(self) -> ModelSpec:
        if self.multi_node is not None and self.runtime != "deployment":
            raise ValueError(
                f"multi_node needs runtime 'deployment' (a LeaderWorkerSet of vLLM Pods), not "
                f"{self.runtime!r}: set runtime: deployment or remove multi_node"
            )
        return self
