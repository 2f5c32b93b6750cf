"""R003 placement-fits-workers."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from gpustrata.core.unknown import UnknownInput, handled_unknowns
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, judged
from gpustrata_policies.view.kuberay import (
    RAY_SERVE_LLM_PG_PR,
    EnginePlacement,
    autoscaling_enabled,
    engine_placements,
    fmt_gpus,
)
from gpustrata_policies.view.nodes import gpu_pools, gpu_requests, shared_gpus, targeted_pools
from gpustrata_policies.view.objects import K8sObject, PodRef, dig
from gpustrata_policies.view.ray import gpu_worker_groups
from gpustrata_policies.view.vllm_args import SERVE_CONFIG_TYPE_SOURCE, serve_config

_PATH = ("spec", "serveConfigV2")
UNBOUNDED = 100_000
"""Worker groups with more max replicas than this are treated as unbounded."""


@dataclass(frozen=True, slots=True)
class _Group:
    label: str
    gpus: Fraction
    pods: int
    capped: str = ""
    """Why ``pods`` is below the group's max replicas (its pool's maxSize), if it is."""


def _one_replica(engine: EnginePlacement, strategy: str, groups: list[_Group]) -> str | None:
    """Why one replica of the engine cannot be placed, or ``None`` when it can."""
    largest = max(groups, key=lambda g: g.gpus)
    need = engine.gpus
    bundle_max = engine.largest_bundle_gpus
    layout = f"{len(engine.bundles)} bundles, {fmt_gpus(need)} GPU(s)"
    if strategy == "STRICT_PACK":
        if need > largest.gpus:
            return (
                f"needs {fmt_gpus(need)} GPU(s) on one Ray node (placement group of {layout}, "
                f"STRICT_PACK) but the largest worker Pod has {fmt_gpus(largest.gpus)} "
                f"({largest.label}); Ray cannot create the placement group (INFEASIBLE) and "
                "the engine never starts"
            )
        return None
    if bundle_max > largest.gpus:
        return (
            f"has a placement bundle of {fmt_gpus(bundle_max)} GPUs but the largest worker "
            f"Pod has {fmt_gpus(largest.gpus)} ({largest.label}); a bundle never spans nodes, "
            "so the placement group is INFEASIBLE"
        )
    if strategy == "STRICT_SPREAD":
        nodes = sum(g.pods for g in groups if g.gpus >= bundle_max)
        if nodes < len(engine.bundles):
            return (
                f"needs {len(engine.bundles)} distinct Ray nodes (STRICT_SPREAD) but the worker "
                f"groups have at most {nodes} Pods with {fmt_gpus(bundle_max)} GPU(s)"
            )
        return None
    total = sum((g.gpus * g.pods for g in groups), Fraction(0))
    if need > total:
        return (
            f"needs {fmt_gpus(need)} GPU(s) ({layout}, {strategy}) but the worker groups have "
            f"{fmt_gpus(total)} at their max replicas"
        )
    return None


def _pack(
    replicas: list[tuple[EnginePlacement, str]], groups: list[_Group]
) -> tuple[EnginePlacement, int] | None:
    """First-fit-decreasing placement of every replica on the worker Pods at max replicas.

    Returns the first engine whose replicas do not all fit and how many of them did.
    """
    # GPUs in whole units of the smallest fraction in play: the same comparisons on ints
    # (Fraction's are ~30x slower, and a large cluster tries thousands of free slots).
    # Each engine once: *replicas* repeats it max_replicas times.
    engines = {id(e): e for e, _ in replicas}
    sizes = [g.gpus for g in groups]
    for e in engines.values():
        sizes.append(e.gpus)
        sizes.extend(e.bundle_gpus)
    unit = math.lcm(*(x.denominator for x in sizes))

    def whole(x: Fraction) -> int:
        # x * unit, exactly: unit is a multiple of x's denominator (no Fraction made).
        return x.numerator * (unit // x.denominator)

    free = []
    for g in groups:
        free += [whole(g.gpus)] * g.pods
    placed: dict[int, int] = {}
    # Each engine's sizes, read once (not once per free slot tried).
    need = {key: whole(e.gpus) for key, e in engines.items()}
    bundles = {key: [whole(b) for b in e.bundle_gpus] for key, e in engines.items()}
    for engine, strategy in sorted(replicas, key=lambda r: need[id(r[0])], reverse=True):
        ok = True
        if strategy == "STRICT_PACK":
            gpus = need[id(engine)]
            for i, room in enumerate(free):
                if room >= gpus:
                    free[i] -= gpus
                    break
            else:
                ok = False
        else:
            # In place: a replica that does not fit ends the packing (no rollback needed).
            spread = strategy == "STRICT_SPREAD"
            used: set[int] = set()
            for gpu in bundles[id(engine)]:
                for i, room in enumerate(free):
                    if room >= gpu and not (spread and i in used):
                        free[i] -= gpu
                        used.add(i)
                        break
                else:
                    ok = False
                    break
        if not ok:
            return engine, placed.get(id(engine), 0)
        placed[id(engine)] = placed.get(id(engine), 0) + 1
    return None


def _worker_groups(ctx: RuleContext, obj: K8sObject, autoscaling: bool) -> list[_Group] | str:
    """The GPU worker groups at their max replicas (capped by their pool), or why not read."""
    groups: list[_Group] = []
    for found in gpu_worker_groups(ctx, obj):
        if isinstance(found, str):
            return found
        group, gpus = found
        _, _, most = group.replica_bounds(autoscaling)
        cap = _pool_cap(ctx, group.pod)
        if cap is not None and cap[0] < most:
            groups.append(_Group(group.label, gpus, cap[0], f"not {most}: {cap[1]}"))
        else:
            groups.append(_Group(group.label, gpus, most))
    return groups


def _one_replica_verdicts(
    gpu_engines: list[EnginePlacement], groups: list[_Group], placeable: list[EnginePlacement]
) -> Iterator[Verdict]:
    """Each engine's one replica against the worker layout; *placeable* gets those that fit."""
    for engine in gpu_engines:
        verdicts = {s: _one_replica(engine, s, groups) for s in engine.strategies}
        if len({v is None for v in verdicts.values()}) > 1:
            yield Verdict(
                "not_evaluated",
                "default-strategy-decides-one-replica",
                values={"engine": engine.where, "strategies": engine.strategies},
                sources=(RAY_SERVE_LLM_PG_PR,),
            )
            continue
        problem = next(iter(verdicts.values()))
        if problem is not None:
            yield Verdict(
                "violation",
                "one-replica-does-not-fit",
                values={
                    "engine": engine.where,
                    "gpus": engine.gpus,
                    "strategy": engine.strategies[0],
                    "explicit": engine.explicit,
                    "problem": problem,
                },
                thresholds={"largest_worker_gpus": max(g.gpus for g in groups)},
                path=_PATH,
            )
            continue
        placeable.append(engine)


def _replicas_verdict(
    placeable: list[EnginePlacement], groups: list[_Group], autoscaling: bool
) -> Iterator[Verdict]:
    """All replicas of every placeable engine packed on the worker Pods at max replicas."""
    if not placeable or any(g.pods > UNBOUNDED for g in groups):
        return
    # The replicas of every engine on the cluster share its worker Pods.
    outcomes = [_pack(choice, groups) for choice in _strategy_choices(placeable)]
    if len({o is None for o in outcomes}) > 1:
        yield Verdict(
            "not_evaluated", "default-strategy-decides-replicas", sources=(RAY_SERVE_LLM_PG_PR,)
        )
        return
    failure = outcomes[0]
    if failure is None:
        return
    engine, fitted = failure
    yield Verdict(
        "violation",
        "replicas-do-not-fit",
        values={
            "engine": engine.where,
            "max_replicas": engine.max_replicas,
            "replicas_why": engine.replicas_why,
            "gpus": engine.gpus,
            "autoscaling": autoscaling,
            "groups": tuple((g.label, g.pods, g.gpus, g.capped) for g in groups),
        },
        thresholds={"fitted": fitted},
        path=_PATH,
    )


def _ray_service(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A RayService's engines: placement groups fit a worker layout, all replicas fit at max."""
    cfg = serve_config(obj)
    if cfg is not None and cfg.not_a_string:
        yield Verdict(
            "violation",
            "serve-config-not-a-string",
            values={"type": cfg.not_a_string},
            sources=(SERVE_CONFIG_TYPE_SOURCE,),
            path=_PATH,
        )
        return
    engines, unreadable = engine_placements(obj)
    autoscaling = autoscaling_enabled(obj)
    groups = _worker_groups(ctx, obj, autoscaling)
    if isinstance(groups, str):
        yield Verdict("not_evaluated", "worker-groups-unread", values={"reason": groups})
        return
    gpu_engines = [e for e in engines if e.gpus > 0]
    if groups:
        for reason in unreadable:
            yield Verdict("not_evaluated", "placement-unread", values={"reason": reason})
    if not gpu_engines:
        return
    if not groups:
        first = gpu_engines[0]
        yield Verdict(
            "violation",
            "no-gpu-worker-group",
            values={"engine": first.where, "gpus": first.gpus},
            path=_PATH,
        )
        return
    placeable: list[EnginePlacement] = []
    yield from _one_replica_verdicts(gpu_engines, groups, placeable)
    yield from _replicas_verdict(placeable, groups, autoscaling)


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Every engine's placement group fits one worker layout, and all replicas fit at max."""
    if obj.kind == "LeaderWorkerSet":
        yield from _leader_worker_groups(ctx, obj)
    elif obj.kind == "RayService":
        yield from _ray_service(ctx, obj)


def _layout(groups: tuple[tuple[str, int, Fraction, str], ...]) -> str:
    return "; ".join(
        f"{label}: {pods} Pods x {fmt_gpus(gpus)} GPUs" + (f" ({capped})" if capped else "")
        for label, pods, gpus, capped in groups
    )


def message(verdict: Verdict) -> str:
    """The prose of an R003 verdict."""
    v, reason = verdict.values, verdict.reason
    if reason == "serve-config-not-a-string":
        return (
            f"spec.serveConfigV2 is {v['type']}, not a string: KubeRay's RayService "
            f"CRD declares it a string ({verdict.sources[0]}), so the API server rejects "
            "the object and no engine is placed; write the Serve config as a YAML block "
            "string (serveConfigV2: |)"
        )
    if reason == "worker-groups-unread":
        return str(v["reason"])
    if reason == "placement-unread":
        return f"placement of {v['reason']}"
    if reason == "no-gpu-worker-group":
        return (
            f"{v['engine']} needs {fmt_gpus(cast(Fraction, v['gpus']))} GPU(s) but no worker "
            "group advertises GPUs; its placement group can never be created"
        )
    if reason == "default-strategy-decides-one-replica":
        return (
            f"{v['engine']} sets no placement_group_config; Ray Serve LLM's default "
            f"strategy changed from STRICT_PACK to PACK ({verdict.sources[0]}) and the "
            "engine fits only one of them"
        )
    if reason == "one-replica-does-not-fit":
        default = "" if v["explicit"] else f" (Ray Serve LLM default {v['strategy']})"
        return f"{v['engine']}{default} {v['problem']}"
    if reason == "default-strategy-decides-replicas":
        return (
            "whether every replica fits depends on Ray Serve LLM's default placement strategy "
            f"({verdict.sources[0]}); set placement_group_config.strategy"
        )
    if reason == "lws-exceeds-pool":
        pool_max = verdict.thresholds["pool_max"]
        return (
            f"LeaderWorkerSet {v['name']} runs {v['replicas']} group(s) of size {v['size']} = "
            f"{v['pods']} Pods, but {v['pool']}: {cast(int, v['pods']) - cast(int, pool_max)} "
            "Pod(s) stay Pending and a group whose Pods do not all run never starts its engine"
        )
    groups = cast(tuple[tuple[str, int, Fraction, str], ...], v["groups"])
    what = "maxReplicas" if v["autoscaling"] else "replicas (in-tree autoscaling is off)"
    if any(capped for *_, capped in groups):
        what += " and their pools' maxSize"
    return (
        f"{v['engine']} runs up to {v['max_replicas']} replicas of "
        f"{fmt_gpus(cast(Fraction, v['gpus']))} GPUs ({v['replicas_why']}) but only "
        f"{verdict.thresholds['fitted']} fit on the worker Pods at their {what} "
        f"({_layout(groups)}); the other replicas stay pending"
    )


def _leader_worker_groups(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A LeaderWorkerSet's groups (``replicas`` x ``size`` Pods: a multi-node engine's Ray
    cluster or torch.distributed group) fit the one pool their Pods target at its maxSize;
    a group whose last Pods find no node never starts its engine."""
    # dig: a spec or template unknown during a preview reads as UNKNOWN, never raises
    size = dig(obj.raw, "spec", "leaderWorkerTemplate", "size")
    replicas = dig(obj.raw, "spec", "replicas")
    size = 1 if size is None else size
    replicas = 1 if replicas is None else replicas
    if not isinstance(size, int) or not isinstance(replicas, int) or size < 2 or replicas < 1:
        return
    pods = obj.pods()
    caps = [_pool_cap(ctx, pod) for pod in pods]
    requests = {tuple(sorted(gpu_requests(p, ctx.config.gpu_resources).items())) for p in pods}
    if not caps or any(c is None for c in caps) or len({c for c in caps}) != 1:
        return  # no single described pool, or leader and workers differ: not certain
    if len(requests) != 1:
        return
    cap = caps[0]
    assert cap is not None
    total = replicas * size
    if total <= cap[0]:
        return
    yield Verdict(
        "violation",
        "lws-exceeds-pool",
        values={
            "name": obj.name,
            "replicas": replicas,
            "size": size,
            "pods": total,
            "pool": cap[1],
        },
        thresholds={"pool_max": cap[0]},
        path=("spec", "replicas"),
    )


def _pool_cap(ctx: RuleContext, pod: PodRef) -> tuple[int, str] | None:
    """The most worker Pods like *pod* the one described pool it targets holds at its
    maxSize, with the working. ``None`` when that is not known for certain: no single
    pool with a size and GPU count, GPUs other than whole ``nvidia.com/gpu``, a node that
    may advertise shared GPUs (MIG, time-slicing, MPS), or a Pod that fits no node (K005
    reports that)."""
    pools = gpu_pools(ctx)
    matched = targeted_pools(pod, pools) if pools else []
    if len(matched) != 1:
        return None
    pool = matched[0]
    requests = gpu_requests(pod, ctx.config.gpu_resources)
    if pool.max_size is None or not pool.gpu_count or set(requests) != {"nvidia.com/gpu"}:
        return None
    try:
        with handled_unknowns():
            shared = shared_gpus(ctx, pool)
    except UnknownInput:
        return None  # sharing unknown during preview: no cap rather than a guess
    if shared is not None:
        return None
    per_node = math.floor(Fraction(pool.gpu_count) / requests["nvidia.com/gpu"])
    if per_node < 1:
        return None
    most = pool.max_size * per_node
    return most, (
        f"pool {pool.name} holds {per_node} per {pool.gpu_count}-GPU node x maxSize "
        f"{pool.max_size} = {most}"
    )


def _strategy_choices(engines: list[EnginePlacement]) -> list[list[tuple[EnginePlacement, str]]]:
    """Replica lists to pack, one per reading of Ray Serve LLM's default strategy (engines
    with a written strategy use it in every reading)."""
    candidates = sorted({s for e in engines for s in e.strategies}) or ["PACK"]
    out = []
    for pick in candidates:
        chosen: list[tuple[EnginePlacement, str]] = []
        for e in engines:
            strategy = pick if pick in e.strategies else e.strategies[0]
            chosen.extend([(e, strategy)] * e.max_replicas)
        out.append(chosen)
    return out


RULE = folder_rule(__name__, judged(judge, message))
