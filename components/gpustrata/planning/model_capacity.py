"""A stack model's capacity estimate: its engine and weights settings as the vLLM model
(:func:`gpustrata.vllm.capacity.estimate_capacity`) takes them. The spec -> vLLM seam,
kept in the planner so that :mod:`gpustrata.vllm` knows nothing of the stack spec."""

from __future__ import annotations

from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.spec.serving import ModelSpec
from gpustrata.vllm.capacity import CapacityEstimate, estimate_capacity
from gpustrata.vllm.transport import TpTransport

__all__ = ["estimate_for_model", "model_settings", "tp_transport_for"]


def model_settings(model: ModelSpec) -> dict[str, Any]:
    """A stack model's engine and weights settings as :func:`estimate_capacity` keywords."""
    e = model.engine
    return {
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "max_model_len": e.max_model_len,
        "gpu_memory_utilization": e.gpu_memory_utilization,
        "dtype": e.dtype,
        "kv_cache_dtype": e.kv_cache_dtype,
        "block_size": e.block_size,
        "max_num_batched_tokens": e.max_num_batched_tokens,
        "max_num_seqs": e.max_num_seqs,
        "enable_chunked_prefill": e.enable_chunked_prefill,
        "enforce_eager": e.enforce_eager,
        "quantization": e.quantization,
        "weights_source": model.weights.source,
        "load_gbps": model.weights.load_gbps,
        "storage": model.weights.storage_facts()[0],
        "storage_gbps": model.weights.storage_facts()[1],
        "engine_init_s": model.startup_init_s,
    }


def tp_transport_for(tensor_parallel_size: int | None, gpus_per_pod: int | None) -> TpTransport:
    """The path an engine's TP all-reduces take where it is laid out on Pods of
    ``gpus_per_pod`` GPUs: ``network`` when the TP group needs more GPUs than one Pod holds
    (a RayService's engine over several worker Pods: NCCL sees one host per Pod,
    :mod:`gpustrata.vllm.transport`), else ``device``. A multi-node (LeaderWorkerSet)
    engine keeps TP within a Pod and spans Pods by pipeline stages only."""
    tp = tensor_parallel_size or 1
    return "network" if gpus_per_pod is not None and tp > gpus_per_pod else "device"


def estimate_for_model(
    model: ModelSpec,
    arch: ModelArchitecture,
    gpu: GpuModel,
    *,
    gpus_per_pod: int | None = None,
    **overrides: Any,
) -> CapacityEstimate:
    """:func:`estimate_capacity` with a stack model's engine and weights settings.

    ``gpus_per_pod``: the GPUs one Pod of the engine holds (the pool's node), which decides
    the TP all-reduces' transport (:func:`tp_transport_for`); None: within one Pod.
    ``overrides`` replace single settings by their :func:`estimate_capacity` name
    (``tensor_parallel_size=8``), for what-if tables.
    """
    settings = {**model_settings(model), **overrides}
    settings.setdefault(
        "tp_transport", tp_transport_for(settings.get("tensor_parallel_size"), gpus_per_pod)
    )
    return estimate_capacity(arch, gpu, **settings)
