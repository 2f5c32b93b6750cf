"""What a planned engine serves at its settings, and what its pool costs.

The one seam between the plan and the serving performance model: ``plan`` (text, JSON,
pull-request markdown) and ``capacity``'s what-if table read these. Pure: no Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel, InstanceType
from gpustrata.planning.sizing import instance_price
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.performance import ServingPrediction, predict_serving, reference_workload
from gpustrata.vllm.terms import CapacityError, Term

__all__ = ["ServingAtSettings", "pool_cost_per_hour", "serving_at_settings"]


@dataclass(frozen=True)
class ServingAtSettings:
    """One replica's predicted TTFT, TPOT and throughput at the reference workload."""

    prediction: ServingPrediction
    workload_why: str

    def summary(self) -> str:
        """``TPOT 12.3 ms, TTFT 0.10 s, 4,321 tok/s``: the three figures people compare."""
        p = self.prediction
        return (
            f"TPOT {p.tpot_seconds.value * 1e3:.1f} ms, TTFT {p.ttft_seconds.value:.2f} s, "
            f"{p.output_tokens_per_second.value:,.0f} tok/s"
        )


def serving_at_settings(
    arch: ModelArchitecture, gpu: GpuModel, est: CapacityEstimate
) -> ServingAtSettings | None:
    """The prediction of ``est``'s engine at :func:`reference_workload`, or None when vLLM
    would not start with these settings (nothing to predict)."""
    if not est.fits:
        return None
    workload, why = reference_workload(est)
    try:
        pred = predict_serving(arch, gpu, est, workload, default_constants())
    except CapacityError:
        return None
    return ServingAtSettings(pred, why)


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
