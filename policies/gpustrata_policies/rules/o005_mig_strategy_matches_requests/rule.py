"""O005 mig-strategy-matches-requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
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


Problem = tuple[str, ...]
"""Why a MIG request is not served: its case (``strategy``, ``no-mig``, ``no-profile``,
``unpartitioned``, ``other-partition``) then its figures."""


def _profile_problem(profile: str, gpu: GpuModel | None, where: str) -> Problem | None:
    """Why *gpu* serves no MIG instance of *profile* (None: it does, or is unknown)."""
    if gpu is None:
        return None
    if profile in gpu.mig_profiles:
        return None
    if not gpu.mig_profiles:
        return ("no-mig", gpu.name, where)
    return ("no-profile", gpu.name, where, ", ".join(gpu.mig_profiles))


def _pool_problem(profile: str, pool: GpuPool) -> Problem | None:
    """Why *pool* serves no MIG instance of *profile*."""
    partition = mig_config(pool)
    gpu_problem = _profile_problem(profile, gpu_model_of_pool(pool), f"pool {pool.name}")
    if gpu_problem:
        return gpu_problem
    if partition is None:
        return ("unpartitioned", pool.name)
    if partition.startswith("all-") and partition != f"all-{profile}":
        return ("other-partition", pool.name, partition)
    return None


def _mig_problems(
    pod: PodRef, profile: str, strategy: str | None, targets: list[GpuPool]
) -> list[Problem]:
    """Why a request for MIG *profile* is not served on the pools the pod targets."""
    problems: list[Problem] = []
    if strategy is not None and strategy != "mixed":
        problems.append(("strategy", strategy))
    if targets:
        for pool in targets:
            problem = _pool_problem(profile, pool)
            if problem:
                problems.append(problem)
    else:
        gpu, label = gpu_model_of_selectors(pod)
        gpu_problem = _profile_problem(profile, gpu, f"selected by {label}")
        if gpu_problem:
            problems.append(gpu_problem)
    return problems


def _judge_pod(ctx: RuleContext, pod: PodRef, strategy: str | None) -> Iterator[Verdict]:
    """One pod's MIG and whole-GPU requests against the strategy and its pools."""
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
        problems = _mig_problems(pod, profile, strategy, targets)
        if problems:
            yield Verdict(
                "violation",
                "mig-request-unserved",
                values={"pod": pod.where, "resource": resource, "problems": tuple(problems)},
                thresholds={"strategy": strategy},
                path=path,
            )
    if not whole or strategy is None or strategy == "single":
        return
    for pool in targets:
        partition = mig_config(pool)
        if partition is None:
            continue
        yield Verdict(
            "violation",
            "whole-gpu-on-mig-pool",
            values={"pod": pod.where, "pool": pool.name, "partition": partition},
            thresholds={"strategy": strategy},
            sources=(MIG_CONFIG_LABEL,),
            path=path,
        )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """GPU requests match the operator's MIG strategy and the pool's MIG profiles."""
    strategies = sorted(set(_strategies(ctx).values()))
    if len(strategies) > 1:
        yield Verdict("not_evaluated", "mixed-strategies", values={"strategies": tuple(strategies)})
        return
    strategy = strategies[0] if strategies else None
    for pod in obj.pods():
        yield from _judge_pod(ctx, pod, strategy)


def _problem_text(problem: Problem, profile: str) -> str:
    """One reason a request for MIG *profile* is not served, in words."""
    case, *figures = problem
    if case == "strategy":
        [strategy] = figures
        single = (
            " (single advertises MIG devices as nvidia.com/gpu)" if strategy == "single" else ""
        )
        return (
            f"the GPU Operator's MIG strategy is {strategy}, and only mixed advertises "
            f"nvidia.com/mig-<profile> resources{single}"
        )
    if case == "no-mig":
        gpu, where = figures
        return f"{gpu} ({where}) does not support MIG"
    if case == "no-profile":
        gpu, where, offered = figures
        return f"{gpu} ({where}) has no MIG profile {profile} (profiles: {offered})"
    if case == "unpartitioned":
        return (
            f"pool {figures[0]} does not partition its GPUs ({MIG_CONFIG_LABEL} unset "
            "or all-disabled)"
        )
    pool, partition = figures
    return f"pool {pool} partitions its GPUs as {partition}, which makes no {profile} instances"


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an O005 message derives: the strategies in conflict, why a MIG request is
    not served, and why a whole-GPU request on a MIG pool is not."""
    v, strategy = verdict.values, verdict.thresholds.get("strategy")
    out = {"strategies": ", ".join(cast(tuple[str, ...], v.get("strategies", ())))}
    if "problems" in v:
        profile = str(v["resource"])[len(MIG_PREFIX) :]
        out["problems"] = "; ".join(
            _problem_text(p, profile) for p in cast(tuple[Problem, ...], v["problems"])
        )
    if strategy == "mixed":
        out["why"] = (
            "MIG strategy mixed advertises MIG-enabled GPUs only as "
            "nvidia.com/mig-<profile>, so those nodes offer no nvidia.com/gpu and the pod "
            "stays Pending"
        )
    else:
        out["why"] = (
            f"MIG strategy {strategy} makes the device plugin ignore MIG: it hands out the "
            "partitioned GPUs whole as nvidia.com/gpu and never serves their MIG instances"
        )
    return out


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"MIG_K8S": MIG_K8S, "MIG_CONFIG_LABEL": MIG_CONFIG_LABEL},
)
