"""K012 inference-disruption-budget."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpustrata.core.unknown import UnknownInput, known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import (
    autoscalers_by_scale_target,
    runs_vllm,
    selector_matches,
)
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig
from gpustrata_policies.view.pools import pool_matches, pools_of

WORKLOADS = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet"})
HOSTNAME = "kubernetes.io/hostname"
FULL_NODE_GPUS = 8  # the largest common GPU node (p4d/p5, a2/a3, ND) has 8 GPUs


def _min_replicas(ctx: RuleContext) -> dict[tuple[str, str, str], int]:
    def build() -> dict[tuple[str, str, str], int]:
        by_target, unknown = autoscalers_by_scale_target(ctx)
        if unknown is not None:
            raise UnknownInput(unknown)  # it may scale this workload
        out: dict[tuple[str, str, str], int] = {}
        for target, scalers in by_target.items():
            for scaler in scalers:
                key = "minReplicaCount" if scaler.kind == "ScaledObject" else "minReplicas"
                low = dig(scaler.raw, "spec", key)
                if isinstance(low, int) and not isinstance(low, bool):
                    out[target] = max(out.get(target, 0), low)
        return out

    result: dict[tuple[str, str, str], int] = ctx.memo("min_replicas_by_target", build)
    return result


def _pdbs(ctx: RuleContext) -> dict[str, list[K8sObject]]:
    def build() -> dict[str, list[K8sObject]]:
        out: dict[str, list[K8sObject]] = {}
        for o in ctx.objects:
            if o.kind == "PodDisruptionBudget":
                out.setdefault(o.namespace, []).append(o)
        return out

    result: dict[str, list[K8sObject]] = ctx.memo("pdbs_by_namespace", build)
    return result


def _replicas(ctx: RuleContext, obj: K8sObject) -> int:
    raw = known(dig(obj.raw, "spec", "replicas"), f"spec.replicas of {obj.resource}")
    replicas = raw if isinstance(raw, int) and not isinstance(raw, bool) else 1
    return max(replicas, _min_replicas(ctx).get((obj.kind, obj.namespace, obj.name), 0))


def _spreads(pod: PodRef) -> bool:
    for c in as_list(pod.spec.get("topologySpreadConstraints"), "topologySpreadConstraints"):
        if isinstance(c, Mapping) and c.get("topologyKey") == HOSTNAME:
            return True
    anti = as_map(dig(pod.spec, "affinity", "podAntiAffinity"), "podAntiAffinity")
    for key in (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    ):
        for term in as_list(anti.get(key), key):
            term = term.get("podAffinityTerm", term) if isinstance(term, Mapping) else {}
            if isinstance(term, Mapping) and term.get("topologyKey") == HOSTNAME:
                return True
    return False


def _one_per_node_anyway(ctx: RuleContext, pod: PodRef) -> bool:
    """Two replicas cannot share a node when each takes more than half its GPUs."""
    gpus = pod.gpu_count(ctx.config.gpu_resources)
    if gpus <= 0:
        return False
    pools = ctx.memo(
        "pools_with_gpu_count", lambda: [p for p in pools_of(ctx.objects) if p.gpu_count]
    )
    targeted = [
        p for p in pools if pool_matches(pod.node_selector(), pod.required_affinity_terms(), p)
    ]
    if targeted:
        return all(2 * gpus > (p.gpu_count or 0) for p in targeted)
    return gpus >= FULL_NODE_GPUS


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Multi-replica vLLM workloads have a PDB and spread across nodes."""
    if obj.kind not in WORKLOADS or not runs_vllm(ctx, obj):
        return
    replicas = _replicas(ctx, obj)
    if replicas <= 1:
        return
    pods = obj.pods()
    labels = dict(pods[0].labels) if pods else {}
    if obj.kind == "LeaderWorkerSet":
        labels["leaderworkerset.sigs.k8s.io/name"] = obj.name
    has_pdb = any(
        selector_matches(as_map(dig(o.raw, "spec", "selector"), "selector"), labels)
        for o in _pdbs(ctx).get(obj.namespace, [])
    )
    spread = all(_spreads(p) or _one_per_node_anyway(ctx, p) for p in pods)
    if has_pdb and spread:
        return
    yield Verdict(
        "violation",
        "replicas-exposed",
        values={
            "workload": f"{obj.kind} {obj.name}",
            "replicas": replicas,
            "has_pdb": has_pdb,
            "spread": spread,
        },
        thresholds={"max_unprotected_replicas": 1, "full_node_gpus": FULL_NODE_GPUS},
        path=("spec",),
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K012 message quotes beyond its values: the protections the workload lacks."""
    v = verdict.values
    missing = []
    if not v["has_pdb"]:
        missing.append("no PodDisruptionBudget selects its pods")
    if not v["spread"]:
        missing.append(f"nothing spreads them across nodes (topologyKey {HOSTNAME})")
    return {"missing": " and ".join(missing)}


RULE = folder_rule(__name__, worded(judge, fields))
