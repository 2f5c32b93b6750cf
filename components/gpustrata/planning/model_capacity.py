"""A stack model's capacity estimate: its engine and weights settings as the vLLM model
(:func:`gpustrata.vllm.capacity.estimate_capacity`) takes them. The spec -> vLLM seam,
kept in the planner so that :mod:`gpustrata.vllm` knows nothing of the stack spec."""

from __future__ import annotations

from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.spec.serving import ModelSpec
from gpustrata.vllm.capacity import CapacityEstimate, estimate_capacity

__all__ = ["estimate_for_model", "model_settings"]


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


def estimate_for_model(
    model: ModelSpec, arch: ModelArchitecture, gpu: GpuModel, **overrides: Any
) -> CapacityEstimate:
    """:func:`estimate_capacity` with a stack model's engine and weights settings.

    ``overrides`` replace single settings by their :func:`estimate_capacity` name
    (``tensor_parallel_size=8``), for what-if tables.
    """
    return estimate_capacity(arch, gpu, **{**model_settings(model), **overrides})
