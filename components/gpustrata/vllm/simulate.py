"""An event-level simulation of vLLM V1's scheduler: what TTFT and TPOT requests see.

Each engine step is simulated as vLLM's ``Scheduler.schedule`` builds it (vllm
``v1/core/sched/scheduler.py`` of the reference release), with the step's time from the
roofline of :func:`~gpustrata.vllm.performance.decode_step`:

* a token budget of ``max_num_batched_tokens`` per step; running requests first (one token
  each when decoding, the rest of their prompt up to the budget left when prefilling: chunked
  prefill), then waiting requests in arrival order while fewer than ``max_num_seqs`` run,
  budget is left and the KV cache has their blocks;
* KV blocks of ``block_size`` tokens from the capacity estimate's ``num_blocks``; a waiting
  request is admitted only when the free blocks hold its whole prompt (``reserve_prompt``;
  a choice the published bursts make, not vLLM's code: admitting on the first chunk's
  blocks alone thrashes in preemptions, Qwen3-32B on A100 with 100 x 32,000-token prompts
  gives TPOT 625 ms where GPUStack measured 68, 55 ms with the reservation); a running
  request that needs a block when none is free preempts the most recently admitted one
  (recompute: its blocks are freed and it queues first again, its prompt and the tokens it
  generated to be prefilled anew);
* the step that completes a prompt samples its first token; each later step one more;
* arrivals: a closed loop of ``concurrency`` clients (a new request when one finishes; the
  first wave, sent together, is left out of the percentiles: the steady state), a Poisson
  process at ``request_rate`` (seeded), or a burst of ``concurrency`` requests at t = 0.

Prefix caching is not simulated (every prompt is computed). Hand-written rather than a
discrete-event library: the loop is one clock advanced by step times (no concurrent
processes to interleave), and a library (SimPy) would add a dependency without removing
any of it. Pure: no Pulumi import.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.performance import ServingConstants, Workload, decode_step

__all__ = ["SimulatedServing", "simulate_serving"]


@dataclass(eq=False)
class _Request:
    arrival: float
    prompt: int
    output: int
    computed: int = 0
    """Tokens whose KV is computed (prompt and generated)."""
    generated: int = 0
    blocks: int = 0
    first_token: float | None = None
    finish: float | None = None
    preempted: int = 0

    @property
    def to_prefill(self) -> int:
        """Tokens to compute before the next token is sampled (prompt + generated so far)."""
        return self.prompt + self.generated - self.computed


@dataclass(frozen=True)
class SimulatedServing:
    """What the simulated requests saw: percentiles over every request."""

    requests: int
    steps: int
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_mean_s: float
    output_tokens_per_second: float
    """Output tokens of all requests / (last finish - first arrival)."""
    mean_running: float
    """Requests in a step, averaged over steps."""
    preemptions: int
    explanation: str = field(default="")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _default_requests(w: Workload) -> int:
    if w.burst:
        return int(w.concurrency or 1)
    if w.concurrency is not None:
        return max(4 * w.concurrency, 16)
    return 400


def _block_groups(est: CapacityEstimate) -> list[tuple[int, int | None]]:
    """(block size, sliding window or None) of each KV-cache group that takes blocks from
    the shared pool per token. vLLM's hybrid KV cache manager gives every group its own
    blocks from one ``BlockPool`` of ``num_blocks`` (vllm
    ``v1/core/kv_cache_coordinator.py`` and ``single_type_kv_cache_manager.py`` at v0.10.2:
    ``allocate_slots`` sums ``get_num_blocks_to_allocate`` over the groups against the
    pool's free blocks), so gpt-oss's sliding-window group takes blocks beside its
    full-attention group. A layout with a group of another kind (Mamba state, chunked
    local attention), or none stated, is priced as one full-attention group of the
    estimate's block size (the simulator before session 20)."""
    groups = est.kv.groups
    if not groups or any(g.kind not in ("full_attention", "sliding_window", "mla") for g in groups):
        return [(est.kv.block_size, None)]
    return [
        (g.block_size, g.sliding_window if g.kind == "sliding_window" else None) for g in groups
    ]


def simulate_serving(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    workload: Workload,
    constants: ServingConstants,
    *,
    requests: int | None = None,
    seed: int = 0,
    reserve_prompt: bool = True,
) -> SimulatedServing:
    """Simulate ``requests`` requests of ``workload`` on one engine (see the module
    docstring); ``seed`` fixes Poisson arrivals."""
    w = workload
    n_total = requests or _default_requests(w)
    rng = random.Random(seed)
    bs = est.kv.block_size
    free = max(0, est.kv.num_blocks - 1)  # vLLM keeps one null block
    budget_max = est.max_num_batched_tokens
    max_seqs = est.max_num_seqs
    cache: dict[tuple[int, int, int, int], float] = {}

    def step_time(decoding: int, ctx: float, prompt: int, prompt_ctx: float) -> float:
        key = (decoding, int(ctx) // 32, prompt // 16, int(prompt_ctx) // 64)
        t = cache.get(key)
        if t is None:
            t = decode_step(
                arch,
                gpu,
                est,
                batch=decoding,
                context=(key[1] + 0.5) * 32 if decoding else 0.0,
                constants=constants,
                prompt_tokens=float(prompt),
                prompt_context=(key[3] + 0.5) * 64 if prompt else 0.0,
            ).seconds.value
            cache[key] = t
        return t

    arrivals: list[_Request] = []
    if w.request_rate is not None:
        t = 0.0
        for _ in range(n_total):
            t += rng.expovariate(w.request_rate)
            arrivals.append(_Request(t, w.input_tokens, w.output_tokens))
    else:
        first = n_total if w.burst else min(n_total, int(w.concurrency or 1))
        arrivals = [_Request(0.0, w.input_tokens, w.output_tokens) for _ in range(first)]
    closed_loop = w.concurrency is not None and not w.burst
    spawned = len(arrivals)
    pending = arrivals[::-1]  # pop() gives the earliest arrival
    waiting: list[_Request] = []
    running: list[_Request] = []
    done: list[_Request] = []
    now, steps, running_sum, preemptions = 0.0, 0, 0, 0

    groups = _block_groups(est)

    def held(r: _Request, new: int) -> int:
        """Blocks ``r`` holds over every KV-cache group once ``new`` more tokens have slots."""
        total = 0
        for g_bs, window in groups:
            blocks = -(-(r.computed + new) // g_bs)
            if window is not None:
                # SlidingWindowManager.remove_skipped_blocks, run before allocating:
                # blocks wholly before num_computed_tokens - window + 1 go back to the pool.
                blocks -= max(0, (r.computed - window + 1) // g_bs)
            total += blocks
        return total

    one_group = len(groups) == 1 and groups[0][1] is None
    bs0 = groups[0][0]

    def blocks_for(r: _Request, new: int) -> int:
        if one_group:  # the common case, kept to one expression: the loop's hot path
            return -(-(r.computed + new) // bs0) - r.blocks
        return held(r, new) - r.blocks

    def reservation(r: _Request) -> int:
        """Blocks a waiting request is admitted against (``reserve_prompt``): its whole
        prompt in full-attention groups; in a sliding-window group the most it holds while
        its prompt is computed (the window plus one step's chunk), not the prompt."""
        total = 0
        tokens = r.computed + r.to_prefill + 1
        for g_bs, window in groups:
            if window is None:
                total += -(-tokens // g_bs)
            else:
                total += -(-min(tokens, window - 1 + budget_max) // g_bs) + 1
        return total - r.blocks

    while len(done) < n_total:
        while pending and pending[-1].arrival <= now:
            waiting.append(pending.pop())
        if not running and not waiting:
            if not pending:
                break
            now = pending[-1].arrival
            continue
        budget = budget_max
        preempted_before = preemptions
        scheduled: list[tuple[_Request, int]] = []
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = min(r.to_prefill, budget) if r.to_prefill > 1 else 1
            need = blocks_for(r, n)
            while need > free and len(running) - 1 > i:
                victim = running.pop()
                free += victim.blocks
                victim.blocks, victim.computed = 0, 0
                victim.preempted += 1
                preemptions += 1
                waiting.insert(0, victim)
            if need > free:
                running.pop(i)
                free += r.blocks
                r.blocks, r.computed = 0, 0
                r.preempted += 1
                preemptions += 1
                waiting.insert(0, r)
                continue
            free -= need
            r.blocks += need
            scheduled.append((r, n))
            budget -= n
            i += 1
        # vLLM admits no waiting request in a step that preempted one (v1 scheduler:
        # "if not preempted_reqs").
        while (
            waiting and len(running) < max_seqs and budget > 0 and preempted_before == preemptions
        ):
            r = waiting[0]
            n = min(r.to_prefill, budget)
            need = blocks_for(r, n)
            if (reservation(r) if reserve_prompt else need) > free:
                break
            waiting.pop(0)
            free -= need
            r.blocks += need
            running.append(r)
            scheduled.append((r, n))
            budget -= n
        if not scheduled:
            # Nothing fits (a request longer than the KV cache): stop rather than spin.
            break
        decoders = [(r, n) for r, n in scheduled if n == 1 and r.to_prefill <= 1]
        prefills = [(r, n) for r, n in scheduled if not (n == 1 and r.to_prefill <= 1)]
        ctx = sum(r.computed for r, _ in decoders) / len(decoders) if decoders else 0.0
        p_tokens = sum(n for _, n in prefills)
        p_ctx = sum(r.computed + n / 2 for r, n in prefills) / len(prefills) if prefills else 0.0
        now += step_time(len(decoders), ctx, p_tokens, p_ctx)
        steps += 1
        running_sum += len(scheduled)
        for r, n in scheduled:
            r.computed += n
            if r.to_prefill > 0:
                continue  # a prompt chunk: no token sampled yet
            r.generated += 1
            if r.first_token is None:
                r.first_token = now
            if r.generated >= r.output:
                r.finish = now
                running.remove(r)
                free += r.blocks
                r.blocks = 0
                done.append(r)
                if closed_loop and spawned < n_total:
                    pending.append(_Request(now, w.input_tokens, w.output_tokens))
                    spawned += 1
    over = constants.request_overhead_s
    # A closed loop starts with all its clients at once; its steady state is what follows
    # that first wave, so the percentiles leave the first `concurrency` requests out.
    warm = int(w.concurrency or 0) if closed_loop and n_total > int(w.concurrency or 0) else 0
    first_wave = {id(r) for r in arrivals[:warm]}
    seen = [r for r in done if id(r) not in first_wave]
    ttfts = [(r.first_token or now) - r.arrival + over for r in seen]
    tpots = [
        ((r.finish or now) - (r.first_token or now)) / (r.output - 1) for r in seen if r.output > 1
    ]
    span = max((r.finish or now) for r in done) - min(r.arrival for r in done) if done else 0.0
    tok_s = sum(r.output for r in done) / span if span > 0 else 0.0
    load = w.load + (f" (Poisson, seed {seed})" if w.request_rate is not None else "")
    return SimulatedServing(
        requests=len(done),
        steps=steps,
        ttft_p50_s=_percentile(ttfts, 0.5),
        ttft_p90_s=_percentile(ttfts, 0.9),
        ttft_mean_s=sum(ttfts) / len(ttfts) if ttfts else 0.0,
        tpot_p50_s=_percentile(tpots, 0.5),
        tpot_p90_s=_percentile(tpots, 0.9),
        tpot_mean_s=sum(tpots) / len(tpots) if tpots else 0.0,
        output_tokens_per_second=tok_s,
        mean_running=running_sum / steps if steps else 0.0,
        preemptions=preemptions,
        explanation=(
            (f"the last {len(seen)} of " if warm else "")
            + f"{len(done)} requests of {w.input_tokens} in / {w.output_tokens} out at {load}, "
            f"simulated over {steps} engine steps (max_num_seqs {max_seqs}, "
            f"max_num_batched_tokens {budget_max}, {est.kv.num_blocks} KV blocks of {bs}); "
            f"{preemptions} preemptions; each step's time from the roofline decode_step, "
            f"+ {over * 1e3:.0f} ms per request on TTFT"
        ),
    )
