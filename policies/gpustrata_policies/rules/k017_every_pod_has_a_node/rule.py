"""K017 every-pod-has-a-node."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from gpustrata.core.contract import DERIVED_FROM_ANNOTATION
from gpustrata.core.unknown import is_tracked
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import and_joined
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.kinds import RAY_KINDS
from gpustrata_policies.view.objects import K8sObject, PodRef, dig
from gpustrata_policies.view.pools import GpuPool, pools_of
from gpustrata_policies.view.scheduling import (
    ADDON_KIND,
    PodNeed,
    cluster_autoscaler,
    landing,
    pods_that_must_run,
    room,
)

_NODE_GROUP_TOKEN = "aws:eks/nodeGroup:NodeGroup"
_ADDON_TOKEN = "aws:eks/addon:Addon"
_KINDS = frozenset(
    {
        "Deployment",
        "StatefulSet",
        "Job",
        "CronJob",
        "ReplicaSet",
        "Pod",
        "LeaderWorkerSet",
        "HelmRelease",
        ADDON_KIND,
        *RAY_KINDS,
    }
)


@dataclass(frozen=True)
class _Cluster:
    """What the input says of the cluster's nodes."""

    pools: list[GpuPool]
    tracked: bool
    """A pool holds a value unknown at preview (its reads must be logged per object)."""
    complete: bool
    """Every pool is described: a stack that creates its node groups (or its cluster's
    add-ons), Node objects, or a described pool without GPUs (a system pool)."""
    stack: bool
    """A stack's node groups: a minimum of 0 means no node unless an autoscaler scales it."""
    autoscaler: str | None
    landings: dict[tuple[str, str, str, bool], tuple[list[GpuPool], list[str]]]
    """:func:`landing` by the Pod's tolerations, node selector, affinity and GPUs: the
    Pods of a corpus repeat a few templates (K017 walked every pool for each: 13% of
    the evaluation of 5,000 objects in a profile, issue 35)."""


def _cluster(objects: Sequence[K8sObject]) -> _Cluster:
    pools = pools_of(objects)
    derived = {
        str(dig(o.raw, "metadata", "annotations", DERIVED_FROM_ANNOTATION) or "") for o in objects
    }
    stack = _NODE_GROUP_TOKEN in derived
    complete = (
        stack
        or _ADDON_TOKEN in derived
        or any(p.from_nodes for p in pools)
        or any(not p.has_gpus and p.obj.kind == "GpuNodePool" for p in pools)
    )
    tracked = any(is_tracked(p.obj.raw) for p in pools)
    return _Cluster(pools, tracked, complete, stack, cluster_autoscaler(objects), {})


def _gpu_pod(need: PodNeed, pods: dict[str, PodRef], extra: Sequence[str]) -> bool:
    pod = pods.get(need.name)
    return pod is not None and pod.gpu_count(extra) > 0


def _fix(need: PodNeed, empty: list[str]) -> dict[str, Value]:
    """Which fix suits a Pod with no node (``fix`` case and its figures)."""
    if empty:
        return {"fix": "scale-from-zero", "empty_pools": tuple(empty)}
    if need.chart is not None and need.values_path:
        return {"fix": "chart-values", "chart": need.chart.chart, "values_path": need.values_path}
    if need.owner.kind == ADDON_KIND:
        return {"fix": "addon-values"}
    return {"fix": "system-pool"}


_FIXES: Mapping[str, str] = {
    "scale-from-zero": (
        "give pool(s) {pools} a minimum size of 1, or let an autoscaler that scales from zero "
        "provision them (a Karpenter NodePool, the Cluster Autoscaler)"
    ),
    "chart-values": (
        "set {chart} values {values_path} (and the matching tolerations) to a pool it can run "
        "on, or add an untainted system node group"
    ),
    "addon-values": (
        "add an untainted system node group, or set the add-on's configurationValues "
        "(nodeSelector, tolerations) to a pool it can run on"
    ),
    "system-pool": (
        "add an untainted system node group for Pods without a GPU toleration, or give the "
        "Pod the tolerations and node selector of a pool that exists"
    ),
}
"""The fix of a Pod with no node, by case (``{key}``: a verdict value)."""


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Every Pod that must run has a pool it tolerates, selects and that can have nodes."""
    if obj.kind not in _KINDS:
        return
    cluster: _Cluster = ctx.memo("k017_cluster", lambda: _cluster(ctx.objects))
    if not cluster.pools:
        return  # where the pools are unknown the rule is silent
    needs, unread = pods_that_must_run([obj])
    if unread:
        if cluster.complete:
            why = tuple(u.split(": ", 1)[-1] for u in unread)
            yield Verdict("not_evaluated", "pods-unread", values={"unread": why})
        return
    pods = {f"{obj.resource}{p.where}": p for p in obj.pods()}
    failing = yield from _landings(ctx, obj, cluster, needs, pods)
    for group in failing.values():
        first = group[0][0]
        pod = pods.get(first.name)
        yield Verdict(
            "violation",
            "no-node",
            values={
                "pods": tuple(n.name for n, _, _ in group),
                "why": group[0][1],
                "release": obj.kind in {"HelmRelease", ADDON_KIND},
                **group[0][2],
            },
            path=(*pod.path, "tolerations") if pod is not None else ("spec",),
        )


_Failing = dict[tuple[str, str], list[tuple[PodNeed, str, dict[str, Value]]]]


def _landings(
    ctx: RuleContext,
    obj: K8sObject,
    cluster: _Cluster,
    needs: Sequence[PodNeed],
    pods: dict[str, PodRef],
) -> Generator[Verdict, None, _Failing]:
    """The verdicts of Pods that land short of room; returns the Pods that land nowhere,
    grouped by reason and fix (Pods of one owner that fail alike are one finding)."""
    scale_from_zero = not cluster.stack or cluster.autoscaler is not None
    extra = ctx.config.gpu_resources
    failing: _Failing = {}
    # Without an unknown value in the object or the pools, a landing is a function of
    # the Pod's placement; with one, each object's reads are logged as it reads them.
    shared = not cluster.tracked and not is_tracked(obj.raw)
    for need in needs:
        key = (repr(need.tolerations), repr(need.node_selector), repr(need.terms), need.gpus)
        found = cluster.landings.get(key) if shared else None
        if found is None:
            found = landing(need, cluster.pools, scale_from_zero=scale_from_zero)
            if shared:
                cluster.landings[key] = found
        fits, why = found
        short = room(need, fits, scale_from_zero=scale_from_zero) if fits else ""
        if short:
            yield Verdict(
                "violation",
                "too-few-nodes",
                values={"short": short, "pools": tuple(p.name for p in fits)},
                thresholds={"min_nodes": need.distinct_nodes},
                path=("spec",),
            )
            continue
        if fits:
            continue
        empty = [w.split(":", 1)[0].removeprefix("pool ") for w in why if "min size 0" in w]
        if _gpu_pod(need, pods, extra) and not empty:
            continue  # a GPU Pod's taints and selectors are K004's and K005's
        if not empty and not cluster.complete:
            continue  # other nodes (a system pool) may exist that the input does not show
        fix = _fix(need, empty)
        reason = "; ".join(why)
        failing.setdefault((reason, _fix_text(fix)), []).append((need, reason, fix))
    return failing


def _fix_text(v: Mapping[str, Value]) -> str:
    pools = ", ".join(cast(tuple[str, ...], v.get("empty_pools", ())))
    return _FIXES[str(v["fix"])].format_map({**v, "pools": pools})


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K017 message quotes beyond its values: the Pods without a node and their
    fix, the pools too small, and what could not be read."""
    v = verdict.values
    if verdict.reason == "pods-unread":
        return {"unread_list": "; ".join(cast(tuple[str, ...], v["unread"]))}
    if verdict.reason == "too-few-nodes":
        return {"pool_list": ", ".join(cast(tuple[str, ...], v["pools"]))}
    names = cast(tuple[str, ...], v["pods"])
    if len(names) == 1:
        who = f"{names[0]} has"
    else:  # the chart's Pods: "HelmRelease x: a, b and c have"
        owner = names[0].rsplit(": ", 1)[0]
        who = f"{owner}: {and_joined([n.rsplit(': ', 1)[-1] for n in names])} have"
    wait = ", and the release's wait (Helm --wait) or the add-on's creation fails"
    return {
        "who": who,
        "stays": "they stay" if len(names) > 1 else "it stays",
        "release_wait": wait if v["release"] else "",
        "fix_text": _fix_text(v),
    }


RULE = folder_rule(__name__, worded(judge, fields))
