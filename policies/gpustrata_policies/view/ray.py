"""Ray worker groups as the Ray and serving rules read them (GPU worker groups with their
GPUs per Pod, the pools they reach, KubeRay sources). Engines are read through
:func:`gpustrata_policies.view.engines.engine_sites`."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view.kuberay import RayGroup, ray_groups
from gpustrata_policies.view.nodes import tolerations_of
from gpustrata_policies.view.objects import K8sObject, PodRef
from gpustrata_policies.view.pools import GpuPool, pool_matches, tolerates

KUBERAY_V170 = "https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator"
RAY_V2600 = "https://github.com/ray-project/ray/blob/ray-2.60.0/python/ray"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_LABEL_PREFIXES = (
    "nvidia.com/gpu.",
    "karpenter.k8s.aws/instance-gpu",
    "cloud.google.com/gke-accelerator",
)


def gpu_worker_groups(
    ctx: RuleContext, obj: K8sObject
) -> Iterator[tuple[RayGroup, Fraction] | str]:
    """The worker groups of *obj* that advertise GPUs, with the GPUs of each Pod, in order;
    at a group whose GPU count cannot be read, the reason (a str) and nothing after it."""
    extra = ctx.config.gpu_resources
    for group in ray_groups(obj):
        if group.is_head:
            continue
        try:
            gpus = group.effective_gpus(extra)
        except ValueError as exc:
            yield f"{group.label}: {exc}"
            return
        if gpus > 0:
            yield group, gpus


def reachable_pools(pod: PodRef, pools: list[GpuPool]) -> list[GpuPool]:
    """Described GPU pools the pod can be scheduled on (selectors match, taints tolerated)."""
    selector, terms = pod.node_selector(), pod.required_affinity_terms()
    tols = tolerations_of(pod)
    return [
        p
        for p in pools
        if pool_matches(selector, terms, p) and all(tolerates(tols, t) for t in p.hard_taints)
    ]


def tolerates_gpu_taint(pod: PodRef) -> bool:
    """Without pool data: does the pod tolerate the usual ``nvidia.com/gpu`` NoSchedule taint?"""
    for tol in tolerations_of(pod):
        effect = str(tol.get("effect") or "")
        if effect not in {"", "NoSchedule", "NO_SCHEDULE"}:
            continue
        key = str(tol.get("key") or "")
        if key == GPU_TAINT_KEY or (not key and tol.get("operator") == "Exists"):
            return True
    return False


def selects_gpu_nodes(pod: PodRef) -> bool:
    """Does the pod pin GPU node labels (GFD, Karpenter, GKE accelerator)?"""
    return any(str(k).startswith(GPU_LABEL_PREFIXES) for k in pod.selected_labels())
