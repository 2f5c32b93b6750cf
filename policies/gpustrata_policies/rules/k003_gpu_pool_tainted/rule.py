"""K003 gpu-pool-tainted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, judged
from gpustrata_policies.view.nodes import gpu_pools, pool_label
from gpustrata_policies.view.objects import K8sObject


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A GPU pool carries a NoSchedule (or NoExecute) taint."""
    if obj.kind != "GpuNodePool":
        return
    for pool in gpu_pools(ctx):
        if pool.obj is not obj or pool.hard_taints:
            continue
        soft = tuple(t["key"] for t in pool.taints if t["effect"] == "PreferNoSchedule")
        yield Verdict(
            "violation",
            "only-soft-taints" if soft else "no-taint",
            values={"pool": pool_label(pool), "soft_taints": soft},
            path=("spec", "taints"),
        )


def message(verdict: Verdict) -> str:
    """The prose of a K003 verdict."""
    v = verdict.values
    soft = cast(tuple[str, ...], v["soft_taints"])
    has = (
        f"only PreferNoSchedule taints ({', '.join(soft)}), which the scheduler may ignore"
        if soft
        else "no taint"
    )
    return (
        f"GPU {v['pool']} has {has}; Pods that request no GPU can be scheduled onto its nodes "
        "and take the CPU and memory the GPU Pods need"
    )


RULE = folder_rule(__name__, judged(judge, message))
