"""K004 gpu-pod-tolerates-pool."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import K8S_SCHEDULING_GPUS, MANDATORY
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list
from gpustrata_policies.view.pools import GpuPool, matches_selectors, pools_of, tolerates

DEFAULT_TAINT = {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}


def _taint(t: Mapping[str, str]) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if t["value"] else f"{t['key']}:{t['effect']}"


def _on_gke(pod: PodRef) -> bool:
    # GKE taints GPU nodes itself and its ExtendedResourceToleration admission adds the
    # matching toleration to Pods that request nvidia.com/gpu.
    return any(str(k).startswith("cloud.google.com/") for k in pod.selected_labels())


def _tolerates_default(tolerations: list[Mapping[str, Any]]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        key = tol.get("key") or ""
        if effect not in ("", "NoSchedule", "NO_SCHEDULE"):  # a tuple: effect may be a list
            continue
        if key == "nvidia.com/gpu" or (not key and tol.get("operator") == "Exists"):
            return True  # an Equal toleration's value cannot be checked without pool data
    return False


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """A GPU pod tolerates the hard taints of a pool it targets."""
    extra = ctx.config.gpu_resources
    pools: list[GpuPool] = ctx.memo(
        "gpu_pools", lambda: [p for p in pools_of(ctx.objects) if p.has_gpus]
    )
    for pod in obj.pods():
        gpus = pod.gpu_count(extra)
        if gpus <= 0:
            continue
        tolerations = [
            t for t in as_list(pod.spec.get("tolerations"), "tolerations") if isinstance(t, Mapping)
        ]
        path = (*pod.path, "tolerations")
        if obj.kind == "LLMInferenceService" and not tolerations:
            yield ctx.not_evaluated(
                obj,
                f"pod{pod.where} is completed by the KServe controller from its "
                "LLMInferenceServiceConfig presets, which may add the tolerations",
            )
            continue
        if not pools:
            if _on_gke(pod) or _tolerates_default(tolerations):
                continue
            yield ctx.violation(
                obj,
                f"pod{pod.where} requests {gpus} GPU(s) but does not tolerate the "
                f"{_taint(DEFAULT_TAINT)} taint of GPU nodes (no GpuNodePool is described, so "
                "the default GPU taint is assumed); on tainted GPU nodes it stays Pending",
                path,
            )
            continue
        selector, terms = pod.node_selector(), pod.required_affinity_terms()
        targeted = [p for p in pools if matches_selectors(selector, terms, p.labels)]
        if not targeted:
            yield ctx.not_evaluated(
                obj,
                f"no described GPU pool matches the node selectors of pod{pod.where} "
                f"({pod.selected_labels() or 'none'}); see K005",
            )
            continue
        missing = {
            p.name: [t for t in p.hard_taints if not tolerates(tolerations, t)] for p in targeted
        }
        if any(not taints for taints in missing.values()):
            continue
        detail = "; ".join(
            f"pool {name}: {', '.join(_taint(t) for t in taints)}"
            for name, taints in missing.items()
        )
        yield ctx.violation(
            obj,
            f"pod{pod.where} requests {gpus} GPU(s) and targets GPU pool(s) "
            f"{', '.join(missing)} but does not tolerate their taints ({detail}); it stays Pending",
            path,
        )


RULE = Rule(
    RuleMeta(
        id="K004",
        name="gpu-pod-tolerates-pool",
        title="GPU pods tolerate the taints of the pool they target",
        layer="kubernetes",
        severity="high",
        default_enforcement=MANDATORY,
        rationale=(
            "GPU pools carry a NoSchedule taint so CPU pods stay off expensive nodes (K003). "
            "A GPU pod without a matching toleration is never scheduled there and stays "
            "Pending with 'untolerated taint'. EKS spells effects NO_SCHEDULE, Kubernetes "
            "NoSchedule; an Equal toleration must also match the taint's value. Without a "
            "described pool the rule assumes the usual nvidia.com/gpu:NoSchedule taint; on GKE "
            "the ExtendedResourceToleration admission plugin adds that toleration itself."
        ),
        fix=(
            "Add a toleration for each NoSchedule/NoExecute taint of the target pool, e.g. "
            "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}."
        ),
        references=(
            "https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/",
            K8S_SCHEDULING_GPUS,
            "https://docs.aws.amazon.com/eks/latest/APIReference/API_Taint.html",
            "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#gpu_pool",
        ),
        scope="stack",
    ),
    check,
)
