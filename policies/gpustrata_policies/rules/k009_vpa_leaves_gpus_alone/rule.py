"""K009 vpa-leaves-gpus-alone."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import cast

from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import object_index, scale_target
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.objects import K8sObject, as_list, dig, is_gpu_resource


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A VPA that is not Off controls only cpu and memory of GPU workloads."""
    if obj.kind != "VerticalPodAutoscaler":
        return
    mode = known(dig(obj.raw, "spec", "updatePolicy", "updateMode"), "updateMode") or "Auto"
    if mode == "Off":
        return
    extra = ctx.config.gpu_resources
    target_key = scale_target(obj)
    target = object_index(ctx).get(target_key) if target_key else None
    policies = as_list(
        dig(obj.raw, "spec", "resourcePolicy", "containerPolicies"), "containerPolicies"
    )
    for index, policy in enumerate(policies):
        if not isinstance(policy, Mapping):
            continue
        controlled = as_list(policy.get("controlledResources"), "controlledResources")
        other = tuple(str(r) for r in controlled if r not in ("cpu", "memory"))
        if not other:
            continue
        gpu_listed = any(is_gpu_resource(r, extra) for r in other)
        target_has_gpus = target is not None and any(p.gpu_count(extra) > 0 for p in target.pods())
        if not gpu_listed and target is None:
            key = "/".join(target_key or ("?",))
            yield Verdict("not_evaluated", "target-missing", values={"target": key})
            continue
        if not (gpu_listed or target_has_gpus):
            continue
        yield Verdict(
            "violation",
            "controls-other-resources",
            values={
                "mode": mode,
                "controlled": other,
                "container": str(policy.get("containerName", "*")),
                "target": f"{target_key[0]}/{target_key[2]}" if target_key else "its target",
                "gpu_listed": gpu_listed,
            },
            thresholds={"allowed": ("cpu", "memory")},
            path=("spec", "resourcePolicy", "containerPolicies", index, "controlledResources"),
        )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K009 message quotes beyond its values: the resources the VPA controls."""
    return {"resources": ", ".join(cast(tuple[str, ...], verdict.values.get("controlled", ())))}


RULE = folder_rule(__name__, worded(judge, fields))
