"""K002 gpu-whole-units."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import (
    K8S_RESOURCE_VALIDATION,
    K8S_SCHEDULING_GPUS,
    MANDATORY,
    fmt,
)
from gpustrata_policies.view.objects import K8sObject, is_gpu_resource


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
                elif amount < 0:
                    problem = "is negative"
                elif amount.denominator != 1:
                    problem = (
                        "is not a whole number (the API server rejects it: must be an integer)"
                    )
                else:
                    continue
                yield ctx.violation(
                    obj, f"{c.label} sets {section}.{name}: {fmt(value)}, which {problem}", path
                )


RULE = Rule(
    RuleMeta(
        id="K002",
        name="gpu-whole-units",
        title="GPU quantities are whole numbers",
        layer="kubernetes",
        severity="high",
        default_enforcement=MANDATORY,
        rationale=(
            "A GPU resource counts whole devices advertised by the device plugin; Kubernetes "
            "rejects fractions such as 0.5 or 500m for extended resources. A GPU is shared by "
            "advertising it several times (time-slicing, MPS) or by partitioning it (MIG "
            "profiles such as nvidia.com/mig-1g.10gb), never by asking for part of one. "
            "(0 is allowed: it asks for no GPU.)"
        ),
        fix=(
            "Ask for a whole number of GPUs; to share one, configure MIG, time-slicing or MPS "
            "in the GPU Operator and request the resource it advertises."
        ),
        references=(
            K8S_SCHEDULING_GPUS,
            K8S_RESOURCE_VALIDATION,
            "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html",
        ),
    ),
    check,
)
