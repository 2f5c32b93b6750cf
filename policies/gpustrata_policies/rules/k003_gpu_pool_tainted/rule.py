"""K003 gpu-pool-tainted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
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


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K003 message quotes beyond its values: the soft taints' keys."""
    return {"soft": ", ".join(cast(tuple[str, ...], verdict.values["soft_taints"]))}


RULE = folder_rule(__name__, worded(judge, fields))
