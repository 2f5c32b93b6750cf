"""O008 one-gpu-allocator."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.contract import DEVICE_PLUGIN_DEPLOY_LABEL
from gpustrata.core.terminal import quoted
from gpustrata.core.versions import is_version, parse_version
from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import MANDATORY
from gpustrata_policies.view.dra import (
    CLAIM_KINDS,
    DRA_DRIVER_VALUES,
    DraDriverView,
    dra_driver_view,
)
from gpustrata_policies.view.nodes import GPU_OPERATOR_VALUES, gpu_pools, operators
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool

DEVICE_PLUGIN_LABEL = DEVICE_PLUGIN_DEPLOY_LABEL
DRA_V1 = "resource.k8s.io/v1"
DRA_V1_KUBERNETES = (1, 34)
"""resource.k8s.io/v1 is served from Kubernetes 1.34 (DRA GA, KEP-4381)."""


def _device_plugin_pools(ctx: RuleContext, driver: DraDriverView) -> list[GpuPool]:
    """The pools where the DRA driver publishes GPUs and an operator's device plugin runs."""
    if not driver.allocates_gpus:
        return []
    plugins = [op for op in operators(ctx) if op.enabled("devicePlugin")]
    if not plugins:
        return []
    return [
        p
        for p in gpu_pools(ctx)
        if driver.runs_on(p) and p.labels.get(DEVICE_PLUGIN_LABEL) != "false"
    ]


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """One allocator per GPU node; DRA v1 claims only where the cluster serves the API."""
    if obj.kind in CLAIM_KINDS and obj.api_version == DRA_V1:
        stated = {v for p in gpu_pools(ctx) if (v := p.kubernetes_version)}
        readable = {v for v in stated if is_version(v)}
        old = sorted(
            (v for v in readable if parse_version(v)[:2] < DRA_V1_KUBERNETES), key=parse_version
        )
        if stated - readable:  # "latest": O001 names it; this rule cannot compare it
            unreadable = ", ".join(quoted(v) for v in sorted(stated - readable))
            yield ctx.not_evaluated(
                obj, f"the GPU pools' Kubernetes version {unreadable} is not a release number"
            )
        if old:
            yield ctx.violation(
                obj,
                f"{obj.kind} {obj.name} uses {DRA_V1}, which Kubernetes serves from 1.34, but "
                f"the GPU pools run Kubernetes {', '.join(old)}; the API server rejects it",
                ("apiVersion",),
            )
        return
    driver = dra_driver_view(obj)
    if driver is None:
        return
    if not gpu_pools(ctx):
        yield ctx.not_evaluated(obj, "no GpuNodePool describes the GPU nodes' labels")
        return
    both = _device_plugin_pools(ctx, driver)
    if both:
        names = ", ".join(p.name for p in both)
        yield ctx.violation(
            obj,
            f"{driver.label} publishes the GPUs of pool(s) {names} (resources.gpus.enabled, "
            f"its kubelet plugin runs there) and the GPU Operator's device plugin advertises "
            f"them as nvidia.com/gpu too (no {DEVICE_PLUGIN_LABEL}=false label); both "
            "admit Pods against the same devices, so two Pods can be given one GPU",
            ("spec", "values"),
        )


RULE = Rule(
    RuleMeta(
        id="O008",
        name="one-gpu-allocator",
        title="One allocator advertises a node's GPUs: the device plugin or the DRA driver",
        layer="gpu-operator",
        severity="critical",
        default_enforcement=MANDATORY,
        rationale=(
            "The device plugin (nvidia.com/gpu extended resource) and the NVIDIA DRA driver "
            "(ResourceSlices on the gpu.nvidia.com DeviceClass) each track which GPUs are "
            "free; neither sees the other's allocations, so on a node where both run, a Pod "
            "claiming GPUs and a Pod with an nvidia.com/gpu limit can get the same device. "
            "The DRA driver's chart refuses resources.gpus.enabled unless told the device "
            "plugin is off (gpuResourcesEnabledOverride), and the GPU Operator keeps its "
            "device plugin off nodes labelled nvidia.com/gpu.deploy.device-plugin=false. "
            "DRA claims need resource.k8s.io/v1, served from Kubernetes 1.34."
        ),
        fix=(
            "Label the DRA pools' nodes nvidia.com/gpu.deploy.device-plugin=false (or turn "
            "devicePlugin off), and confine the DRA driver's kubelet plugin to those pools "
            "(kubeletPlugin.nodeSelector or affinity); use resource.k8s.io/v1 claims only on "
            "Kubernetes 1.34 or later."
        ),
        references=(
            DRA_DRIVER_VALUES,
            GPU_OPERATOR_VALUES,
            "https://github.com/NVIDIA/gpu-operator/blob/v26.7.0/controllers/state_manager.go",
            "https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/",
        ),
        scope="stack",
    ),
    check,
)
