"""K016 gpu-pods-survive-consolidation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.karpenter import KARPENTER_DOCS
from gpustrata_policies.view.nodes import gpu_pools, targeted_pools
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig
from gpustrata_policies.view.pools import GpuPool

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KARPENTER_DISRUPTION = "https://karpenter.sh/v1.9/concepts/disruption/"
# The consolidationPolicy Karpenter applies when a NodePool sets none (karpenter.sh/v1:
# WhenEmptyOrUnderutilized; v1beta1: WhenUnderutilized; KARPENTER_DISRUPTION).
_DEFAULT_POLICY = {"karpenter.sh/v1beta1": "WhenUnderutilized"}
_V1_DEFAULT = "WhenEmptyOrUnderutilized"


def _pod_annotations(pod: PodRef) -> Mapping[str, Any]:
    template = dig(pod.obj.raw, *pod.path[:-1]) if pod.path[:-1] else pod.obj.raw
    return as_map(dig(template, "metadata", "annotations"), "pod annotations")


def _blocking_budget(disruption: Mapping[str, Any]) -> str | None:
    """A budget that always allows 0 nodes to be disrupted for underutilisation, if any."""
    for i, budget in enumerate(as_list(disruption.get("budgets"), "disruption.budgets")):
        if not isinstance(budget, Mapping) or budget.get("schedule"):
            continue  # a scheduled budget holds only during its window
        reasons = budget.get("reasons")
        covers = not reasons or (isinstance(reasons, list) and "Underutilized" in reasons)
        if covers and str(budget.get("nodes", "")).strip() in ("0", "0%"):
            return f"budgets[{i}] nodes: {budget.get('nodes')}"
    return None


def _inference_pods(ctx: RuleContext, pool: GpuPool) -> list[tuple[str, bool]]:
    """GPU Pods in the input that target *pool* (named ``Kind/namespace/name (role)``),
    each with whether it opts out of voluntary disruption
    (``karpenter.sh/do-not-disrupt: "true"``)."""

    def by_pool() -> dict[int, list[tuple[K8sObject, PodRef]]]:
        # One pass over the input for every NodePool (keyed by identity: ctx's pools),
        # not one per NodePool; each pool's Pods in input order. A copy of a namespace has
        # its first copy's Pods (EvaluationIndex.copies): they target the same pools and
        # carry the same annotations, under the copy's own name.
        pools = gpu_pools(ctx)
        index = ctx.index
        targets: dict[int, list[tuple[PodRef, list[int]]]] = {}  # by first copy
        found: dict[int, list[tuple[K8sObject, PodRef]]] = {}
        for obj in ctx.objects:
            source = index.replicas()[id(obj)].of if index.is_copy(obj) else obj
            pods = targets.get(id(source))
            if pods is None:
                pods = targets[id(source)] = [
                    (pod, [id(p) for p in targeted_pools(pod, pools)])
                    for pod in source.pods()
                    if pod.gpu_count(ctx.config.gpu_resources) > 0
                ]
            for pod, ids in pods:
                for pool_id in ids:
                    found.setdefault(pool_id, []).append((obj, pod))
        return found

    index: dict[int, list[tuple[K8sObject, PodRef]]] = ctx.memo("k016_gpu_pods_by_pool", by_pool)
    out = []
    for owner, pod in index.get(id(pool), []):
        value = _pod_annotations(pod).get(DO_NOT_DISRUPT)
        out.append((f"{owner.resource}{pod.where}", str(value).lower() == "true"))
    return out


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A Karpenter GPU NodePool does not consolidate nodes that serve or load engines."""
    if obj.kind != "NodePool" or not obj.api_version.startswith("karpenter.sh/"):
        return
    pool = next((p for p in gpu_pools(ctx) if p.obj is obj), None)
    if pool is None:
        return
    disruption = as_map(dig(obj.raw, "spec", "disruption"), "spec.disruption")
    stated = disruption.get("consolidationPolicy")
    policy = str(stated) if stated else _DEFAULT_POLICY.get(obj.api_version, _V1_DEFAULT)
    if policy == "WhenEmpty" or str(disruption.get("consolidateAfter")) == "Never":
        return
    if _blocking_budget(disruption):
        return
    pods = _inference_pods(ctx, pool)
    if pods and all(protected for _, protected in pods):
        return
    after = disruption.get("consolidateAfter")
    yield Verdict(
        "violation",
        "consolidates-gpu-pods",
        values={
            "pool": obj.name,
            "policy": policy,
            "defaulted": not stated,
            "consolidate_after": None if after is None else f"{after}",
            "exposed": tuple(name for name, ok in pods if not ok),
        },
        sources=(KARPENTER_DISRUPTION,),
        path=("spec", "disruption", "consolidationPolicy") if stated else ("spec",),
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K016 message quotes beyond its values: the pool's disruption settings and
    the Pods it may evict."""
    v = verdict.values
    setting = f"consolidationPolicy: {v['policy']}" + (
        ", Karpenter's default" if v["defaulted"] else ""
    )
    if v["consolidate_after"] is not None:
        setting += f", consolidateAfter: {v['consolidate_after']}"
    exposed = cast(tuple[str, ...], v["exposed"])
    who = (
        f'the GPU Pods of {", ".join(exposed)}, which do not carry {DO_NOT_DISRUPT}: "true",'
        if exposed
        else "any inference Pod on it (none in the input targets it)"
    )
    return {"setting": setting, "who": who}


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"KARPENTER_DISRUPTION": KARPENTER_DISRUPTION, "KARPENTER_DOCS": KARPENTER_DOCS},
)
