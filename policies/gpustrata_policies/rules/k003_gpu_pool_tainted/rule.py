"""K003 gpu-pool-tainted."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.nodes import gpu_pools, pool_label
from gpustrata_policies.view.objects import K8sObject


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """A GPU pool carries a NoSchedule (or NoExecute) taint."""
    if obj.kind != "GpuNodePool":
        return
    for pool in gpu_pools(ctx):
        if pool.obj is not obj or pool.hard_taints:
            continue
        soft = [t for t in pool.taints if t["effect"] == "PreferNoSchedule"]
        has = (
            f"only PreferNoSchedule taints ({', '.join(t['key'] for t in soft)}), which the "
            "scheduler may ignore"
            if soft
            else "no taint"
        )
        yield ctx.violation(
            obj,
            f"GPU {pool_label(pool)} has {has}; Pods that request no GPU can be scheduled "
            "onto its nodes and take the CPU and memory the GPU Pods need",
            ("spec", "taints"),
        )


RULE = folder_rule(__name__, check)
