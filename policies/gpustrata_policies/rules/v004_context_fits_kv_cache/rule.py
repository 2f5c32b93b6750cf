"""V004 context-fits-kv-cache."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import NotEvaluated, Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.capacity import Inputs, estimated_engines
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


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """One max_model_len sequence fits the KV-cache memory of every GPU of the engine."""
    for inp in estimated_engines(ctx, obj):
        if isinstance(inp, NotEvaluated):
            yield inp
        # Weights that do not fit are V003's finding; the KV cache is moot then.
        elif inp.estimate.weights_fit and not inp.estimate.kv.fits_one_sequence:
            yield ctx.violation(obj, message(inp), inp.site.path)


RULE = folder_rule(__name__, check)
