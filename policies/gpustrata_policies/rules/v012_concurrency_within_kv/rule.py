"""V012 concurrency-within-kv."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, cast

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import estimated_subject, judged_engines, on_every_release
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.candidates import ReleaseInputs, release_inputs, release_inputs_key
from gpustrata_policies.view.capacity import (
    Inputs,
    estimate,
    per_estimate,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import profile_hint


def typical_capacity(inp: Inputs, tokens: int) -> tuple[int, int]:
    """(sequences of *tokens* the KV cache holds at once, blocks one such sequence takes),
    with the reference vLLM release's block arithmetic on the engine's KV memory."""
    return per_estimate(inp.estimate, "typical", tokens, lambda: _typical(inp, tokens))


def _typical(inp: Inputs, tokens: int) -> tuple[int, int]:
    from gpustrata.vllm.capacity import gdn_prefill_checkpoints, kv_cache_blocks

    est = inp.estimate
    layout = kv_cache_blocks(
        inp.model.arch,
        tensor_parallel_size=est.tensor_parallel_size,
        pipeline_parallel_size=est.pipeline_parallel_size,
        block_size=est.block_size,
        cache_dtype=est.kv_cache_dtype,
        model_dtype=est.dtype,
        available_bytes=[max(0, a) for a in est.memory.available_kv_per_stage],
        max_model_len=tokens,
        max_num_batched_tokens=est.max_num_batched_tokens,
        gdn_prefill_checkpoints=gdn_prefill_checkpoints(
            inp.model.arch, inp.gpu.gpu.compute_capability
        ),
    )
    return math.floor(layout.max_concurrency), layout.blocks_per_request


def reachable_max_num_seqs(inp: Inputs, tokens: int) -> int:
    """The largest max_num_seqs whose own KV cache holds that many sequences of *tokens*.

    Lowering max_num_seqs shrinks the sampler's buffers in vLLM's profile run, so the KV
    cache grows a little; a search over max_num_seqs with the same planner.
    """
    return per_estimate(inp.estimate, "reachable", tokens, lambda: _reachable(inp, tokens))


def _reachable(inp: Inputs, tokens: int) -> int:
    from gpustrata.vllm.capacity import CapacityError, largest_passing

    def holds(n: int) -> bool:
        settings = inp.settings.engine.replace(
            max_num_seqs=n, max_model_len=inp.estimate.max_model_len
        )
        try:
            est = estimate(
                inp.model.arch,
                inp.gpu.gpu,
                settings,
                inp.settings.release,
                inp.settings.flashinfer_sampler,
            )
        except CapacityError:
            return False
        alt = Inputs(inp.site, inp.model, inp.gpu, inp.version, inp.settings, est)
        return est.fits and typical_capacity(alt, tokens)[0] >= n

    high = inp.estimate.max_num_seqs
    return _largest_from(holds, min(typical_capacity(inp, tokens)[0], high), high, largest_passing)


def _largest_from(
    holds: Callable[[int], bool],
    start: int,
    high: int,
    largest_passing: Callable[[Callable[[int], bool], int], int],
) -> int:
    """``largest_passing(holds, high)`` (*holds* passes up to some n and fails above it),
    searched upward from *start*, where it is expected to pass: the sequences the KV cache
    holds at the stated max_num_seqs, which a lower max_num_seqs only raises. The answer
    is a few above it (the cache grows a little), so doubling steps from there bracket it
    in a few estimates where a binary search over 1..max_num_seqs takes 8 to 12 (each a
    full capacity estimate); where *start* does not pass, the binary search over all."""
    if start < 1 or not holds(start):
        return largest_passing(holds, high)
    low, step = start, 1  # low passes; the first failure is sought above it
    while low + step <= high and holds(low + step):
        low, step = low + step, step * 2
    fail = min(low + step, high + 1)
    return low + largest_passing(lambda k: holds(low + k), fail - low - 1)


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The KV cache holds max_num_seqs sequences of the configured typical length."""
    typical = ctx.threshold("typical_sequence_tokens")
    if isinstance(typical, float) and typical.is_integer():
        typical = int(typical)  # CrossGuard passes config numbers as doubles
    if isinstance(typical, bool) or not isinstance(typical, int) or typical < 1:
        why = f"typical_sequence_tokens {quoted(typical)} is not a positive integer"
        yield Verdict("not_evaluated", "typical-invalid", values={"why": why})
        return
    tokens: int = typical  # narrowed above; the closure keeps it
    yield from judged_engines(ctx, obj, lambda inp: _judge_any_release(ctx, inp, tokens))


def _judge_any_release(ctx: RuleContext, inp: Inputs, typical: int) -> Iterator[Verdict]:
    """One engine; where its image names no release and max_num_seqs is left to vLLM,
    under every release it may run (:func:`on_every_release`), on a GPU that is known
    (with the GPU unknown as well the record stays "not evaluated": not sized twice over)."""
    unset = "max_num_seqs" in inp.settings.defaults or "max_num_seqs" in inp.estimate.defaults
    if inp.version.version is None and unset:
        classes = release_inputs_key(inp)
        # Engines alike (one chart in many namespaces) share the verdicts.
        key = (classes, typical, inp.site.name, inp.site.path, inp.gpu.label, inp.model.name)
        held = _SHARED.get(key) if classes is not None else None
        if held is not None:
            yield from held
            return
        found = release_inputs(ctx, inp)
        if found is not None:
            held = tuple(_on_every_release(inp, found, typical))
            if found.key is not None:
                if len(_SHARED) > 4096:
                    _SHARED.clear()
                _SHARED[(found.key, *key[1:])] = held
            yield from held
            return
    yield from _judge_engine(inp, typical)


_SHARED: dict[Any, tuple[Verdict, ...]] = {}
"""V012's verdicts under every release, by what decides them (:attr:`ReleaseInputs.key`)."""


def _on_every_release(inp: Inputs, found: ReleaseInputs, typical: int) -> Iterator[Verdict]:
    """:func:`on_every_release`, with the fix's reachable max_num_seqs (a search of
    estimates) run only for the class whose figures are reported: the newest that vLLM
    starts under."""
    sized = [i for _, i in found.classes if not isinstance(i, str) and i.estimate.fits]
    for verdict in on_every_release(
        inp, found, lambda i: _judge_engine(i, typical, searched=False)
    ):
        if verdict.reason == "seqs-beyond-kv" and sized:
            best = reachable_max_num_seqs(sized[-1], cast(int, verdict.values["length"]))
            verdict = replace(verdict, values={**verdict.values, "best": best})
        yield verdict


def _judge_engine(inp: Inputs, typical: int, searched: bool = True) -> Iterator[Verdict]:
    """One engine: its KV cache holds max_num_seqs sequences of *typical* tokens (with the
    largest max_num_seqs it holds searched, unless *searched* is False: filled in later)."""
    est = inp.estimate
    if not est.fits:
        return  # V003 / V004: vLLM does not start at all
    unset = "max_num_seqs" in inp.settings.defaults or "max_num_seqs" in est.defaults
    if inp.version.version is None and unset:
        yield Verdict(
            "not_evaluated",
            "max-num-seqs-unknown",
            values={
                "engine": inp.site.name,
                "where": inp.version.where,
                "hint": profile_hint("images"),
            },
        )
        return
    length = min(typical, est.max_model_len)
    held, blocks = typical_capacity(inp, length)
    if held >= est.max_num_seqs:
        return
    values: dict[str, Value] = {
        **estimated_subject(inp),
        "max_num_seqs": est.max_num_seqs,
        "kv_tokens": est.kv.tokens,
        "kv_blocks": est.kv.num_blocks,
        "block_size": est.kv.block_size,
        "held": held,
        "length": length,
        "blocks": blocks,
        "full_length_held": est.max_concurrent_full_length_sequences,
        "max_model_len": est.max_model_len,
        "defaults": inp.default_notes("max_num_seqs", "max_model_len"),
        "best": reachable_max_num_seqs(inp, length) if searched else 0,
    }
    yield Verdict(
        "violation",
        "seqs-beyond-kv",
        values,
        thresholds={"typical_sequence_tokens": typical},
        path=inp.site.path,
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V012 message quotes beyond its values: which length was judged and the fix."""
    v = verdict.values
    if verdict.reason != "seqs-beyond-kv":
        return {}
    typical = cast(int, verdict.thresholds["typical_sequence_tokens"])
    length, best = cast(int, v["length"]), cast(int, v["best"])
    return {
        "what": (
            f"typical_sequence_tokens {typical:,}"
            if length == typical
            else f"max_model_len, below typical_sequence_tokens {typical:,}"
        ),
        "fix": (
            f"set max_num_seqs to at most {best:,} (with fewer sequences vLLM's sampler "
            f"buffers shrink and the KV cache holds {best:,} sequences of {length:,} tokens)"
            if best
            else f"not even one sequence of {length:,} tokens fits: lower max_model_len"
        ),
    }


RULE = folder_rule(__name__, worded(judge, fields))
