"""V004 context-fits-kv-cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import estimated_subject, judged_engines
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.capacity import Inputs
from gpustrata_policies.view.objects import K8sObject


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """One max_model_len sequence fits the KV-cache memory of every GPU of the engine."""
    yield from judged_engines(ctx, obj, _judge_engine, presets=True)  # KServe presets too


def _judge_engine(inp: Inputs) -> Iterator[Verdict]:
    """One engine: its KV cache holds one max_model_len sequence."""
    est = inp.estimate
    kv = est.kv
    # Weights that do not fit are V003's finding; the KV cache is moot then.
    if not est.weights_fit or kv.fits_one_sequence:
        return
    values: dict[str, Value] = {
        **estimated_subject(inp),
        "max_model_len": est.max_model_len,
        "weights_bytes": est.weights.bytes_per_gpu,
        "kv_bytes": max(0, est.memory.available_kv_bytes),
        "kv_tokens": kv.tokens,
        "sequences": kv.max_concurrency,
        "needed_bytes": kv.needed_bytes,
        "blocks": kv.blocks_per_request,
        "block_bytes": kv.bytes_per_block,
        # 0: the KV cache cannot hold even one token.
        "largest_max_model_len": min(kv.largest_max_model_len, est.model_max_len),
        # Raising gpu_memory_utilization is a fix only where some utilization <= 1
        # holds it (None: none does).
        "utilization_to_start": est.utilization_to_start,
        "defaults": inp.default_notes("max_model_len", "gpu_memory_utilization"),
    }
    yield Verdict("violation", "context-too-long", values, path=inp.site.path)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V004 message quotes beyond its values: sizes in GiB and the fix."""
    if verdict.reason != "context-too-long":
        return {}  # a not-evaluated record quotes the view's reason: nothing to import
    from gpustrata.vllm.capacity import gib

    v = verdict.values
    largest = cast(int, v["largest_max_model_len"])
    u = cast(float | None, v["utilization_to_start"])
    return {
        "weights": gib(cast(int, v["weights_bytes"])),
        "kv": gib(cast(int, v["kv_bytes"])),
        "needed": gib(cast(int, v["needed_bytes"])),
        "fix": (
            f"set max_model_len to at most {largest:,}"
            if largest
            else "the KV cache cannot hold even one token"
        ),
        "raise_util": f"raise gpu_memory_utilization to {u:.2f}, " if u is not None else "",
    }


RULE = folder_rule(__name__, worded(judge, fields))
