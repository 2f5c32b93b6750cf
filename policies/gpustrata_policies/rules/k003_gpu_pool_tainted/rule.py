"""K003 gpu-pool-tainted."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import ADVISORY, K8S_SCHEDULING_GPUS
from gpustrata_policies.view.nodes import gpu_pools, pool_label
from gpustrata_policies.view.objects import K8sObject


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """A GPU pool carries a NoSchedule (or NoExecute) taint."""
    if obj.kind != "GpuNodePool":
        return
    for pool in gpu_pools(ctx):
        if pool.obj is not obj or pool.hard_taints:
            continue
        soft = [t for t in pool.taints if t["effect"] == "PreferNoSchedule"]
        has = (
            f"only PreferNoSchedule taints ({', '.join(t['key'] for t in soft)}), which the "
            "scheduler may ignore"
            if soft
            else "no taint"
        )
        yield ctx.violation(
            obj,
            f"GPU {pool_label(pool)} has {has}; Pods that request no GPU can be scheduled "
            "onto its nodes and take the CPU and memory the GPU Pods need",
            ("spec", "taints"),
        )


RULE = Rule(
    RuleMeta(
        id="K003",
        name="gpu-pool-tainted",
        title="GPU node pools carry a NoSchedule taint",
        layer="kubernetes",
        severity="medium",
        default_enforcement=ADVISORY,
        rationale=(
            "Without a taint the scheduler treats GPU nodes like any other node: CPU-only Pods "
            "(system add-ons, batch jobs) land there, use the CPU and memory that GPU Pods "
            "request, and leave the GPUs idle but unschedulable. The NVIDIA device plugin, the "
            "GPU Operator's operands and GKE/AKS/EKS guidance all expect GPU nodes tainted "
            "nvidia.com/gpu:NoSchedule and GPU Pods tolerating it (K004)."
        ),
        fix=(
            "Add a NoSchedule taint to the pool, e.g. nvidia.com/gpu=true:NoSchedule (EKS "
            "spelling NO_SCHEDULE), and let GPU Pods tolerate it."
        ),
        references=(
            "https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/",
            K8S_SCHEDULING_GPUS,
            "https://docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html",
        ),
        scope="stack",
    ),
    check,
)
