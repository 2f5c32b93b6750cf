"""O005 mig-strategy-matches-requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.nodes import (
    MIG_CONFIG_LABEL,
    MIG_K8S,
    gpu_model_of_pool,
    gpu_model_of_selectors,
    gpu_pools,
    gpu_requests,
    mig_config,
    operators,
    targeted_pools,
)
from gpustrata_policies.view.objects import K8sObject, PodRef
from gpustrata_policies.view.pools import GpuPool

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel

MIG_PREFIX = "nvidia.com/mig-"


def _strategies(ctx: RuleContext) -> dict[str, str]:
    """MIG strategy per operator (``{}`` when no operator is described)."""
    found: dict[str, str] = ctx.memo(  # once per evaluation, not once per object
        "o005_strategies", lambda: {op.obj.resource: op.mig_strategy for op in operators(ctx)}
    )
    return found


def _profile_problem(profile: str, gpu: GpuModel | None, where: str) -> str | None:
    if gpu is None:
        return None
    if profile in gpu.mig_profiles:
        return None
    if not gpu.mig_profiles:
        return f"{gpu.name} ({where}) does not support MIG"
    offered = ", ".join(gpu.mig_profiles)
    return f"{gpu.name} ({where}) has no MIG profile {profile} (profiles: {offered})"


def _pool_partition(pool: GpuPool) -> str | None:
    config = mig_config(pool)
    if config is None:
        return None
    return config


def _check_pod(
    ctx: RuleContext, obj: K8sObject, pod: PodRef, strategy: str | None
) -> Iterator[Outcome]:
    requests = gpu_requests(pod, ctx.config.gpu_resources)
    if not requests:
        return
    pools = gpu_pools(ctx)
    targets = targeted_pools(pod, pools) if pools else []
    path = (*pod.path, "containers")
    mig = sorted(r for r in requests if r.startswith(MIG_PREFIX))
    whole = "nvidia.com/gpu" in requests
    for resource in mig:
        profile = resource[len(MIG_PREFIX) :]
        problems = []
        if strategy is not None and strategy != "mixed":
            problems.append(
                f"the GPU Operator's MIG strategy is {strategy}, and only mixed advertises "
                "nvidia.com/mig-<profile> resources"
                + (
                    " (single advertises MIG devices as nvidia.com/gpu)"
                    if strategy == "single"
                    else ""
                )
            )
        if targets:
            for pool in targets:
                partition = _pool_partition(pool)
                gpu_problem = _profile_problem(
                    profile, gpu_model_of_pool(pool), f"pool {pool.name}"
                )
                if gpu_problem:
                    problems.append(gpu_problem)
                elif partition is None:
                    problems.append(
                        f"pool {pool.name} does not partition its GPUs ({MIG_CONFIG_LABEL} unset "
                        "or all-disabled)"
                    )
                elif partition.startswith("all-") and partition != f"all-{profile}":
                    problems.append(
                        f"pool {pool.name} partitions its GPUs as {partition}, which makes no "
                        f"{profile} instances"
                    )
        else:
            gpu, label = gpu_model_of_selectors(pod)
            gpu_problem = _profile_problem(profile, gpu, f"selected by {label}")
            if gpu_problem:
                problems.append(gpu_problem)
        if problems:
            yield ctx.violation(
                obj,
                f"pod{pod.where} requests {resource}, but {'; '.join(problems)}; it stays Pending",
                path,
            )
    if not whole or strategy is None or strategy == "single":
        return
    for pool in targets:
        partition = _pool_partition(pool)
        if partition is None:
            continue
        if strategy == "mixed":
            why = (
                "MIG strategy mixed advertises MIG-enabled GPUs only as "
                "nvidia.com/mig-<profile>, so those nodes offer no nvidia.com/gpu and the pod "
                "stays Pending"
            )
        else:
            why = (
                f"MIG strategy {strategy} makes the device plugin ignore MIG: it hands out the "
                "partitioned GPUs whole as nvidia.com/gpu and never serves their MIG instances"
            )
        yield ctx.violation(
            obj,
            f"pod{pod.where} requests nvidia.com/gpu on pool {pool.name}, whose GPUs are "
            f"MIG-partitioned ({MIG_CONFIG_LABEL}: {partition}), but {why}; use strategy "
            "single (each nvidia.com/gpu is then one MIG instance) or request "
            "nvidia.com/mig-<profile> with mixed",
            path,
        )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """GPU requests match the operator's MIG strategy and the pool's MIG profiles."""
    strategies = sorted(set(_strategies(ctx).values()))
    if len(strategies) > 1:
        yield ctx.not_evaluated(
            obj, f"several GPU Operators with different MIG strategies ({', '.join(strategies)})"
        )
        return
    strategy = strategies[0] if strategies else None
    for pod in obj.pods():
        yield from _check_pod(ctx, obj, pod, strategy)


RULE = folder_rule(__name__, check, facts={"MIG_K8S": MIG_K8S})
