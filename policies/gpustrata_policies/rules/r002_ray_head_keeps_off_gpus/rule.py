"""R002 ray-head-keeps-off-gpus."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.engines import engine_sites
from gpustrata_policies.view.kuberay import fmt_gpus, ray_groups
from gpustrata_policies.view.nodes import gpu_pools
from gpustrata_policies.view.objects import K8sObject, PodRef
from gpustrata_policies.view.ray import (
    reachable_pools,
    selects_gpu_nodes,
    tolerates_gpu_taint,
)


def _runs_ray_executor_engine(
    ctx: RuleContext, obj: K8sObject, pod_path: tuple[str | int, ...]
) -> bool:
    """The head's own container runs a vLLM server on the Ray executor (AIBrix's
    RayClusterFleet samples: ``ray start --head ...; vllm serve ... --distributed-executor-
    backend ray``). Its driver needs a GPU on its own node: vLLM's Ray executor fails with
    "Ray does not allocate any GPUs on the driver node" otherwise
    (vllm@896b83a:vllm/executor/ray_distributed_executor.py, ``_init_workers_ray``)."""
    return any(
        site.container is not None
        and site.container.pod.path == pod_path
        and str(site.flag("distributed_executor_backend") or "") == "ray"
        for site in engine_sites(ctx, obj, ray_pods=True)
    )


def _reach(ctx: RuleContext, pod: PodRef) -> Value:
    """How a head Pod that leaves num-gpus unset can land on a GPU node: the GPU pools it
    can be scheduled on (a tuple), ``"toleration"``, ``"selector"``, or None (it cannot)."""
    pools = gpu_pools(ctx)
    if pools:
        reachable = reachable_pools(pod, pools)
        return tuple(p.name for p in reachable) if reachable else None
    if tolerates_gpu_taint(pod):
        return "toleration"
    if selects_gpu_nodes(pod):
        return "selector"
    return None


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The head advertises num-gpus "0", requests no GPU, and so never hosts an engine."""
    if ctx.threshold("allow_head_gpus") is True:
        return
    extra = ctx.config.gpu_resources
    for group in ray_groups(obj):
        if not group.is_head:
            continue
        path = (*group.path, "rayStartParams")
        requested = group.pod.gpu_count(extra)
        try:
            advertised, where = group.advertised_gpus()
        except ValueError as exc:
            yield Verdict("not_evaluated", "num-gpus-unreadable", values={"error": str(exc)})
            continue
        if requested > 0 and _runs_ray_executor_engine(ctx, obj, group.pod.path):
            continue  # vLLM's Ray executor needs GPUs on the node its driver runs on
        if requested > 0:
            yield Verdict(
                "violation",
                "head-requests-gpus",
                values={"requested": requested},
                path=(*group.pod.path, "containers"),
            )
            continue
        if advertised is not None:
            if advertised > 0:
                values: dict[str, Value] = {"advertised": advertised, "where": where}
                yield Verdict("violation", "head-advertises-gpus", values=values, path=path)
            continue
        reach = _reach(ctx, group.pod)
        if reach is not None:
            yield Verdict("violation", "head-reaches-gpu-nodes", values={"reach": reach}, path=path)


_REACH = {
    "toleration": "tolerates the nvidia.com/gpu taint, so it can be scheduled on a GPU node",
    "selector": "selects GPU node labels",
}
"""How a head Pod reaches a GPU node other than through a described pool, in words."""


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an R002 message quotes beyond its values: the GPU counts formatted, and how
    the head can reach GPU nodes."""
    v = verdict.values
    if verdict.reason == "head-requests-gpus":
        return {"requested": fmt_gpus(cast(Fraction, v["requested"]))}
    if verdict.reason == "head-advertises-gpus":
        return {"advertised": fmt_gpus(cast(Fraction, v["advertised"]))}
    if verdict.reason != "head-reaches-gpu-nodes":
        return {}
    reach = v["reach"]
    return {
        "how": (
            f"can be scheduled on GPU pool(s) {', '.join(cast(tuple[str, ...], reach))}"
            if isinstance(reach, tuple)
            else _REACH[str(reach)]
        )
    }


RULE = folder_rule(__name__, worded(judge, fields))
