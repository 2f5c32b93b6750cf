"""The capacity estimate of one vLLM engine: weights, memory, KV cache, startup and step.

:func:`estimate_capacity` combines the concerns that live in their own modules
(:mod:`~gpustrata.vllm.weights`, :mod:`~gpustrata.vllm.memory`,
:mod:`~gpustrata.vllm.kv_cache`, :mod:`~gpustrata.vllm.timing`,
:mod:`~gpustrata.vllm.defaults`) for one :class:`~gpustrata.vllm.settings.EngineSettings`
on one GPU, and re-exports their public names, the planner's API. Pure: no Pulumi import;
every figure carries the working that produced it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture, ModelCatalog, load_model_catalog
from gpustrata.catalog.hardware import GpuModel
from gpustrata.catalog.hf_config import architecture_from_hf_config
from gpustrata.catalog.model_sources import ModelSources
from gpustrata.vllm.defaults import (
    default_block_size,
    default_gpu_memory_utilization,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    release_gpu_memory_utilization,
)
from gpustrata.vllm.dtypes import cache_dtype_bytes, model_dtype_bytes
from gpustrata.vllm.kv_cache import (
    KvCacheGroup,
    KvCacheLayout,
    gdn_prefill_checkpoints,
    kv_cache_blocks,
    pp_layer_partition,
)
from gpustrata.vllm.memory import MemoryBudget, activation_bytes, cuda_total_bytes, memory_budget
from gpustrata.vllm.reference import VLLM_VERSION
from gpustrata.vllm.scheduling import async_scheduling_default
from gpustrata.vllm.settings import EngineSettings
from gpustrata.vllm.terms import GB, GIB, CapacityError, Term, gb, gib, largest_passing
from gpustrata.vllm.timing import (
    DEFAULT_EFFICIENCY,
    LOAD_GBPS_DEFAULTS,
    STARTUP_SAFETY_FACTOR,
    StartupEstimate,
    StepEstimate,
    startup_estimate,
    step_estimate,
)
from gpustrata.vllm.transport import TRANSPORTS, TpTransport
from gpustrata.vllm.weights import WeightsEstimate, weights_estimate

__all__ = [
    "DEFAULT_EFFICIENCY",
    "GB",
    "GIB",
    "LOAD_GBPS_DEFAULTS",
    "STARTUP_SAFETY_FACTOR",
    "VLLM_VERSION",
    "CapacityError",
    "CapacityEstimate",
    "KvCacheGroup",
    "KvCacheLayout",
    "MemoryBudget",
    "StartupEstimate",
    "StepEstimate",
    "Term",
    "WeightsEstimate",
    "activation_bytes",
    "cache_dtype_bytes",
    "cuda_total_bytes",
    "default_block_size",
    "default_gpu_memory_utilization",
    "default_max_num_batched_tokens",
    "default_max_num_seqs",
    "estimate_capacity",
    "gb",
    "gdn_prefill_checkpoints",
    "gib",
    "kv_cache_blocks",
    "largest_passing",
    "memory_budget",
    "model_dtype_bytes",
    "pp_layer_partition",
    "resolve_architecture",
    "startup_estimate",
    "step_estimate",
    "weights_estimate",
]

# --------------------------------------------------------------------------- all of it


@dataclass(frozen=True)
class CapacityEstimate:
    """Everything the planner, the rules and ``gpustrata capacity`` need for one engine.

    Field names are stable API: ``ModelPlan.capacity`` carries this object.
    """

    model_id: str
    gpu_id: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    dtype: str
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool
    gpu_memory_utilization: float
    weights_source: str
    model_max_len: int
    """The model's ``max_position_embeddings``: the largest max_model_len vLLM accepts."""
    weights: WeightsEstimate
    memory: MemoryBudget
    kv: KvCacheLayout
    startup: StartupEstimate
    longest_step: StepEstimate
    defaults: dict[str, str] = field(default_factory=dict)
    """Settings gpustrata resolved to vLLM's defaults, with the reason."""
    quantization: str | None = None
    """The weights' quantisation: the setting, else the checkpoint's (config.json)."""
    tp_transport: TpTransport = "device"
    """The path the TP all-reduces take (:mod:`gpustrata.vllm.transport`): ``device`` (GPU
    peer access within one Pod), ``host`` (one Pod, no peer access: NCCL SHM) or
    ``network`` (the TP group spans Pods: NCCL NET)."""
    async_scheduling: bool = False
    """Whether the engine schedules the next step while the GPU runs this one
    (:mod:`gpustrata.vllm.scheduling`): a step then costs the larger of its CPU and GPU
    work instead of their sum."""

    @property
    def kv_cache_dtype(self) -> str:
        """The KV cache dtype as resolved (the one its layout ``kv`` holds)."""
        return self.kv.cache_dtype

    @property
    def weights_fit(self) -> bool:
        """Weights, activations and overheads leave KV memory on every GPU."""
        return self.memory.available_kv_bytes > 0

    @property
    def fits(self) -> bool:
        """vLLM would start: weights fit and one max_model_len request fits the KV cache."""
        return self.weights_fit and self.kv.fits_one_sequence

    @property
    def utilization_to_start(self) -> float | None:
        """The smallest gpu_memory_utilization (to the hundredth) at which these settings
        start: the memory vLLM lacks (one max_model_len request's KV cache, plus the weights'
        shortfall) added to what it requests now; None when it starts already or when even
        the whole GPU is too small (then no gpu_memory_utilization helps)."""
        if self.fits:
            return None
        # vLLM's check: one request's blocks + the null block <= the KV memory available.
        deficit = self.kv.needed_bytes + self.kv.bytes_per_block - self.memory.available_kv_bytes
        u = math.ceil((self.memory.requested.value + deficit) / self.memory.total.value * 100)
        return u / 100 if u <= 100 else None

    @property
    def refusal(self) -> str | None:
        """Why vLLM would not start with these settings and what would fix it (None: it
        starts). vLLM's own message advises raising ``gpu_memory_utilization`` whenever no
        KV memory is left; that is only a fix while :attr:`utilization_to_start` exists, so
        the advice here says which."""
        if self.fits:
            return None
        u = self.utilization_to_start
        if self.weights_fit:
            why = self.kv.vllm_error or "one max_model_len request does not fit the KV cache"
            return why + (
                f" (gpu_memory_utilization {u:.2f} would hold it)"
                if u is not None
                else " (no gpu_memory_utilization holds it: lower max_model_len, use "
                "kv_cache_dtype fp8 or raise tensor_parallel_size)"
            )
        m = self.memory
        # Per GPU: the fullest stage's weights plus what the budget takes besides them.
        used = int(m.requested.value) - self.memory.available_kv_bytes
        have = (
            f"weights {gib(m.weights.value)} + activation peak, CUDA graphs and runtime "
            f"{gib(used - m.weights.value)} = {gib(used)} per GPU"
        )
        if u is None:
            return (
                f"{have} and one max_model_len request's KV cache exceed the whole "
                f"{gib(m.total.value)} of one GPU: vLLM runs out of memory whatever "
                "gpu_memory_utilization is; raise tensor_parallel_size, quantise the weights "
                "or use a GPU with more memory"
            )
        return (
            f"{have} exceed the {gib(m.requested.value)} gpu_memory_utilization "
            f"{self.gpu_memory_utilization} grants: vLLM stops with 'No available memory for "
            f"the cache blocks'; gpu_memory_utilization {u:.2f} would start it (if nothing "
            "else uses the GPU), else raise tensor_parallel_size or quantise the weights"
        )

    @property
    def max_concurrent_full_length_sequences(self) -> int:
        """Requests of max_model_len the KV cache holds at once (floor of vLLM's figure)."""
        return max(0, math.floor(self.kv.max_concurrency))

    @property
    def largest_max_model_len(self) -> int:
        """Largest max_model_len that fits this budget (up to the model's maximum)."""
        return self.kv.largest_max_model_len

    @property
    def gpus(self) -> int:
        """GPUs one engine replica uses (TP x PP)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


def _resolved_int(settings: EngineSettings, key: str, default: int | None) -> int | None:
    value = getattr(settings, key)
    if isinstance(value, str):
        raise CapacityError(key, f"{key} {value!r} is not an integer")
    return default if value is None else int(value)


def estimate_capacity(
    arch: ModelArchitecture,
    gpu: GpuModel,
    settings: EngineSettings | None = None,
    *,
    weights_source: str = "huggingface",
    load_gbps: float | None = None,
    storage: str | None = None,
    storage_gbps: float | None = None,
    engine_init_s: float | None = None,
    safety_factor: float = STARTUP_SAFETY_FACTOR,
    efficiency: float = DEFAULT_EFFICIENCY,
    vllm_release: str | None = None,
    flashinfer_sampler: bool | None = None,
    tp_transport: TpTransport = "device",
    async_scheduling: bool | None = None,
    **engine: Any,
) -> CapacityEstimate:
    """Weights, memory budget, KV cache, startup and longest step for one engine.

    *settings* are the engine's vLLM settings; ``engine`` keywords (vLLM names such as
    ``max_model_len=8192``) change single ones, a shorthand for ``settings.replace(...)``.
    The other keywords describe the weights' load and the planner's margins, not vLLM
    (``storage`` and ``storage_gbps``: what the weights are read from and the volume's
    throughput, :func:`startup_estimate`); ``vllm_release`` is the engine image's vLLM
    release where the release catalogue has per-release facts (the MXFP4 MoE kernel and its
    weight layout, the memory profile's terms; None: the reference release), and
    ``flashinfer_sampler`` what the engine's ``VLLM_USE_FLASHINFER_SAMPLER`` says (None:
    unset). ``tp_transport`` is the path the TP all-reduces take
    (:mod:`gpustrata.vllm.transport`: ``network`` where the TP group spans Pods), and
    ``async_scheduling`` whether the engine schedules asynchronously (None: the release's
    default, :func:`~gpustrata.vllm.scheduling.async_scheduling_default`). Unset
    settings take the reference release's defaults (recorded in ``defaults``). Raises
    :class:`CapacityError` for settings vLLM would refuse (TP not dividing the heads, an
    unknown dtype, a value that is not a number).
    """
    settings = (settings or EngineSettings()).replace(**engine) if engine else settings
    settings = settings or EngineSettings()
    if tp_transport not in TRANSPORTS:
        raise CapacityError(
            "tp_transport", f"{tp_transport!r} is not one of {', '.join(TRANSPORTS)}"
        )
    tp = _resolved_int(settings, "tensor_parallel_size", 1) or 1
    pp = _resolved_int(settings, "pipeline_parallel_size", 1) or 1
    max_model_len = _resolved_int(settings, "max_model_len", None)
    block_size = _resolved_int(settings, "block_size", None)
    max_num_batched_tokens = _resolved_int(settings, "max_num_batched_tokens", None)
    max_num_seqs = _resolved_int(settings, "max_num_seqs", None)
    utilization = settings.gpu_memory_utilization
    if isinstance(utilization, str):
        raise CapacityError(
            "gpu_memory_utilization", f"gpu_memory_utilization {utilization!r} is not a number"
        )
    utilization_default = ""
    if utilization is None and vllm_release:
        # The release's own default (0.9 before 0.20, 0.92 since): what its engine takes.
        gpu_memory_utilization, utilization_default = release_gpu_memory_utilization(vllm_release)
    else:
        gpu_memory_utilization = (
            default_gpu_memory_utilization() if utilization is None else utilization
        )
    dtype = settings.dtype or "auto"
    kv_cache_dtype = settings.kv_cache_dtype or "auto"
    quantization = settings.quantization
    enforce_eager = settings.enforce_eager is True
    enable_chunked_prefill = (
        None if settings.enable_chunked_prefill is None else settings.enable_chunked_prefill is True
    )
    if not 0 < gpu_memory_utilization <= 1:
        raise CapacityError(
            "gpu_memory_utilization",
            f"gpu_memory_utilization {gpu_memory_utilization} must be in (0, 1]",
        )
    defaults: dict[str, str] = {}
    if async_scheduling is None:
        async_scheduling, defaults["async_scheduling"] = async_scheduling_default(vllm_release)
    if utilization_default:
        defaults["gpu_memory_utilization"] = utilization_default
    mml = max_model_len or arch.max_position_embeddings
    if max_model_len is None:
        defaults["max_model_len"] = (
            f"{mml} = config.json max_position_embeddings (vLLM's derived maximum)"
        )
    chunked = True if enable_chunked_prefill is None else enable_chunked_prefill
    if enable_chunked_prefill is None:
        defaults["enable_chunked_prefill"] = "on: vLLM V1 enables chunked prefill for decoders"
    if block_size is None:
        block_size, why = default_block_size(arch, gpu)
        defaults["block_size"] = f"{block_size}: {why}"
    if max_num_batched_tokens is None:
        max_num_batched_tokens, why = default_max_num_batched_tokens(gpu, mml, chunked)
        defaults["max_num_batched_tokens"] = why
    if max_num_seqs is None:
        max_num_seqs, why = default_max_num_seqs(gpu)
        defaults["max_num_seqs"] = why
    dtype_name, dtype_b = model_dtype_bytes(arch, dtype)

    def weights_and_memory(release: str | None) -> tuple[WeightsEstimate, MemoryBudget]:
        w = weights_estimate(
            arch,
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            model_dtype=dtype,
            quantization=quantization,
            compute_capability=gpu.compute_capability,
            vllm_release=release,
        )
        m = memory_budget(
            arch,
            gpu,
            w,
            tensor_parallel_size=tp,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype_bytes=dtype_b,
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            enforce_eager=enforce_eager,
            vllm_release=release,
            flashinfer_sampler=flashinfer_sampler,
        )
        return w, m

    from gpustrata.catalog.vllm_releases import unread_memory_bracket

    weights, memory = weights_and_memory(vllm_release)
    bracket = unread_memory_bracket(vllm_release)
    if bracket is not None:
        # An unread release between read ones: it does what one of them does, so a start
        # is claimed only where both would start (gpt-oss-120b on one H100 with 0.11.0
        # refused, vllm-project/vllm#27508, where the reference arithmetic said it fits).
        bounds = {r: weights_and_memory(r) for r in bracket}
        tightest = min(bracket, key=lambda r: bounds[r][1].available_kv_bytes)
        if bounds[tightest][1].available_kv_bytes < memory.available_kv_bytes:
            weights, memory = bounds[tightest]
            defaults["vllm_release"] = (
                f"{vllm_release} was not read; it lies between {bracket[0]} and {bracket[1]}, "
                f"whose memory facts differ: sized as {tightest}, the one leaving less KV "
                "memory"
            )
    kv = kv_cache_blocks(
        arch,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        block_size=block_size,
        cache_dtype=kv_cache_dtype,
        model_dtype=dtype,
        available_bytes=[max(0, a) for a in memory.available_kv_per_stage],
        max_model_len=mml,
        max_num_batched_tokens=max_num_batched_tokens,
        gdn_prefill_checkpoints=gdn_prefill_checkpoints(arch, gpu.compute_capability),
    )
    startup = startup_estimate(
        arch,
        weights,
        weights_source=weights_source,
        load_gbps=load_gbps,
        engine_init_s=engine_init_s,
        enforce_eager=enforce_eager,
        safety_factor=safety_factor,
        storage=storage,
        storage_gbps=storage_gbps,
        vllm_release=vllm_release,
    )
    step_tokens = max_num_batched_tokens if chunked else max(max_num_batched_tokens, mml)
    step = step_estimate(
        arch,
        gpu,
        tensor_parallel_size=tp,
        tokens=step_tokens,
        max_model_len=mml,
        max_num_seqs=max_num_seqs,
        efficiency=efficiency,
    )
    return CapacityEstimate(
        model_id=arch.id,
        gpu_id=gpu.id,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dtype=dtype_name,
        block_size=block_size,
        max_model_len=mml,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        chunked_prefill=chunked,
        gpu_memory_utilization=gpu_memory_utilization,
        weights_source=weights_source,
        model_max_len=arch.max_position_embeddings,
        weights=weights,
        memory=memory,
        kv=kv,
        startup=startup,
        longest_step=step,
        defaults=defaults,
        quantization=quantization or arch.quantization,
        tp_transport=tp_transport,
        async_scheduling=async_scheduling,
    )


def resolve_architecture(
    model: str,
    catalog: ModelCatalog | None = None,
    base_dir: Path | None = None,
    inside: Path | None = None,
    sources: ModelSources | None = None,
) -> ModelArchitecture | None:
    """The architecture of ``model``: its local files, a catalogue id or alias, or a local
    config.json.

    *sources* (:class:`~gpustrata.catalog.model_sources.ModelSources`: a models folder,
    the Hugging Face cache) are asked first, then the catalogue. ``model`` may also name a
    ``config.json`` file or a directory holding one (relative paths resolve against
    ``base_dir``, default the working directory); the file read must resolve inside
    ``inside`` when given (a stack's project). Returns None when nothing applies. Raises
    :class:`ModelCatalogError` for a config.json (or index) that is found but unusable.
    """
    if sources is not None:
        local = sources.architecture(model)
        if local is not None:
            return local
    found = (catalog or load_model_catalog()).get(model)
    if found is not None:
        return found
    path = Path(model).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_file() or (path.is_dir() and (path / "config.json").is_file()):
        return architecture_from_hf_config(path, inside=inside)
    return None
