"""R002 ray-head-keeps-off-gpus."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.engines import engine_sites
from gpustrata_policies.view.kuberay import fmt_gpus, ray_groups
from gpustrata_policies.view.nodes import gpu_pools
from gpustrata_policies.view.objects import K8sObject
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


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
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
            yield ctx.not_evaluated(obj, f"head group: {exc}")
            continue
        if requested > 0 and _runs_ray_executor_engine(ctx, obj, group.pod.path):
            continue  # vLLM's Ray executor needs GPUs on the node its driver runs on
        if requested > 0:
            yield ctx.violation(
                obj,
                f"head group requests {fmt_gpus(requested)} GPU(s); Ray then schedules "
                "engine workers on the head, next to GCS, the dashboard and the Serve "
                "controller, and a GPU fault or OOM there takes the whole cluster down",
                (*group.pod.path, "containers"),
            )
            continue
        if advertised is not None:
            if advertised > 0:
                yield ctx.violation(
                    obj,
                    f"head group advertises {fmt_gpus(advertised)} GPU(s) ({where}) without "
                    "requesting any; Ray places GPU engine workers on the head, where no GPU "
                    "is allocated to them",
                    path,
                )
            continue
        pools = gpu_pools(ctx)
        if pools:
            reachable = reachable_pools(group.pod, pools)
            if not reachable:
                continue
            how = f"can be scheduled on GPU pool(s) {', '.join(p.name for p in reachable)}"
        elif tolerates_gpu_taint(group.pod):
            how = "tolerates the nvidia.com/gpu taint, so it can be scheduled on a GPU node"
        elif selects_gpu_nodes(group.pod):
            how = "selects GPU node labels"
        else:
            continue
        yield ctx.violation(
            obj,
            f'head group leaves rayStartParams num-gpus unset (not "0") and {how}; there '
            "the NVIDIA runtime can expose the node's GPUs to a container that requests none "
            "(CUDA images set NVIDIA_VISIBLE_DEVICES=all), Ray counts them and places "
            "engine workers on the head",
            path,
        )


RULE = folder_rule(__name__, check)
