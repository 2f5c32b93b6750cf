"""O003 driver-source-consistent."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.nodes import (
    EKS_AMI_TYPES,
    GPU_OPERATOR_EKS,
    gpu_pools,
    operators_for,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool


def _images(pools: list[GpuPool]) -> str:
    return "; ".join(
        f"{p.name}: {p.ami_type or p.text('nodeImage') or 'image stated in driverPreinstalled'}"
        for p in pools
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Operator-managed driver exactly where the node image ships none."""
    for op in operators_for(ctx, obj):
        known = [p for p in gpu_pools(ctx) if p.driver_preinstalled is not None]
        if not known:
            yield ctx.not_evaluated(
                obj,
                "no GpuNodePool states its node image (spec.amiType or spec.driverPreinstalled) "
                "and no Node shows one (Bottlerocket osImage, nvidia.com/gpu.deploy.driver="
                "pre-installed), so whether the nodes ship a driver is unknown",
            )
            continue
        stated = op.value("driver", "enabled")
        installs = op.enabled("driver")
        setting = f"driver.enabled: {str(installs).lower()}" + (
            op.origin("driver", "enabled")
            if stated is not None or not op.is_helm
            else ", the chart default"
        )
        path = op.path("driver", "enabled")
        twice = [p for p in known if p.driver_preinstalled and installs]
        none = [p for p in known if not p.driver_preinstalled and not installs]
        if twice:
            yield ctx.violation(
                obj,
                f"{op.label} installs its own NVIDIA driver ({setting}), but pool(s) "
                f"{', '.join(p.name for p in twice)} run a node image that already ships one "
                f"({_images(twice)}); set driver.enabled=false for nodes whose image has the "
                "driver",
                path,
            )
        if none:
            yield ctx.violation(
                obj,
                f"{op.label} does not install the NVIDIA driver ({setting}), and pool(s) "
                f"{', '.join(p.name for p in none)} run a node image without one "
                f"({_images(none)}); the device plugin finds no GPU there and nvidia.com/gpu "
                "stays 0",
                path,
            )


RULE = folder_rule(
    __name__, check, facts={"GPU_OPERATOR_EKS": GPU_OPERATOR_EKS, "EKS_AMI_TYPES": EKS_AMI_TYPES}
)
