"""V004 context-fits-kv-cache."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import NotEvaluated, Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.any_gpu import AnyGpu, estimated_engines_any_gpu
from gpustrata_policies.view.capacity import Inputs
from gpustrata_policies.view.objects import K8sObject


def message(inp: Inputs) -> str:
    """The violation text for an engine whose KV cache cannot hold one full sequence."""
    from gpustrata.vllm.capacity import gib

    est = inp.estimate
    kv = est.kv
    mml = est.max_model_len
    largest = min(kv.largest_max_model_len, est.model_max_len)
    fix = (
        f"set max_model_len to at most {largest:,}"
        if largest
        else "the KV cache cannot hold even one token"
    )
    defaults = inp.default_notes("max_model_len", "gpu_memory_utilization")
    # Raising gpu_memory_utilization is a fix only where some utilization <= 1 holds it.
    u = est.utilization_to_start
    raise_util = f"raise gpu_memory_utilization to {u:.2f}, " if u is not None else ""
    return (
        f"{inp.site.name} serves {inp.model.name} on {inp.gpu.label} with max_model_len "
        f"{mml:,}: after {gib(est.weights.bytes_per_gpu)} of weights per GPU the KV cache "
        f"gets {gib(max(0, est.memory.available_kv_bytes))} per GPU, {kv.tokens:,} tokens "
        f"({kv.max_concurrency:.2f} sequences of {mml:,}), but one {mml:,}-token sequence "
        f"needs {gib(kv.needed_bytes)} ({kv.blocks_per_request:,} blocks of "
        f"{kv.bytes_per_block:,} B), so vLLM refuses to start ('To serve at least one request "
        f"with the model's max seq len ...'){defaults}. Fix: {fix}, {raise_util}use "
        "kv_cache_dtype fp8, or add GPUs (tensor_parallel_size)"
    )


def any_gpu_message(bound: AnyGpu) -> str:
    """The violation text for an engine whose one max_model_len sequence exceeds the KV
    cache of every catalogued GPU, its own GPU model unknown."""
    from gpustrata.vllm.capacity import gib

    inp = bound.inputs
    est, gpu = inp.estimate, inp.gpu.gpu
    mml = est.max_model_len
    largest = min(est.kv.largest_max_model_len, est.model_max_len)
    defaults = inp.default_notes("max_model_len", "gpu_memory_utilization")
    return (
        f"{inp.site.name} serves {inp.model.name} with max_model_len {mml:,}: one "
        f"{mml:,}-token sequence needs {gib(est.kv.needed_bytes)} of KV cache per GPU, but "
        f"no catalogued GPU leaves that much: on the largest, {gpu.name} "
        f"({gpu.memory_gib:g} GiB), gpu_memory_utilization {est.gpu_memory_utilization:g} "
        f"less {gib(est.weights.bytes_per_gpu)} of weights leaves {gib(max(0, bound.room))} "
        "before activations and CUDA graphs. Whichever GPU the Pod lands on (the input names no "
        f"GPU model), vLLM refuses to start ('To serve at "
        f"least one request with the model's max seq len ...'){defaults}. Fix: set "
        f"max_model_len to at most {largest:,} (the most even {gpu.name} holds) or lower "
        "for the GPU you pin, use kv_cache_dtype fp8, or add GPUs (tensor_parallel_size)"
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """One max_model_len sequence fits the KV-cache memory of every GPU of the engine."""
    for inp in estimated_engines_any_gpu(ctx, obj):
        if isinstance(inp, NotEvaluated):
            yield inp
        elif isinstance(inp, AnyGpu):
            est = inp.inputs.estimate
            # Weights that fit there but leave less than one sequence's KV cache, before
            # any overhead: short on every catalogued GPU (weights short: V003's finding).
            if est.weights.bytes_per_gpu > est.memory.requested.value:
                continue  # as for a known GPU: the KV cache is moot
            if est.kv.needed_bytes > inp.room:
                yield ctx.violation(obj, any_gpu_message(inp), inp.inputs.site.path)
            else:
                yield inp.record
        # Weights that do not fit are V003's finding; the KV cache is moot then.
        elif inp.estimate.weights_fit and not inp.estimate.kv.fits_one_sequence:
            yield ctx.violation(obj, message(inp), inp.site.path)


RULE = folder_rule(__name__, check)
