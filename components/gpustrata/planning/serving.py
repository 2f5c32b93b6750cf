"""What a planned engine serves at its settings, and what its pool costs.

The one seam between the plan and the serving performance model: ``plan`` (text, JSON,
pull-request markdown) and ``capacity``'s what-if table read these. Pure: no Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel, InstanceType
from gpustrata.planning.sizing import Judged, ReplicaShare, instance_price, judged
from gpustrata.spec.serving import WorkloadSpec
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.performance import ServingPrediction, Workload
from gpustrata.vllm.simulate import SimulatedServing
from gpustrata.vllm.terms import CapacityError, Term

__all__ = [
    "ServingAtSettings",
    "WorkloadTooLong",
    "pool_cost_per_hour",
    "serving_at_settings",
    "stack_workload",
]


class WorkloadTooLong(ValueError):
    """A stated workload whose requests are longer than the engine's max_model_len."""


def stack_workload(
    spec: WorkloadSpec, est: CapacityEstimate, replicas: int
) -> tuple[Workload, str]:
    """The workload of all ``replicas`` together that ``spec`` states, and where it came from.

    Unset load (no concurrency, request_rate or burst): max_num_seqs per replica. Unset
    lengths (the defaults, 1,024 in / 256 out) shrink to fit max_model_len, as the reference
    workload always did; stated lengths that do not fit raise :class:`WorkloadTooLong`
    (vLLM rejects every such request).
    """
    fields = spec.model_fields_set
    out, inp = spec.output_tokens, spec.input_tokens
    if "output_tokens" not in fields:
        out = min(out, max(1, est.max_model_len // 4))
    if "input_tokens" not in fields:
        inp = max(1, min(inp, est.max_model_len - out))
    if inp + out > est.max_model_len:
        raise WorkloadTooLong(
            f"input_tokens {inp} + output_tokens {out} = {inp + out} is above max_model_len "
            f"{est.max_model_len}: vLLM rejects every request; lower the workload's tokens or "
            "raise engine.max_model_len"
        )
    lengths = f"{inp:,} in / {out} out tokens per request"
    src = "workload" if fields else "reference workload (the stack states no workload)"
    r = max(1, replicas)
    if spec.request_rate is not None:
        return (
            Workload(inp, out, request_rate=spec.request_rate),
            f"{src}: {lengths} at {spec.request_rate:g} req/s over {r} replica(s)",
        )
    if spec.burst is not None:
        return (
            Workload(inp, out, concurrency=spec.burst, burst=True),
            f"{src}: {lengths}, a burst of {spec.burst} over {r} replica(s)",
        )
    if spec.concurrency is not None:
        return (
            Workload(inp, out, concurrency=spec.concurrency),
            f"{src}: {lengths} at concurrency {spec.concurrency} over {r} replica(s)",
        )
    return (
        Workload(inp, out, concurrency=est.max_num_seqs * r),
        f"{src}: {lengths} at concurrency {est.max_num_seqs} per replica (max_num_seqs; "
        f"the KV cache may bound it lower) x {r} replica(s)",
    )


@dataclass(frozen=True)
class ServingAtSettings:
    """One replica's predicted TTFT, TPOT and throughput at the stack's workload."""

    prediction: ServingPrediction
    """One replica, serving its share of ``workload``."""
    workload: Workload
    """The whole model's workload (all replicas)."""
    replicas: int
    workload_why: str
    ttft_s: float | None = None
    """The workload's TTFT target (seconds), if it states one."""
    tpot_s: float | None = None
    """The workload's TPOT target (seconds), if it states one."""
    simulated: SimulatedServing | None = None
    """The event-level simulation of the same replica and workload (p50/p90), when asked."""

    @property
    def judged(self) -> Judged:
        """The figures the SLO verdict and the plan's headline use: the simulation's means
        where it ran, else the closed form's (:func:`~gpustrata.planning.sizing.judged`, as
        ``size`` judges its head)."""
        return judged(self.prediction, self.simulated)

    def summary(self) -> str:
        """``TPOT 12.3 ms, TTFT 0.10 s, 4,321 tok/s (1024/256 tokens, c64, simulation)``:
        the three figures people compare, the per-replica workload they are for and the
        model behind them."""
        j = self.judged
        w = self.prediction.workload
        return (
            f"TPOT {j.tpot_seconds.value * 1e3:.1f} ms, TTFT {j.ttft_seconds.value:.2f} s, "
            f"{j.output_tokens_per_second.value:,.0f} tok/s ({w.input_tokens}/"
            f"{w.output_tokens} tokens, {w.load}, {j.model})"
        )


def serving_at_settings(
    arch: ModelArchitecture,
    gpu: GpuModel,
    est: CapacityEstimate,
    workload: WorkloadSpec | None = None,
    replicas: int = 1,
    *,
    simulate: bool = False,
) -> ServingAtSettings | None:
    """The prediction of one of ``replicas`` engines of ``est`` serving its share of
    ``workload`` (None: the reference workload), through the function ``size`` predicts its
    candidates with (:meth:`~gpustrata.planning.sizing.ReplicaShare.predict`); None when vLLM
    would not start with these settings (nothing to predict). Raises
    :class:`WorkloadTooLong` for a stated workload longer than max_model_len. ``simulate``
    adds the event-level simulation (:meth:`~gpustrata.planning.sizing.ReplicaShare.simulate`)."""
    if not est.fits:
        return None
    spec = workload or WorkloadSpec()
    whole, why = stack_workload(spec, est, replicas)
    try:
        share = ReplicaShare(arch, gpu, est, whole, replicas, default_constants())
        pred = share.predict()
        sim = share.simulate() if simulate else None
    except CapacityError:
        return None
    return ServingAtSettings(
        pred, whole, max(1, replicas), why, spec.ttft_seconds, spec.tpot_seconds, sim
    )


def pool_cost_per_hour(instance: InstanceType, min_nodes: int, max_nodes: int) -> Term | None:
    """The pool's USD per hour from its instance's catalogue price (min..max nodes), or
    None when the catalogue has no price for it. ``value`` is the price of ``max_nodes``."""
    price = instance_price(instance)
    if price is None:
        return None
    usd, why = price
    lo, hi = min_nodes * usd, max_nodes * usd
    shown = f"${lo:,.2f}" if lo == hi else f"${lo:,.2f}..${hi:,.2f}"
    return Term(hi, f"{shown}/h = {min_nodes}..{max_nodes} nodes x ${usd:g}/h ({why})")
