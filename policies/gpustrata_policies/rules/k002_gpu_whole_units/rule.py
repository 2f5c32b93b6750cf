"""K002 gpu-whole-units."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import fmt
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.device_plugin import SHARING_DOCS
from gpustrata_policies.view.nodes import cluster_gpu_sharing
from gpustrata_policies.view.objects import K8sObject, is_gpu_resource


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """GPU quantities are whole, non-negative numbers."""
    extra = ctx.config.gpu_resources
    for c in obj.containers():
        for section in ("limits", "requests"):
            for name, raw in sorted(c.resources(section).items()):
                if not is_gpu_resource(name, extra):
                    continue
                value = known(raw, f"{section}.{name} of {c.label}")
                amount = parse_quantity(value)
                path = (*c.path, "resources", section, name)
                values: dict[str, Value] = {
                    "container": c.label,
                    "section": section,
                    "resource": name,
                    "value": fmt(value),
                    "amount": amount,
                }
                if amount is None:
                    reason = "not-a-quantity"
                elif amount.numerator < 0:  # amount < 0 (the denominator is positive)
                    reason = "negative"
                elif amount.denominator != 1:
                    reason = "not-whole"
                else:
                    if section == "limits" and amount.numerator > 1:  # whole here: amount > 1
                        yield from _shared_beyond_one(ctx, values, path)
                    continue
                yield Verdict("violation", reason, values=values, path=path)


def _shared_beyond_one(
    ctx: RuleContext, values: dict[str, Value], path: tuple[str | int, ...]
) -> Iterator[Verdict]:
    """More than one replica of a shared GPU where the device plugin refuses that."""
    sharing = cluster_gpu_sharing(ctx)
    if (
        sharing is None
        or sharing.resource != values["resource"]
        or not sharing.fail_requests_greater_than_one
    ):
        return
    yield Verdict(
        "violation",
        "shared-beyond-one",
        values={**values, "sharing_where": sharing.where},
        thresholds={"max_replicas": 1},
        sources=(SHARING_DOCS,),
        path=path,
    )


RULE = folder_rule(__name__, worded(judge), facts={"SHARING_DOCS": SHARING_DOCS})
