"""O008 one-gpu-allocator."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.catalog.charts import dra_node_labels
from gpustrata.core.contract import DEVICE_PLUGIN_DEPLOY_LABEL
from gpustrata.core.terminal import quoted
from gpustrata.core.versions import is_version, parse_version
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.device_classes import operator_dra
from gpustrata_policies.view.dra import (
    CLAIM_KINDS,
    DRA_DRIVER_VALUES,
    DraDriverView,
    dra_driver_view,
)
from gpustrata_policies.view.gpu_operator import GpuOperatorView
from gpustrata_policies.view.helm_values import values_flag
from gpustrata_policies.view.nodes import (
    GPU_OPERATOR_VALUES,
    gpu_pools,
    operators,
    operators_for,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool

DEVICE_PLUGIN_LABEL = DEVICE_PLUGIN_DEPLOY_LABEL
DRA_V1 = "resource.k8s.io/v1"
DRA_V1_KUBERNETES = (1, 34)
"""resource.k8s.io/v1 is served from Kubernetes 1.34 (DRA GA, KEP-4381)."""


VALIDATOR_LABEL = "nvidia.com/gpu.deploy.operator-validator"
OPERATOR_VALUES_2607 = (
    "NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/values.yaml (clusterPolicy.deployCR, "
    "gpuCluster.deployCR: 'It is an invalid configuration for both CRs to exist')"
)


def deploys_cluster_policy(op: GpuOperatorView) -> bool:
    """The operator runs the device-plugin stack: a ClusterPolicy, or a chart whose
    ``clusterPolicy.deployCR`` is not false (default true at v26.7.0)."""
    if not op.is_helm:
        return True
    return values_flag(op.value("clusterPolicy", "deployCR"), True)


def _plugins(ctx: RuleContext) -> list[GpuOperatorView]:
    """Operators whose device plugin runs cluster-wide."""
    return [
        op for op in operators(ctx) if deploys_cluster_policy(op) and op.enabled("devicePlugin")
    ]


def _device_plugin_pools(ctx: RuleContext, driver: DraDriverView) -> list[GpuPool]:
    """The pools where the DRA driver publishes GPUs and an operator's device plugin runs."""
    if not driver.allocates_gpus:
        return []
    plugins = _plugins(ctx)
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
    drivers: list[DraDriverView] = []
    found = dra_driver_view(obj)
    if found is not None:
        drivers.append(found)
        policies = [o for o in ctx.objects if o.kind == "ClusterPolicy"]
        if found.operator and policies:
            yield ctx.violation(
                obj,
                f"GPUCluster {obj.name} and ClusterPolicy {policies[0].name} both exist: the "
                "device-plugin stack and the DRA stack on the same GPUs, which the operator "
                f"calls invalid ({OPERATOR_VALUES_2607}); keep one of them",
                ("kind",),
            )
    for op in operators_for(ctx, obj):
        if deploys_cluster_policy(op) and op.is_helm and operator_dra(op) is not None:
            yield ctx.violation(
                obj,
                f"{op.label} deploys both a ClusterPolicy (clusterPolicy.deployCR) and a "
                "GPUCluster (gpuCluster.deployCR): the device-plugin stack and the DRA stack "
                f"on the same GPUs, which the operator calls invalid ({OPERATOR_VALUES_2607}); "
                "set clusterPolicy.deployCR=false to use its DRA driver",
                op.path("gpuCluster", "deployCR"),
            )
            continue
        dra = operator_dra(op)
        if dra is not None:
            drivers.append(dra)
    for driver in drivers:
        yield from _check_driver(ctx, obj, driver)


def _check_driver(ctx: RuleContext, obj: K8sObject, driver: DraDriverView) -> Iterator[Outcome]:
    where = ("spec",) if driver.operator else ("spec", "values")
    if not gpu_pools(ctx):
        plugins = _plugins(ctx) if driver.allocates_gpus else []
        if plugins and driver.default_placement:
            yield ctx.violation(
                obj,
                f"{driver.label} publishes the GPUs of every GPU node (its kubelet plugin's "
                f"default placement) and {plugins[0].label} runs its device plugin "
                "cluster-wide (devicePlugin on), which advertises the same GPUs as "
                "nvidia.com/gpu; both admit Pods against the same devices, so two Pods can be "
                "given one GPU",
                where,
            )
            return
        yield ctx.not_evaluated(obj, "no GpuNodePool describes the GPU nodes' labels")
        return
    yield from _validator(ctx, obj, driver, where)
    both = _device_plugin_pools(ctx, driver)
    if both:
        names = ", ".join(p.name for p in both)
        yield ctx.violation(
            obj,
            f"{driver.label} publishes the GPUs of pool(s) {names} (resources.gpus.enabled, "
            f"its kubelet plugin runs there) and the GPU Operator's device plugin advertises "
            f"them as nvidia.com/gpu too (no {DEVICE_PLUGIN_LABEL}=false label); both "
            "admit Pods against the same devices, so two Pods can be given one GPU",
            where,
        )


def _validator(
    ctx: RuleContext, obj: K8sObject, driver: DraDriverView, where: tuple[str, ...]
) -> Iterator[Outcome]:
    """DRA-only pools keep the device-plugin stack's validator off (it waits for
    nvidia.com/gpu capacity they never advertise: charts.yaml gpu-operator facts.dra_node)."""
    if not driver.allocates_gpus or not any(deploys_cluster_policy(o) for o in operators(ctx)):
        return
    wanted = dra_node_labels().get(VALIDATOR_LABEL, "false")
    stuck = [
        p.name
        for p in gpu_pools(ctx)
        if driver.runs_on(p)
        and p.labels.get(DEVICE_PLUGIN_LABEL) == "false"
        and str(p.labels.get(VALIDATOR_LABEL, "")) != wanted
    ]
    if stuck:
        yield ctx.violation(
            obj,
            f"{driver.label} publishes the GPUs of DRA-only pool(s) {', '.join(stuck)} "
            f"({DEVICE_PLUGIN_LABEL}=false), but they do not carry {VALIDATOR_LABEL}={wanted}: "
            "the GPU Operator's validator runs there and waits for nvidia.com/gpu capacity "
            "that DRA nodes never advertise, so it never becomes ready (NVIDIA/gpu-operator"
            "@v26.7.0:cmd/nvidia-validator/main.go validateGPUResource). Label those nodes "
            f"{VALIDATOR_LABEL}={wanted}",
            where,
        )


RULE = folder_rule(
    __name__,
    check,
    facts={"DRA_DRIVER_VALUES": DRA_DRIVER_VALUES, "GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES},
)
