"""R006 upgrade-capacity."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import cast

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, judged
from gpustrata_policies.view.kuberay import autoscaling_enabled, fmt_gpus
from gpustrata_policies.view.nodes import gpu_pools, targeted_pools
from gpustrata_policies.view.objects import K8sObject, as_list, dig
from gpustrata_policies.view.pools import GpuPool
from gpustrata_policies.view.profile import profile_hint
from gpustrata_policies.view.ray import gpu_worker_groups

NEW_CLUSTER = "NewCluster"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
NONE = "None"
DEFAULT_MAX_SURGE_PERCENT = 100  # ClusterUpgradeOptions.maxSurgePercent kubebuilder default


def _zero_downtime_disabled(ctx: RuleContext) -> bool:
    """The operator runs with ENABLE_ZERO_DOWNTIME=false (Helm values env)."""

    def build() -> bool:
        for obj in ctx.objects:
            if obj.kind != "HelmRelease" or dig(obj.raw, "spec", "chart") != "kuberay-operator":
                continue
            for env in as_list(dig(obj.raw, "spec", "values", "env"), "env"):
                if isinstance(env, Mapping) and env.get("name") == "ENABLE_ZERO_DOWNTIME":
                    return str(env.get("value", "")).lower() == "false"
        return False

    disabled: bool = ctx.memo("kuberay_zero_downtime_disabled", build)
    return disabled


def _strategy(ctx: RuleContext, obj: K8sObject) -> tuple[str, bool] | None:
    """(upgrade strategy, whether KubeRay's default) when it starts a second RayCluster."""
    strategy = dig(obj.raw, "spec", "upgradeStrategy", "type")
    if strategy is UNKNOWN:
        raise UnknownInput(f"upgradeStrategy.type of {obj.resource}")
    if strategy is None:
        if _zero_downtime_disabled(ctx):
            return None
        return NEW_CLUSTER, True
    strategy = str(strategy)
    return (strategy, False) if strategy in (NEW_CLUSTER, INCREMENTAL) else None


@dataclass
class _Demand:
    """GPUs of the serving cluster at its max and of the new cluster at its start."""

    active: Fraction = Fraction(0)
    pending: Fraction = Fraction(0)
    groups: list[tuple[str, int, int, Fraction]] = field(default_factory=list)
    """(label, Pods serving, Pods new, GPUs per Pod) of each GPU worker group."""
    pools: dict[str, GpuPool] = field(default_factory=dict)


def _demand(ctx: RuleContext, obj: K8sObject, strategy: str) -> _Demand | Verdict:
    """The worker groups' GPUs and the pools they land in, or why they are not known."""
    autoscaling = autoscaling_enabled(obj)
    pools = gpu_pools(ctx)
    demand = _Demand()
    for found in gpu_worker_groups(ctx, obj):
        if isinstance(found, str):
            return Verdict("not_evaluated", "worker-groups-unread", values={"reason": found})
        group, gpus = found
        initial, low, high = group.replica_bounds(autoscaling)
        start = low if strategy == INCREMENTAL else initial
        demand.active += high * gpus
        demand.pending += start * gpus
        demand.groups.append((group.label, high, start, gpus))
        if not pools:
            return Verdict("not_evaluated", "no-gpu-pools", values={"group": group.label})
        matched = targeted_pools(group.pod, pools)
        if not matched:
            return Verdict("not_evaluated", "no-pool-matches", values={"group": group.label})
        for pool in matched:
            demand.pools[pool.name] = pool
    return demand


def gpu_limit(pool: GpuPool) -> int | None:
    """A Karpenter NodePool's ``spec.limits["nvidia.com/gpu"]`` (None: not stated). Karpenter
    launches no node that would take the pool past it, so it bounds the pool's GPUs even where
    the instance types it allows carry different GPU counts (no one maxSize)."""
    limit = pool.extra.get("gpuLimit")  # view.karpenter reads it from spec.limits
    return limit if isinstance(limit, int) and limit > 0 else None


def _capacity(pools: Iterable[GpuPool]) -> int | Verdict:
    """GPUs of *pools* at their maxSize (a NodePool of mixed GPU counts: its GPU limit), or
    the pool that states neither."""
    capacity = 0
    for pool in pools:
        if pool.max_size is not None and pool.gpu_count:
            capacity += pool.max_size * pool.gpu_count
            continue
        limit = gpu_limit(pool)
        if limit is None:
            return Verdict(
                "not_evaluated",
                "pool-size-unknown",
                values={"pool": pool.name, "node_pool": pool.extra.get("source") == "NodePool"},
            )
        capacity += limit
    return capacity


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """An upgrade that starts a second RayCluster has GPUs for both in the pools' max size."""
    if obj.kind != "RayService":
        return
    found = _strategy(ctx, obj)
    if found is None:
        return
    strategy, defaulted = found
    demand = _demand(ctx, obj, strategy)
    if isinstance(demand, Verdict):
        yield demand
        return
    if not demand.groups:
        return
    capacity = _capacity(demand.pools.values())
    if isinstance(capacity, Verdict):
        yield capacity
        return
    pending, surge_percent = demand.pending, None
    if strategy == INCREMENTAL:
        surge = dig(obj.raw, "spec", "upgradeStrategy", "clusterUpgradeOptions", "maxSurgePercent")
        surge_percent = surge if isinstance(surge, int) else DEFAULT_MAX_SURGE_PERCENT
        pending = max(pending, Fraction(math.ceil(demand.active * surge_percent / 100)))
    need = demand.active + pending
    if need <= capacity:
        return
    yield Verdict(
        "violation",
        "upgrade-exceeds-pools",
        values={
            "strategy": strategy,
            "defaulted": defaulted,
            "serving_gpus": demand.active,
            "new_gpus": pending,
            "need_gpus": need,
            "max_surge_percent": surge_percent,
            "groups": tuple(demand.groups),
            "pools": tuple(
                (p.name, p.max_size, p.gpu_count)
                for p in demand.pools.values()
                if p.max_size and p.gpu_count
            ),
            "limited": tuple(
                (p.name, gpu_limit(p))
                for p in demand.pools.values()
                if not (p.max_size and p.gpu_count)
            ),
        },
        thresholds={"capacity_gpus": capacity},
        path=("spec", "upgradeStrategy") if dig(obj.raw, "spec", "upgradeStrategy") else ("spec",),
    )


def message(verdict: Verdict) -> str:
    """The prose of an R006 verdict."""
    v = verdict.values
    if verdict.reason == "worker-groups-unread":
        return str(v["reason"])
    if verdict.reason == "no-gpu-pools":
        return (
            f"no GpuNodePool is described, so the GPUs {v['group']} can use are unknown "
            + profile_hint("pools")
        )
    if verdict.reason == "no-pool-matches":
        return f"no described GPU pool matches the node selectors of {v['group']}"
    if verdict.reason == "pool-size-unknown":
        how = (
            "(its spec.limits name no nvidia.com/gpu)"
            if v["node_pool"]
            else profile_hint("pools[].max_size and gpus_per_node")
        )
        return f"GPU pool {v['pool']} states no maxSize or GPU count {how}"
    named = "unset, so KubeRay's default NewCluster" if v["defaulted"] else v["strategy"]
    groups = cast(tuple[tuple[str, int, int, Fraction], ...], v["groups"])
    parts = "; ".join(
        f"{label}: {high} Pods serving and {start} new, {fmt_gpus(gpus)} GPUs each"
        for label, high, start, gpus in groups
    )
    pools = cast(tuple[tuple[str, int, int], ...], v["pools"])
    limited = cast(tuple[tuple[str, int], ...], v.get("limited", ()))
    pool_text = ", ".join(
        [f"{name} {size} x {count} GPUs" for name, size, count in pools]
        + [f"{name} at most {limit} GPUs (its nvidia.com/gpu limit)" for name, limit in limited]
    )
    active, pending, need = (
        cast(Fraction, v[key]) for key in ("serving_gpus", "new_gpus", "need_gpus")
    )
    return (
        f"upgradeStrategy {named} brings up a second RayCluster during an upgrade: the serving "
        f"cluster at its max holds {fmt_gpus(active)} GPUs and the new one starts with "
        f"{fmt_gpus(pending)} ({parts}), {fmt_gpus(need)} in all, but the pools "
        f"hold {verdict.thresholds['capacity_gpus']} GPUs at maxSize ({pool_text}); the new "
        "cluster's Pods stay Pending while the serving one is busy and the upgrade stalls"
    )


RULE = folder_rule(__name__, judged(judge, message))
