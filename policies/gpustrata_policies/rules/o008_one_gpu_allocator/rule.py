"""O008 one-gpu-allocator."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import cast

from gpustrata.core.contract import DEVICE_PLUGIN_DEPLOY_LABEL
from gpustrata.core.terminal import quoted
from gpustrata.core.versions import is_version, parse_version
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
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
VALIDATOR_SOURCE = "NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go validateGPUResource"


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


def _judge_claim(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A DRA v1 claim where the GPU pools' Kubernetes serves resource.k8s.io/v1."""
    stated = {v for p in gpu_pools(ctx) if (v := p.kubernetes_version)}
    readable = {v for v in stated if is_version(v)}
    old = sorted(
        (v for v in readable if parse_version(v)[:2] < DRA_V1_KUBERNETES), key=parse_version
    )
    if stated - readable:  # "latest": O001 names it; this rule cannot compare it
        values = {"kubernetes": tuple(sorted(stated - readable))}
        yield Verdict("not_evaluated", "kubernetes-unreadable", values=values)
    if old:
        yield Verdict(
            "violation",
            "dra-v1-unserved",
            values={"kind": obj.kind, "name": obj.name, "kubernetes": tuple(old)},
            thresholds={"min_kubernetes": ".".join(map(str, DRA_V1_KUBERNETES))},
            path=("apiVersion",),
        )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """One allocator per GPU node; DRA v1 claims only where the cluster serves the API."""
    if obj.kind in CLAIM_KINDS and obj.api_version == DRA_V1:
        yield from _judge_claim(ctx, obj)
        return
    drivers: list[DraDriverView] = []
    found = dra_driver_view(obj)
    if found is not None:
        drivers.append(found)
        policies = [o for o in ctx.objects if o.kind == "ClusterPolicy"]
        if found.operator and policies:
            yield Verdict(
                "violation",
                "gpucluster-and-clusterpolicy",
                values={"gpu_cluster": obj.name, "cluster_policy": policies[0].name},
                sources=(OPERATOR_VALUES_2607,),
                path=("kind",),
            )
    for op in operators_for(ctx, obj):
        if deploys_cluster_policy(op) and op.is_helm and operator_dra(op) is not None:
            yield Verdict(
                "violation",
                "both-crs-deployed",
                values={"operator": op.label},
                sources=(OPERATOR_VALUES_2607,),
                path=op.path("gpuCluster", "deployCR"),
            )
            continue
        dra = operator_dra(op)
        if dra is not None:
            drivers.append(dra)
    for driver in drivers:
        yield from _judge_driver(ctx, driver)


def _judge_driver(ctx: RuleContext, driver: DraDriverView) -> Iterator[Verdict]:
    where = ("spec",) if driver.operator else ("spec", "values")
    if not gpu_pools(ctx):
        plugins = _plugins(ctx) if driver.allocates_gpus else []
        if plugins and driver.default_placement:
            yield Verdict(
                "violation",
                "default-placement-overlaps-plugin",
                values={"driver": driver.label, "operator": plugins[0].label},
                path=where,
            )
            return
        yield Verdict("not_evaluated", "no-pools")
        return
    yield from _validator(ctx, driver, where)
    both = _device_plugin_pools(ctx, driver)
    if both:
        yield Verdict(
            "violation",
            "plugin-overlaps-dra",
            values={"driver": driver.label, "pools": tuple(p.name for p in both)},
            path=where,
        )


def _validator(
    ctx: RuleContext, driver: DraDriverView, where: tuple[str, ...]
) -> Iterator[Verdict]:
    """DRA-only pools keep the device-plugin stack's validator off (it waits for
    nvidia.com/gpu capacity they never advertise: charts.yaml gpu-operator facts.dra_node)."""
    if not driver.allocates_gpus or not any(deploys_cluster_policy(o) for o in operators(ctx)):
        return
    from gpustrata.catalog.charts import dra_node_labels  # once a DRA driver is: issue 35

    wanted = dra_node_labels().get(VALIDATOR_LABEL, "false")
    stuck = [
        p.name
        for p in gpu_pools(ctx)
        if driver.runs_on(p)
        and p.labels.get(DEVICE_PLUGIN_LABEL) == "false"
        and str(p.labels.get(VALIDATOR_LABEL, "")) != wanted
    ]
    if stuck:
        yield Verdict(
            "violation",
            "validator-on-dra-pools",
            values={"driver": driver.label, "pools": tuple(stuck)},
            thresholds={"validator_label": wanted},
            sources=(VALIDATOR_SOURCE,),
            path=where,
        )


def _names(v: Mapping[str, Value], key: str, spell: Callable[[str], str] = str) -> str:
    return ", ".join(spell(n) for n in cast(tuple[str, ...], v[key]))


def fields(verdict: Verdict) -> dict[str, object]:
    """The text an O008 message derives: the pools' Kubernetes versions and names, and the
    source it cites."""
    v = verdict.values
    return {
        "unreadable": _names(v, "kubernetes", quoted) if "kubernetes" in v else "",
        "versions": _names(v, "kubernetes") if "kubernetes" in v else "",
        "source": verdict.sources[0] if verdict.sources else "",
        "names": _names(v, "pools") if "pools" in v else "",
    }


_FACTS = {
    "DRA_DRIVER_VALUES": DRA_DRIVER_VALUES,
    "GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES,
    "DRA_V1": DRA_V1,
    "DEVICE_PLUGIN_LABEL": DEVICE_PLUGIN_LABEL,
    "VALIDATOR_LABEL": VALIDATOR_LABEL,
}
"""The facts the rule's meta.yaml cites (``${NAME}``)."""

RULE = folder_rule(__name__, worded(judge, fields), facts=_FACTS)
