"""The route timeout of a model behind the inference gateway (pure; no Pulumi).

Rule G001 reports a route timeout shorter than the longest answer an engine admits: its
lower bound is ``max_model_len - 1`` decode steps of one sequence alone. The planner
sets the HTTPRoute's ``timeouts.request`` above a larger figure, the same number of steps
with every sequence slot busy (``max_num_seqs`` sequences at the mean context
``max_model_len / 2``; a step only gets slower with more sequences, so this holds under
load where G001's bound holds alone), rounded up to whole minutes.
"""

from __future__ import annotations

import math

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.planning.provenance import Ledger
from gpustrata.spec.serving import ModelSpec
from gpustrata.vllm.calibration import default_constants
from gpustrata.vllm.capacity import CapacityEstimate
from gpustrata.vllm.performance import decode_step
from gpustrata.vllm.terms import CapacityError

__all__ = ["DISABLED", "route_timeout"]

DISABLED = "0s"
"""A Gateway API duration of zero: no timeout (GEP-1742), which G001 never reports."""


def route_timeout(
    model: ModelSpec,
    arch: ModelArchitecture | None,
    gpu: GpuModel,
    capacity: CapacityEstimate | None,
    key: str,
    ledger: Ledger,
) -> str | None:
    """The HTTPRoute ``timeouts.request`` of *model* (``None``: not routed through the
    inference gateway), recorded in *ledger* under ``<key>.routeTimeout`` with its working.
    """
    routing = model.routing
    if routing.mode != "inference-gateway":
        return None
    name = f"{key}.routeTimeout"
    if routing.request_timeout is not None:
        stated: str = ledger.add(
            name, routing.request_timeout, "spec", "routing.request_timeout as stated"
        )
        return stated
    if capacity is None or arch is None:
        disabled: str = ledger.add(
            name,
            DISABLED,
            "default",
            "no capacity estimate for the model, so no longest generation: the route "
            "timeout is disabled (0s) rather than guessed",
        )
        return disabled
    tokens = capacity.max_model_len - 1
    batch = max(1, capacity.max_num_seqs)
    try:
        step = decode_step(
            arch,
            gpu,
            capacity,
            batch=batch,
            context=capacity.max_model_len / 2,
            constants=default_constants(),
        )
    except CapacityError as exc:
        off: str = ledger.add(
            name, DISABLED, "default", f"no decode estimate ({exc}): the timeout is disabled"
        )
        return off
    seconds = tokens * step.seconds.value
    minutes = max(1, math.ceil(seconds / 60))
    # GEP-2257 durations take at most 5 digits per unit: whole hours beyond 99,999 minutes.
    value = f"{minutes}m" if minutes <= 99_999 else f"{math.ceil(minutes / 60)}h"
    derived: str = ledger.add(
        name,
        value,
        "formula",
        f"longest generation {tokens:,} tokens (max_model_len {capacity.max_model_len} - 1) x "
        f"{step.seconds.value * 1e3:.2f} ms per step ({batch} sequences at context "
        f"{capacity.max_model_len // 2:,} on {gpu.name}, gpustrata's serving model) = "
        f"{math.ceil(seconds):,} s, rounded up to whole minutes (rule G001)",
    )
    return derived
