"""K010 one-autoscaler-per-workload."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import cast

from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import autoscaler_target, object_index
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.objects import K8sObject, dig

Key = tuple[str, str, str]


def _autoscalers(ctx: RuleContext) -> dict[Key, list[K8sObject]]:
    def build() -> dict[Key, list[K8sObject]]:
        index: dict[Key, list[K8sObject]] = defaultdict(list)
        for o in ctx.objects:
            target = autoscaler_target(o)
            if target:
                index[target].append(o)
        return index

    result: dict[Key, list[K8sObject]] = ctx.memo("autoscalers_by_target", build)
    return result


def in_tree_autoscaling(target: K8sObject) -> bool:
    """Is the KubeRay in-tree (Ray) autoscaler on for a RayCluster/RayService/RayJob?"""
    base = {
        "RayCluster": ("spec",),
        "RayService": ("spec", "rayClusterConfig"),
        "RayJob": ("spec", "rayClusterSpec"),
    }.get(target.kind)
    if base is None:
        return False
    value = known(dig(target.raw, *base, "enableInTreeAutoscaling"), "enableInTreeAutoscaling")
    return value is True


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """One replica writer per workload."""
    key = autoscaler_target(obj)
    if key is None:
        return
    subject = {"autoscaler": f"{obj.kind} {obj.name}", "target": f"{key[0]}/{key[2]}"}
    others = tuple(f"{o.kind} {o.name}" for o in _autoscalers(ctx).get(key, []) if o is not obj)
    if others:
        values: dict[str, Value] = {**subject, "others": others}
        yield Verdict("violation", "several-autoscalers", values, path=("spec", "scaleTargetRef"))
    target = object_index(ctx).get(key)
    if target is not None and in_tree_autoscaling(target):
        yield Verdict(
            "violation", "ray-in-tree-autoscaler", subject, path=("spec", "scaleTargetRef")
        )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K010 message quotes beyond its values: the other autoscalers, three named."""
    others = cast(tuple[str, ...], verdict.values.get("others", ()))
    names = ", ".join(others[:3])
    if len(others) > 3:
        names += f" (and {len(others) - 3} more)"
    return {"names": names}


RULE = folder_rule(__name__, worded(judge, fields))
