"""Sizing from a workload: which instance type, TP and replicas meet the SLOs cheapest.

:func:`size` searches instance types x tensor-parallel sizes (within one instance) x
replicas, keeps only configurations the capacity estimate says vLLM starts
(:attr:`~gpustrata.vllm.capacity.CapacityEstimate.fits`), and ranks the SLO-meeting ones by
cost per hour (then the rest, each with the reasons it misses), in two passes:

1. a screen: each configuration's replicas from the closed form
   (:func:`~gpustrata.vllm.performance.predict_serving`, milliseconds per call) with no
   margin (its held-out error, 12 % median, has both signs: a margin here would push
   configurations the simulation accepts out of the head);
2. a verdict: the head of that ranking (:data:`SIMULATED_TOP` candidates) judged again by
   the event-level simulation of vLLM's scheduler (:mod:`gpustrata.vllm.simulate`, 20-250
   ms per call), whose held-out error is the smaller (``bench_serving_loso.py``): each
   replica count re-searched on the simulated means with the simulation's margin, and the
   ranking redone until its head is all simulated (at most :data:`SIMULATION_BUDGET`
   simulations). Candidates below the head keep the closed form's figures, marked so.

Pure: no Pulumi.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel, HardwareCatalog, InstanceType
from gpustrata.catalog.instance_regions import instance_regions
from gpustrata.core.terminal import clipped
from gpustrata.vllm.calibration import NO_MARGIN, Margin, MarginModel
from gpustrata.vllm.capacity import CapacityError, CapacityEstimate, estimate_capacity
from gpustrata.vllm.performance import (
    ServingConstants,
    ServingPrediction,
    Workload,
    predict_serving,
)
from gpustrata.vllm.simulate import SimulatedServing, simulate_serving
from gpustrata.vllm.terms import Term

__all__ = [
    "SIMULATED_TOP",
    "SIMULATION_BUDGET",
    "TP_SIZES",
    "Candidate",
    "Judged",
    "Rejected",
    "ReplicaShare",
    "SizingRequest",
    "SizingResult",
    "instance_price",
    "judged",
    "no_price_reason",
    "per_replica_workload",
    "size",
    "slo_misses",
]

TP_SIZES = (1, 2, 4, 8)
"""Tensor-parallel sizes tried (one instance's GPUs at most)."""
MAX_REPLICAS = 64
"""Replicas tried before a configuration is reported as missing the SLOs."""
SIMULATED_TOP = 3
"""Candidates at the head of the ranking that the simulation judges (the rest: the screen)."""
SIMULATION_BUDGET = 32
"""Simulations one search runs at most (each distinct GPU x TP x replicas once): a bound on
its time (about 0.02-0.25 s each); where it runs out, the head keeps the closed form's
figures for the candidates not reached, marked so."""


@dataclass(frozen=True)
class SizingRequest:
    """What to size: the model, the workload, the SLOs and what the search may choose."""

    arch: ModelArchitecture
    workload: Workload
    ttft_s: float | None = None
    tpot_s: float | None = None
    gpus: Sequence[GpuModel] = ()
    """Only these GPUs (empty: every GPU of the catalogue's instance types)."""
    instance_types: Sequence[str] = ()
    tensor_parallel_sizes: Sequence[int] = TP_SIZES
    pipeline_parallel_size: int = 1
    replicas: int | None = None
    """Fixed replicas (None: the fewest that meet the SLOs)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Engine settings for every candidate (vLLM names: dtype, quantization, ...)."""
    max_cost_per_hour: float | None = None
    prices: dict[str, float] = field(default_factory=dict)
    """USD per hour by instance type, overriding the catalogue."""
    margin: Margin = NO_MARGIN
    """What the simulated means must keep under the targets: a prediction plus this share
    of it (the simulation's measured error, or --margin). The screen keeps none."""
    cloud: str | None = None
    """Only instance types of this provider (aws, gcp, azure); None: all."""
    region: str | None = None
    """Only instance types this region's price map lists, priced there
    (catalog/data/instance-regions.yaml); None: every type at its instances.yaml price."""


@dataclass(frozen=True)
class Judged:
    """The figures of one replica that an SLO verdict is made on, and the model behind them."""

    model: MarginModel
    """``simulation`` (the simulated requests' means) or ``closed form``."""
    ttft_seconds: Term
    tpot_seconds: Term
    output_tokens_per_second: Term
    """One replica's."""
    saturated: bool
    """A request rate above what the replica sustains (the closed form's rate bound)."""

    @property
    def simulated(self) -> bool:
        """Whether the figures are the simulation's."""
        return self.model == "simulation"


def judged(pred: ServingPrediction, sim: SimulatedServing | None) -> Judged:
    """The figures to judge one replica by: the simulation's means where it ran (the means
    are what ``bench_serving_loso.py`` measures its held-out error on, and the published
    benchmarks report), else the closed form's. Saturation stays the closed form's test
    (a rate above the replica's throughput): a finite simulated run only shows it as a
    long queue."""
    if sim is None:
        return Judged(
            "closed form",
            pred.ttft_seconds,
            pred.tpot_seconds,
            pred.output_tokens_per_second,
            pred.saturated,
        )
    of = f"mean of {sim.explanation}"
    return Judged(
        "simulation",
        Term(sim.ttft_mean_s, f"TTFT {of} (closed form: {_seconds(pred.ttft_seconds.value)})"),
        Term(
            sim.tpot_mean_s,
            f"TPOT {of} (closed form: {pred.tpot_seconds.value * 1e3:.1f} ms)",
        ),
        Term(
            sim.output_tokens_per_second,
            f"output tokens of the {sim.requests} simulated requests / the time from the first "
            f"arrival to the last finish (closed form: "
            f"{pred.output_tokens_per_second.value:,.1f} tok/s)",
        ),
        pred.saturated,
    )


def _seconds(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.2f} s"


@dataclass(frozen=True)
class Candidate:
    """One configuration that starts, with its predicted performance and cost."""

    instance: InstanceType
    gpu: GpuModel
    replicas: int
    instances: int
    estimate: CapacityEstimate
    """The engine's estimate: its parallel sizes and settings are the candidate's."""
    per_replica: ServingPrediction
    """The closed form's prediction of one replica (the screen)."""
    judged: Judged
    """The figures the SLO verdict, the ranking and the table use (simulated where the
    search reached the candidate, else the closed form's)."""
    simulated: SimulatedServing | None
    """The simulation of one replica (None: not simulated, or no request ran)."""
    screened: bool
    """Not reached by the simulation: figures and verdict are the screen's (closed form,
    no margin)."""
    output_tokens_per_second: Term
    requests_per_second: Term
    cost_per_hour: Term | None
    cost_per_million_output_tokens: Term | None
    misses: tuple[str, ...]

    @property
    def meets_slo(self) -> bool:
        """No SLO, saturation or cost limit missed."""
        return not self.misses

    @property
    def tensor_parallel_size(self) -> int:
        """The engine's ``tensor_parallel_size`` (its estimate's)."""
        return self.estimate.tensor_parallel_size

    @property
    def pipeline_parallel_size(self) -> int:
        """The engine's ``pipeline_parallel_size`` (its estimate's)."""
        return self.estimate.pipeline_parallel_size


@dataclass(frozen=True)
class Rejected:
    """A configuration left out, and why."""

    instance: str
    gpu: str
    tensor_parallel_size: int
    reason: str


@dataclass(frozen=True)
class SizingResult:
    """Candidates ranked (SLO-meeting by cost first), and the configurations left out."""

    request: SizingRequest
    candidates: tuple[Candidate, ...]
    rejected: tuple[Rejected, ...]
    max_model_len: int
    max_model_len_why: str
    empty_reason: str | None = None
    """Why there is no candidate (None: some configuration starts)."""


def instance_price(
    inst: InstanceType, overrides: dict[str, float] | None = None, region: str | None = None
) -> tuple[float, str] | None:
    """USD per hour of one ``inst`` and where it comes from (an override, or the
    catalogue's on-demand price: in ``region`` when given, from
    catalog/data/instance-regions.yaml), or None when neither has one.

    A capacity-block or spot list price is not used: the node pools gpustrata declares
    (and ``size``'s snippet) are on-demand, and a capacity block is bought apart."""
    if overrides and inst.name in overrides:
        return overrides[inst.name], f"--price {inst.name}={overrides[inst.name]:g}"
    p = inst.price if region is None else instance_regions().price(inst, region)
    if p is None or p.kind != "on-demand":
        return None
    return p.usd_per_hour, f"{p.kind} {p.region}, read {p.read_on}: {p.source}"


def no_price_reason(inst: InstanceType) -> str:
    """Why ``inst`` has no usable price, and how to give one."""
    p = inst.price
    if p is not None and p.kind != "on-demand":
        return (
            f"no on-demand price for {inst.name} (only a {p.kind} price, ${p.usd_per_hour:g}/h "
            f"in {p.region}, is published): pass --price {inst.name}=USD"
        )
    return f"no price for {inst.name}: pass --price {inst.name}=USD"


def slo_misses(
    figures: Judged, ttft_s: float | None, tpot_s: float | None, margin: Margin = NO_MARGIN
) -> list[str]:
    """The SLO targets ``figures`` miss (saturation, TTFT, TPOT), each as a phrase; empty
    when they meet them. A figure plus its margin (a fraction, the model's measured error)
    must stay within the target. ``size`` ranks by these and ``plan`` reports them."""
    out: list[str] = []
    if figures.saturated:
        out.append("saturated: the request rate exceeds what the replicas sustain")
    ttft = figures.ttft_seconds.value
    if ttft_s is not None and ttft * (1 + margin.ttft) > ttft_s:
        plus = f" + {margin.ttft:.0%} margin" if margin.ttft else ""
        out.append(f"TTFT {ttft:.2f} s{plus} > {ttft_s:g} s")
    tpot = figures.tpot_seconds.value
    if tpot_s is not None and tpot * (1 + margin.tpot) > tpot_s:
        plus = f" + {margin.tpot:.0%} margin" if margin.tpot else ""
        out.append(f"TPOT {tpot * 1e3:.1f} ms{plus} > {tpot_s * 1e3:g} ms")
    return out


def _slo_misses(req: SizingRequest, figures: Judged) -> list[str]:
    """:func:`slo_misses` of ``req``'s targets: the simulation's figures keep the margin,
    the screen's none."""
    margin = req.margin if figures.simulated else NO_MARGIN
    return slo_misses(figures, req.ttft_s, req.tpot_s, margin)


def _misses(req: SizingRequest, figures: Judged, cost: float | None) -> list[str]:
    out = _slo_misses(req, figures)
    if req.max_cost_per_hour is not None and cost is not None and cost > req.max_cost_per_hour:
        out.append(f"cost ${cost:,.2f}/h > ${req.max_cost_per_hour:g}/h")
    return out


def per_replica_workload(w: Workload, replicas: int) -> Workload:
    """One replica's share of ``w`` spread over ``replicas`` (concurrency and bursts rounded
    up: the busiest replica)."""
    r = max(1, replicas)
    if w.concurrency is not None:
        return Workload(
            w.input_tokens, w.output_tokens, concurrency=-(-w.concurrency // r), burst=w.burst
        )
    return Workload(w.input_tokens, w.output_tokens, request_rate=(w.request_rate or 0) / r)


@dataclass(frozen=True)
class ReplicaShare:
    """One of ``replicas`` engines of ``est`` (``arch`` on ``gpu``) serving its share of
    ``workload`` (:func:`per_replica_workload`): what ``size`` ranks candidates by and
    ``plan`` prints for a stack's model, in closed form (:meth:`predict`) and simulated
    (:meth:`simulate`)."""

    arch: ModelArchitecture
    gpu: GpuModel
    est: CapacityEstimate
    workload: Workload
    """The whole workload, over every replica."""
    replicas: int
    constants: ServingConstants

    def predict(self) -> ServingPrediction:
        """The closed-form prediction of the replica: the one ``size`` ranks by."""
        share = per_replica_workload(self.workload, self.replicas)
        return predict_serving(self.arch, self.gpu, self.est, share, self.constants)

    def simulate(self) -> SimulatedServing | None:
        """The event-level simulation (p50/p90 TTFT and TPOT) that ``plan`` and ``size``
        print beside the closed form; None where no request fits the KV cache."""
        share = per_replica_workload(self.workload, self.replicas)
        sim = simulate_serving(self.arch, self.gpu, self.est, share, self.constants)
        return sim if sim.requests else None


def size(
    req: SizingRequest,
    hardware: HardwareCatalog,
    constants: ServingConstants,
) -> SizingResult:
    """Search, predict and rank (see the module docstring)."""
    w = req.workload
    mml = req.settings.get("max_model_len")
    if mml is None:
        mml = w.input_tokens + w.output_tokens
        mml_why = f"{mml} = input {w.input_tokens} + output {w.output_tokens} tokens"
    else:
        mml_why = f"{mml} (given)"
    types, empty = _instance_types(req, hardware)
    rejected: list[Rejected] = []
    most = max((i.gpu_count for i in types), default=0)
    # A size no instance holds would leave no trace; with no instance type left at all, the
    # empty answer names the filter that removed them, and a TP line each would only hide it.
    for tp in req.tensor_parallel_sizes if types else ():
        if tp * req.pipeline_parallel_size > most:
            rejected.append(
                Rejected(
                    "-",
                    "-",
                    tp,
                    f"TP {tp} x PP {req.pipeline_parallel_size} needs "
                    f"{tp * req.pipeline_parallel_size} GPUs per replica; the instance types "
                    f"searched have at most {most}",
                )
            )
    candidates: list[Candidate] = []
    runs = _Runs(req, constants)
    estimates: dict[tuple[str, int], CapacityEstimate | str] = {}
    tried_too_large: list[InstanceType] = []
    for inst in sorted(types, key=lambda i: (i.gpu, i.gpu_count, i.name)):
        gpu = hardware.gpu(inst.gpu)
        assert gpu is not None  # the catalogue checks instance -> GPU references
        for tp in req.tensor_parallel_sizes:
            gpus_per_replica = tp * req.pipeline_parallel_size
            spans = req.settings.get("tp_transport") == "network"  # one engine, several Pods
            if gpus_per_replica > inst.gpu_count and not spans:
                tried_too_large.append(inst)
                continue
            key = (gpu.id, tp)
            if key not in estimates:
                try:
                    est = estimate_capacity(
                        req.arch,
                        gpu,
                        **{
                            **req.settings,
                            "max_model_len": mml,
                            "tensor_parallel_size": tp,
                            "pipeline_parallel_size": req.pipeline_parallel_size,
                        },
                    )
                    estimates[key] = est if est.fits else (est.refusal or "does not fit")
                except CapacityError as exc:
                    estimates[key] = str(exc)
            found = estimates[key]
            if isinstance(found, str):
                rejected.append(Rejected(inst.name, gpu.id, tp, found))
                continue
            candidates.append(_candidate(req, inst, gpu, found, runs))
    ranked = _simulate_head(req, _ranked(candidates), runs)
    if empty is None and not candidates:
        tried = [r for r in rejected if r.instance != "-"]  # "-": a TP no instance holds
        if tried:
            empty = (
                f"no configuration starts: each of the {len(tried)} tried is refused (see rejected)"
            )
        elif tried_too_large:
            largest = max(tried_too_large, key=lambda i: i.gpu_count)
            sizes = "/".join(str(t) for t in req.tensor_parallel_sizes)
            empty = (
                f"TP {sizes} x PP {req.pipeline_parallel_size} needs more GPUs than any "
                f"selected instance type has (largest: {largest.gpu_count} on {largest.name}); "
                "lower --tp or --pp, or choose a larger --instance-type"
            )
    return SizingResult(req, tuple(ranked), tuple(rejected), int(mml), mml_why, empty)


def _instance_types(
    req: SizingRequest, hardware: HardwareCatalog
) -> tuple[list[InstanceType], str | None]:
    """The instance types the request allows, and why there are none (None: some)."""
    every = list(hardware.instances.values())
    named = [i for i in every if not req.instance_types or i.name in req.instance_types]
    on_cloud = [i for i in named if req.cloud is None or i.provider == req.cloud]
    wanted = {g.id for g in req.gpus}
    if req.region is not None and on_cloud:
        return _in_region(req, req.region, on_cloud, wanted)
    types = [i for i in on_cloud if not wanted or i.gpu in wanted]
    if types:
        return types, None
    if not on_cloud:
        clouds = sorted({i.provider for i in named})
        return [], (
            f"no selected instance type is on cloud {req.cloud!r} (they are on "
            f"{', '.join(clouds) or 'none'}); drop --cloud or choose another"
        )
    gpus = ", ".join(sorted(wanted))
    anywhere = [i for i in every if i.gpu in wanted]
    if not anywhere:
        offered = sorted({i.gpu for i in every})
        return [], (
            f"no catalogued instance type carries {gpus} (catalog/data/instances.yaml has the "
            "GPU's facts but no cloud instance with it); add the instance under catalog."
            f"instances in a stack file, or choose --gpu among {', '.join(offered)}"
        )
    where = sorted({f"{i.name} ({i.provider})" for i in anywhere})[:6]
    return [], (
        f"{gpus} is carried only by instance types the other filters exclude: "
        f"{', '.join(where)}; relax --instance-type or --cloud"
    )


def _in_region(
    req: SizingRequest, region: str, on_cloud: list[InstanceType], wanted: set[str]
) -> tuple[list[InstanceType], str | None]:
    """:func:`_instance_types` under ``--region``: the types ``region``'s price map lists
    (GCP types have no per-region data and are left out), and why there are none."""
    table = instance_regions()
    gpu_ok = [i for i in on_cloud if not wanted or i.gpu in wanted]
    types = [i for i in gpu_ok if region in table.offered_in(i)]
    if types:
        return types, None
    known = table.regions()
    if region not in known:
        near = difflib.get_close_matches(region, known, n=6, cutoff=0.6)
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        return [], (
            f"--region {clipped(region)!r} is in none of the catalogued price files "
            f"({len(table.regions('aws'))} AWS and {len(table.regions('azure'))} Azure regions: "
            f"catalog/data/instance-regions.yaml){hint}"
        )
    gcp = [i for i in gpu_ok if i.provider == "gcp"]
    why_gcp = (
        f" ({len(gcp)} GCP type(s) left out: the catalogue has no per-region data for GCP)"
        if gcp
        else ""
    )
    what = ", ".join(sorted(wanted)) or "selected instance type"
    elsewhere = sorted({r for i in gpu_ok for r in table.offered_in(i)})
    if elsewhere:
        help_ = f"regions that do offer it: {', '.join(elsewhere[:6])}"
        help_ += f" (and {len(elsewhere) - 6} more)" if len(elsewhere) > 6 else ""
    elif gcp and len(gcp) == len(gpu_ok):
        help_ = "drop --region to size the GCP types at their catalogued price"
    else:
        help_ = "no catalogued region offers it"
    return [], (
        f"--region {region}: its price map lists no {what}{why_gcp}; {help_}; "
        "choose another --region, or drop --region"
    )


def _ranked(candidates: Sequence[Candidate], *, simulated_first: bool = False) -> list[Candidate]:
    """SLO-meeting first, then by cost, fewer nodes, fewer GPUs, more tokens. The search
    ranks screened and simulated candidates alike (best first); the answer puts the
    simulated ones first (``simulated_first``), so that a screened candidate, whose verdict
    no simulation confirmed, is never the recommendation when the budget ran out."""
    return sorted(
        candidates,
        key=lambda c: (
            not c.meets_slo,
            simulated_first and c.screened,
            c.cost_per_hour is None,
            round(c.cost_per_hour.value, 2) if c.cost_per_hour else 0.0,
            c.instances,  # at equal cost, fewer nodes: fewer to fail, schedule, upgrade
            c.instances * c.instance.gpu_count,
            -c.output_tokens_per_second.value,
        ),
    )


class _Runs:
    """Each distinct replica (GPU, TP, PP, replicas) predicted and simulated once per search:
    instance types of one GPU share the estimate (``size`` keys it by GPU and TP), so they
    share the figures. Simulations count against :data:`SIMULATION_BUDGET`."""

    def __init__(self, req: SizingRequest, constants: ServingConstants) -> None:
        self.req, self.constants = req, constants
        self.sims: dict[tuple[str, int, int, int], SimulatedServing | None] = {}
        self.preds: dict[tuple[str, int, int, int], ServingPrediction] = {}

    @property
    def left(self) -> int:
        return SIMULATION_BUDGET - len(self.sims)

    def _share(self, gpu: GpuModel, est: CapacityEstimate, replicas: int) -> ReplicaShare:
        return ReplicaShare(self.req.arch, gpu, est, self.req.workload, replicas, self.constants)

    @staticmethod
    def _key(gpu: GpuModel, est: CapacityEstimate, replicas: int) -> tuple[str, int, int, int]:
        return (gpu.id, est.tensor_parallel_size, est.pipeline_parallel_size, replicas)

    def predict(self, gpu: GpuModel, est: CapacityEstimate, replicas: int) -> ServingPrediction:
        """The closed form of one of ``replicas`` replicas (the screen)."""
        key = self._key(gpu, est, replicas)
        if key not in self.preds:
            self.preds[key] = self._share(gpu, est, replicas).predict()
        return self.preds[key]

    def simulate(
        self, gpu: GpuModel, est: CapacityEstimate, replicas: int
    ) -> SimulatedServing | None:
        """The simulation of one of ``replicas`` replicas (the verdict)."""
        key = self._key(gpu, est, replicas)
        if key not in self.sims:
            self.sims[key] = self._share(gpu, est, replicas).simulate()
        return self.sims[key]


def _simulate_head(req: SizingRequest, ranked: list[Candidate], runs: _Runs) -> list[Candidate]:
    """Judge the head of the screened ranking by the simulation (module docstring, pass 2):
    until the first :data:`SIMULATED_TOP` candidates are all simulated or the budget is
    spent, take the first one not yet simulated, re-search its replicas on the simulated
    figures and rank again."""
    while True:
        todo = next((c for c in ranked[:SIMULATED_TOP] if c.screened), None)
        if todo is None or runs.left <= 0:
            return _ranked(ranked, simulated_first=True)
        again = _simulated(req, todo, runs)  # never screened, even where no request ran
        ranked = _ranked([again if c is todo else c for c in ranked])


def _simulated(req: SizingRequest, c: Candidate, runs: _Runs) -> Candidate:
    """``c`` judged by the simulation. Its replicas are searched again unless fixed (down
    from the screen's while the simulation still meets the SLOs, up while it misses them;
    galloping, then bisecting): the fewest that meet them, where more replicas never make a
    replica slower. More replicas shorten neither a single request's TPOT nor its prefill:
    the search up stops at a one-request replica, as the screen does."""

    def at(r: int) -> Candidate:
        sim = runs.simulate(c.gpu, c.estimate, r)
        pred = runs.predict(c.gpu, c.estimate, r)
        return _build(req, c.instance, c.gpu, c.estimate, r, pred, sim, screened=False)

    def slo_ok(x: Candidate) -> bool:
        return not _slo_misses(req, x.judged)

    best = at(c.replicas)
    if req.replicas or best.simulated is None:
        return best
    # A screen far off either way (TTFT of prompts arriving in waves) costs a few
    # simulations, not one per replica: gallop (r -/+ 1, 3, 7, ...) to the first count on
    # the other side of the SLOs, then bisect between the two.
    miss: Candidate | None
    found: Candidate | None
    step = 1
    if slo_ok(best):
        miss, found = None, best
        while found.replicas > 1 and runs.left > 0:
            trial = at(max(1, found.replicas - step))
            if not slo_ok(trial):
                miss = trial
                break
            found, step = trial, step * 2
        if miss is None:
            return found
    else:
        miss, found = best, None
        while c.meets_slo and runs.left > 0 and miss.replicas < MAX_REPLICAS:
            if miss.per_replica.running.value <= 1 and not miss.per_replica.saturated:
                break
            trial = at(min(MAX_REPLICAS, miss.replicas + step))
            if slo_ok(trial):
                found = trial
                break
            miss, step = trial, step * 2
        if found is None:
            return miss
    while found.replicas - miss.replicas > 1 and runs.left > 0:
        mid = at((miss.replicas + found.replicas) // 2)
        miss, found = (miss, mid) if slo_ok(mid) else (mid, found)
    return found


def _replica_layout(req: SizingRequest, inst: InstanceType, tp: int) -> tuple[int, int]:
    """(replicas per instance, instances per replica): 0 replicas per instance where one
    replica spans instances (--tp-transport network, whole nodes)."""
    gpus_per_replica = tp * req.pipeline_parallel_size
    per_instance = inst.gpu_count // gpus_per_replica
    nodes_per_replica = 1 if per_instance else -(-gpus_per_replica // inst.gpu_count)
    return per_instance, nodes_per_replica


def _instances(req: SizingRequest, inst: InstanceType, tp: int, replicas: int) -> int:
    per_instance, nodes_per_replica = _replica_layout(req, inst, tp)
    return -(-replicas // per_instance) if per_instance else replicas * nodes_per_replica


def _candidate(
    req: SizingRequest,
    inst: InstanceType,
    gpu: GpuModel,
    est: CapacityEstimate,
    runs: _Runs,
) -> Candidate:
    """The screen (module docstring, pass 1): the fewest replicas whose closed-form
    prediction meets the SLOs (or the fixed replicas)."""
    tries = [req.replicas] if req.replicas else list(range(1, MAX_REPLICAS + 1))
    best: tuple[int, ServingPrediction] | None = None
    for r in tries:
        pred = runs.predict(gpu, est, r)
        slo_missed = _slo_misses(req, judged(pred, None))
        if best is None or not slo_missed:
            best = (r, pred)
        if not slo_missed:
            break
        # More replicas cannot shorten TPOT below one sequence's step or TTFT below one
        # prompt's prefill: stop once a single-request replica still misses.
        if pred.running.value <= 1 and not pred.saturated:
            break
    assert best is not None
    return _build(req, inst, gpu, est, best[0], best[1], None, screened=True)


def _build(
    req: SizingRequest,
    inst: InstanceType,
    gpu: GpuModel,
    est: CapacityEstimate,
    r: int,
    pred: ServingPrediction,
    sim: SimulatedServing | None,
    *,
    screened: bool,
) -> Candidate:
    """The candidate of ``r`` replicas of ``est`` on ``inst``, judged by ``sim`` where given
    (else the closed form's ``pred``: the screen's figures, or a simulation in which no
    request completed), with its cost and the SLOs it misses."""
    tp = est.tensor_parallel_size
    gpus_per_replica = tp * req.pipeline_parallel_size
    per_instance, nodes_per_replica = _replica_layout(req, inst, tp)
    price = instance_price(inst, req.prices, req.region)
    instances = _instances(req, inst, tp, r)
    cost = instances * price[0] if price else None
    figures = judged(pred, sim)
    misses = _misses(req, figures, cost)
    if sim is None and not screened:
        misses.append(
            "no simulated request completes (each waits for KV blocks the cache never frees)"
        )
    layout = (
        f"{per_instance} replica(s) of {gpus_per_replica} GPU(s) per instance"
        if per_instance
        else f"{nodes_per_replica} instances per replica of {gpus_per_replica} GPU(s)"
    )
    one = figures.output_tokens_per_second.value
    tok = one * r
    tok_t = Term(tok, f"{r} replicas x {one:,.1f} tok/s ({figures.model})")
    rps = Term(tok / req.workload.output_tokens, f"{tok:,.1f} tok/s / {req.workload.output_tokens}")
    cost_t = per_m = None
    if price is not None and cost is not None:
        cost_t = Term(
            cost,
            f"{instances} x {inst.name} at ${price[0]:g}/h ({price[1]}); {layout}",
        )
        per_m = Term(
            cost / (tok * 3600) * 1e6,
            f"${cost:,.2f}/h / ({tok:,.1f} tok/s x 3600) x 1e6",
        )
    elif req.max_cost_per_hour is not None:
        misses = [*misses, no_price_reason(inst)]
    if math.isinf(figures.ttft_seconds.value) and not any(
        m.startswith("saturated") for m in misses
    ):
        misses = [*misses, "saturated"]
    return Candidate(
        instance=inst,
        gpu=gpu,
        replicas=r,
        instances=instances,
        estimate=est,
        per_replica=pred,
        judged=figures,
        simulated=sim,
        screened=screened,
        output_tokens_per_second=tok_t,
        requests_per_second=rps,
        cost_per_hour=cost_t,
        cost_per_million_output_tokens=per_m,
        misses=tuple(misses),
    )
