"""K002 gpu-whole-units."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._common import (
    fmt,
)
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.device_plugin import SHARING_DOCS
from gpustrata_policies.view.nodes import cluster_gpu_sharing
from gpustrata_policies.view.objects import K8sObject, Path, is_gpu_resource


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
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
                if amount is None:
                    problem = "is not a quantity"
                elif amount.numerator < 0:  # amount < 0 (the denominator is positive)
                    problem = "is negative"
                elif amount.denominator != 1:
                    problem = (
                        "is not a whole number (the API server rejects it: must be an integer)"
                    )
                else:
                    if section == "limits" and amount.numerator > 1:  # whole here: amount > 1
                        yield from _shared_beyond_one(ctx, obj, c.label, name, value, path)
                    continue
                yield ctx.violation(
                    obj, f"{c.label} sets {section}.{name}: {fmt(value)}, which {problem}", path
                )


def _shared_beyond_one(
    ctx: RuleContext, obj: K8sObject, label: str, name: str, value: object, path: Path
) -> Iterator[Outcome]:
    """More than one replica of a shared GPU where the device plugin refuses that."""
    sharing = cluster_gpu_sharing(ctx)
    if sharing is None or sharing.resource != name or not sharing.fail_requests_greater_than_one:
        return
    yield ctx.violation(
        obj,
        f"{label} sets limits.{name}: {fmt(value)}, but the device plugin shares that "
        f"resource ({sharing.where}) with failRequestsGreaterThanOne, so it fails the Pod "
        "with UnexpectedAdmissionError (replicas of a shared GPU give no more GPU anyway)",
        path,
    )


RULE = folder_rule(__name__, check, facts={"SHARING_DOCS": SHARING_DOCS})
