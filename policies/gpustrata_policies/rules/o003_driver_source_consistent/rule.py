"""O003 driver-source-consistent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.nodes import (
    EKS_AMI_TYPES,
    GPU_OPERATOR_EKS,
    gpu_pools,
    operators_for,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool


def _images(pools: list[GpuPool]) -> tuple[tuple[str, str], ...]:
    """(pool, the node image it states) of each of *pools*."""
    return tuple(
        (p.name, p.ami_type or p.text("nodeImage") or "image stated in driverPreinstalled")
        for p in pools
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Operator-managed driver exactly where the node image ships none."""
    for op in operators_for(ctx, obj):
        known = [p for p in gpu_pools(ctx) if p.driver_preinstalled is not None]
        if not known:
            yield Verdict("not_evaluated", "node-images-unknown")
            continue
        stated = op.value("driver", "enabled")
        installs = op.enabled("driver")
        origin = (
            op.origin("driver", "enabled")
            if stated is not None or not op.is_helm
            else ", the chart default"
        )
        values: dict[str, Value] = {
            "operator": op.label,
            "driver_enabled": installs,
            "origin": origin,
        }
        path = op.path("driver", "enabled")
        twice = [p for p in known if p.driver_preinstalled and installs]
        none = [p for p in known if not p.driver_preinstalled and not installs]
        if twice:
            images = _images(twice)
            yield Verdict("violation", "driver-twice", {**values, "pools": images}, path=path)
        if none:
            images = _images(none)
            yield Verdict("violation", "no-driver", {**values, "pools": images}, path=path)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an O003 message derives: the operator's driver setting and the pools' names
    and images."""
    v = verdict.values
    if "pools" not in v:
        return {}
    pools = cast(tuple[tuple[str, str], ...], v["pools"])
    return {
        "setting": f"driver.enabled: {str(v['driver_enabled']).lower()}{v['origin']}",
        "names": ", ".join(name for name, _ in pools),
        "images": "; ".join(f"{name}: {image}" for name, image in pools),
    }


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"GPU_OPERATOR_EKS": GPU_OPERATOR_EKS, "EKS_AMI_TYPES": EKS_AMI_TYPES},
)
