"""R001 ray-gpus-match-container."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.kuberay import fmt_gpus as format_number
from gpustrata_policies.view.kuberay import ray_groups
from gpustrata_policies.view.objects import K8sObject


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A worker group advertises to Ray exactly the GPUs its Ray container gets."""
    extra = ctx.config.gpu_resources
    for group in ray_groups(obj):
        if group.is_head:
            continue  # R002
        try:
            advertised, where = group.advertised_gpus()
        except ValueError as exc:
            values = {"group": group.label, "error": str(exc)}
            yield Verdict("not_evaluated", "num-gpus-unreadable", values=values)
            continue
        container = group.container
        if container is None:
            continue
        path = (*group.path, "rayStartParams")
        if advertised is None:
            claimed = container.claimed_gpus()
            if claimed:  # KubeRay reads limits, not DRA claims: Ray is told 0 GPUs
                yield Verdict(
                    "violation",
                    "dra-gpus-unadvertised",
                    values={"group": group.label, "container": container.name, "claimed": claimed},
                    path=path,
                )
            continue  # KubeRay sets num-gpus from the Ray container's GPU limit
        limit = group.container_gpus(extra)
        if advertised == limit:
            continue
        yield Verdict(
            "violation",
            "num-gpus-mismatch",
            values={
                "group": group.label,
                "advertised": advertised,
                "where": where,
                "container": container.name,
            },
            thresholds={"limit": limit},
            path=path,
        )


def _effect(advertised: Fraction, limit: Fraction) -> str:
    """What a num-gpus other than the container's GPU limit does."""
    if limit == 0:
        return (
            "Ray schedules GPU engine workers onto Pods that have no GPU, and CUDA fails "
            "when they start"
        )
    if advertised > limit:
        return (
            f"Ray places {format_number(advertised)} GPU workers on each Pod but only "
            f"{format_number(limit)} GPU(s) exist there; the extra workers fail to start"
        )
    return (
        f"{format_number(limit - advertised)} GPU(s) of each Pod stay idle, and "
        "placement groups sized to the Pod do not fit"
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an R001 message quotes beyond its values: the GPU counts formatted, and what
    the mismatch does."""
    v = verdict.values
    if verdict.reason == "dra-gpus-unadvertised":
        return {"claimed": format_number(cast(Fraction, v["claimed"]))}
    if verdict.reason != "num-gpus-mismatch":
        return {}
    advertised, limit = cast(Fraction, v["advertised"]), cast(Fraction, verdict.thresholds["limit"])
    return {
        "advertised": format_number(advertised),
        "limit": format_number(limit),
        "effect": _effect(advertised, limit),
    }


RULE = folder_rule(__name__, worded(judge, fields))
