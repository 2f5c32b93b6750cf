"""K008 gpu-rollout-fits."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, cast

from gpustrata.core.quantity import exact_sum
from gpustrata.core.unknown import UNKNOWN, UnknownInput, handled_unknowns
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import autoscalers_by_scale_target
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.nodes import fmt_count, gpu_pools, gpu_requests, targeted_pools
from gpustrata_policies.view.objects import K8sObject, PodRef, as_map, dig
from gpustrata_policies.view.pools import GpuPool

DEPLOYMENT_STRATEGY = (
    "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#strategy"
)


def _int(value: Any, default: int) -> int | None:
    if value is None:
        return default
    if value is UNKNOWN:
        raise UnknownInput("replicas")
    try:
        return int(str(value))
    except ValueError:
        return None


@functools.lru_cache(maxsize=256)
def _percent(text: str) -> Fraction | None:
    """``25`` of ``25%`` as the fraction 1/4 (a cluster writes the same few), or ``None``."""
    try:
        return Fraction(text) / 100
    except ValueError:
        return None


def _resolve(value: Any, replicas: int, round_up: bool) -> int | None:
    """maxSurge (rounded up) / maxUnavailable (rounded down) of a rolling update."""
    if value is UNKNOWN:
        raise UnknownInput("rollingUpdate")
    text = str(value).strip()
    if text.endswith("%"):
        pct = _percent(text[:-1])
        if pct is None:
            return None
        # pct * replicas rounded, on ints: the same exact value, no Fraction made per call
        scaled = pct.numerator * replicas
        return -(-scaled // pct.denominator) if round_up else scaled // pct.denominator
    try:
        return int(text)
    except ValueError:
        return None


def _autoscaled_max(ctx: RuleContext, obj: K8sObject) -> int | None:
    """The largest replica count an HPA or ScaledObject may give *obj* (``None``: none).
    Raises UnknownInput when an autoscaler that may target *obj* is unknown at preview."""
    Target = tuple[str, str, str]

    def build() -> tuple[dict[Target, int], dict[Target | None, str]]:
        # An unknown value spoils only the workloads it may concern (None: any of them).
        by_target, unknown_target = autoscalers_by_scale_target(ctx)
        most: dict[Target, int] = {}
        unknown: dict[Target | None, str] = {}
        if unknown_target is not None:
            unknown[None] = unknown_target
        for target, scalers in by_target.items():
            for other in scalers:
                key = (
                    "maxReplicas" if other.kind == "HorizontalPodAutoscaler" else "maxReplicaCount"
                )
                default = 100 if key == "maxReplicaCount" else 0
                try:
                    with handled_unknowns():
                        value = _int(dig(other.raw, "spec", key), default)
                except UnknownInput as exc:
                    unknown.setdefault(target, exc.what)
                    continue
                if value:
                    most[target] = max(most.get(target, 0), value)
        return most, unknown

    found: tuple[dict[Target, int], dict[Target | None, str]] = ctx.memo(
        "k008_max_by_target", build
    )
    most, unknown = found
    target = (obj.kind, obj.namespace, obj.name)
    reason = unknown.get(target) or unknown.get(None)
    if reason is not None:
        raise UnknownInput(reason)
    return most.get(target)


def _max_pods(ctx: RuleContext, obj: K8sObject, pod: PodRef) -> int | None:
    """The most Pods of this template the workload runs (autoscalers included)."""
    if pod.is_ray:
        group = pod.ray_group or {}
        auto = dig(obj.raw, "spec", "enableInTreeAutoscaling") or dig(
            obj.raw, "spec", "rayClusterConfig", "enableInTreeAutoscaling"
        )
        if pod.role == "head":
            return 1
        key = "maxReplicas" if auto is True else "replicas"
        return _int(group.get(key), 1)
    if obj.kind == "Pod":
        return 1
    replicas = _int(pod.replicas, 1)
    if replicas is None:
        return None
    if obj.kind == "LeaderWorkerSet":
        size = _int(dig(obj.raw, "spec", "leaderWorkerTemplate", "size"), 1) or 1
        replicas *= size if pod.role == "worker" else 1
    auto = _autoscaled_max(ctx, obj)
    return max(replicas, auto) if auto else replicas


def _demand(
    ctx: RuleContext, pools: list[GpuPool], extra: tuple[str, ...]
) -> tuple[dict[str, int], dict[str, str]]:
    """GPUs every GPU workload can hold per pool name, at its maximum size; and per pool
    name, why some workload's share is unknown during a preview. A copy of a namespace
    takes its first copy's share (:meth:`~gpustrata_policies.index.EvaluationIndex.copies`)."""

    def build() -> tuple[dict[str, int], dict[str, str]]:
        used: dict[str, int] = {}
        unknown: dict[str, str] = {}
        index = ctx.index
        for other in ctx.objects:
            if index.is_copy(other):
                continue
            times = 1 + len(index.copies(other))
            try:
                for pod in other.pods():
                    gpus = exact_sum(gpu_requests(pod, extra).values())
                    if not gpus:
                        continue
                    hits = targeted_pools(pod, pools)
                    if len(hits) != 1:
                        continue  # spread over several pools: not attributed
                    try:
                        with handled_unknowns():
                            count = _max_pods(ctx, other, pod)
                    except UnknownInput as exc:
                        unknown.setdefault(hits[0].name, f"{other.resource}: {exc.what}")
                        continue
                    if count is None:
                        continue
                    share = math.ceil(gpus) * count * times
                    used[hits[0].name] = used.get(hits[0].name, 0) + share
            except UnknownInput:
                continue  # its Pods are unknown: the subject's own check reports that
        return used, unknown

    demand: tuple[dict[str, int], dict[str, str]] = ctx.memo("k008_gpu_demand", build)
    return demand


def _rollout(obj: K8sObject) -> tuple[int, int, bool] | None:
    """(replicas, maxSurge Pods, rollingUpdate unset) of a rollout that surges and keeps
    every old Pod; None for Recreate, no surge, old Pods making room, or unreadable."""
    strategy = as_map(dig(obj.raw, "spec", "strategy"), "spec.strategy")
    if strategy.get("type") == "Recreate":
        return None
    replicas = _int(dig(obj.raw, "spec", "replicas"), 1)
    rolling = as_map(strategy.get("rollingUpdate"), "rollingUpdate")
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas or 1, True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas or 1, False)
    if replicas is None or surge is None or unavailable is None:
        return None  # unreadable: the API server rejects it
    if surge == 0 or unavailable > 0:
        return None  # no surge, or old Pods make room
    return replicas, surge, not rolling


def _pod(
    ctx: RuleContext, obj: K8sObject, pod: PodRef, pools: list[GpuPool], extra: tuple[str, ...]
) -> Verdict | None:
    """The verdict on one GPU Pod template's surge against its pools' spare GPUs."""
    gpus = exact_sum(gpu_requests(pod, extra).values())
    if not gpus or not pools:
        return None  # not a GPU Pod, or no pool to measure the surge against
    rollout = _rollout(obj)
    if rollout is None:
        return None
    replicas, surge, defaults = rollout
    targeted = targeted_pools(pod, pools)
    if not targeted:
        return None  # K005 reports a Pod that matches no pool
    sized = [p for p in targeted if p.max_size is not None and p.gpu_count]
    values: dict[str, Value] = {"surge": surge, "pod_gpus": gpus}
    if len(sized) != len(targeted):
        # By identity: a dataclass `in` compares every field of every pool (n^2).
        kept = {id(p) for p in sized}
        values["pools"] = tuple(p.name for p in targeted if id(p) not in kept)
        return Verdict("not_evaluated", "pool-size-unknown", values)
    demand, unknown = _demand(ctx, pools, extra)
    capacity = sum((p.max_size or 0) * (p.gpu_count or 0) for p in sized)
    used = sum(demand.get(p.name, 0) for p in sized)
    need = surge * math.ceil(gpus)
    values |= {"pools": tuple(p.name for p in sized), "capacity": capacity, "held": used}
    if capacity - used >= need:
        reasons = [unknown[p.name] for p in sized if p.name in unknown]
        if reasons:  # it fits without a workload whose size is unknown: undecided
            values["unknown"] = reasons[0]
            return Verdict("not_evaluated", "held-unknown", values)
        return None
    values |= {"name": obj.name, "replicas": replicas, "defaults": defaults}
    return Verdict(
        "violation",
        "surge-exceeds-spare",
        values,
        thresholds={"need": need, "spare": max(capacity - used, 0)},
        sources=(DEPLOYMENT_STRATEGY,),
        path=("spec", "strategy"),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A GPU Deployment's rolling update needs no GPU the pool does not have."""
    if obj.kind != "Deployment":
        return
    extra = ctx.config.gpu_resources
    pools = gpu_pools(ctx)
    for pod in obj.pods():
        found = _pod(ctx, obj, pod, pools, extra)
        if found is not None:
            yield found


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K008 message quotes beyond its values and thresholds: the pools' names, a
    Pod's GPUs, and where the strategy comes from."""
    v = verdict.values
    out = {"names": ", ".join(cast(tuple[str, ...], v["pools"]))}
    if "pod_gpus" in v:
        out["gpus"] = fmt_count(cast(Fraction, v["pod_gpus"]))
    if "defaults" in v:
        out["how"] = (
            "the RollingUpdate defaults maxSurge 25%, maxUnavailable 25%"
            if v["defaults"]
            else "its rollingUpdate"
        )
    return out


RULE = folder_rule(
    __name__, worded(judge, fields), facts={"DEPLOYMENT_STRATEGY": DEPLOYMENT_STRATEGY}
)
