"""R006 upgrade-capacity."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import ADVISORY
from gpustrata_policies.view.kuberay import autoscaling_enabled, fmt_gpus
from gpustrata_policies.view.nodes import gpu_pools, targeted_pools
from gpustrata_policies.view.objects import K8sObject, as_list, dig
from gpustrata_policies.view.pools import GpuPool
from gpustrata_policies.view.profile import profile_hint
from gpustrata_policies.view.ray import KUBERAY_V170, gpu_worker_groups

NEW_CLUSTER = "NewCluster"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
NONE = "None"
DEFAULT_MAX_SURGE_PERCENT = 100  # ClusterUpgradeOptions.maxSurgePercent kubebuilder default


def _zero_downtime_disabled(ctx: RuleContext) -> bool:
    """The operator runs with ENABLE_ZERO_DOWNTIME=false (Helm values env)."""

    def build() -> bool:
        for obj in ctx.objects:
            if obj.kind != "HelmRelease" or dig(obj.raw, "spec", "chart") != "kuberay-operator":
                continue
            for env in as_list(dig(obj.raw, "spec", "values", "env"), "env"):
                if isinstance(env, Mapping) and env.get("name") == "ENABLE_ZERO_DOWNTIME":
                    return str(env.get("value", "")).lower() == "false"
        return False

    disabled: bool = ctx.memo("kuberay_zero_downtime_disabled", build)
    return disabled


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """An upgrade that starts a second RayCluster has GPUs for both in the pools' max size."""
    if obj.kind != "RayService":
        return
    strategy = dig(obj.raw, "spec", "upgradeStrategy", "type")
    if strategy is UNKNOWN:
        raise UnknownInput(f"upgradeStrategy.type of {obj.resource}")
    if strategy is None:
        if _zero_downtime_disabled(ctx):
            return
        strategy, named = NEW_CLUSTER, "unset, so KubeRay's default NewCluster"
    else:
        strategy = str(strategy)
        named = strategy
    if strategy not in (NEW_CLUSTER, INCREMENTAL):
        return
    autoscaling = autoscaling_enabled(obj)
    pools = gpu_pools(ctx)
    active = Fraction(0)
    pending = Fraction(0)
    used: dict[str, GpuPool] = {}
    parts: list[str] = []
    for found in gpu_worker_groups(ctx, obj):
        if isinstance(found, str):
            yield ctx.not_evaluated(obj, found)
            return
        group, gpus = found
        initial, low, high = group.replica_bounds(autoscaling)
        start = low if strategy == INCREMENTAL else initial
        active += high * gpus
        pending += start * gpus
        parts.append(
            f"{group.label}: {high} Pods serving and {start} new, {fmt_gpus(gpus)} GPUs each"
        )
        if not pools:
            yield ctx.not_evaluated(
                obj,
                f"no GpuNodePool is described, so the GPUs {group.label} can use are unknown "
                + profile_hint("pools"),
            )
            return
        matched = targeted_pools(group.pod, pools)
        if not matched:
            yield ctx.not_evaluated(
                obj, f"no described GPU pool matches the node selectors of {group.label}"
            )
            return
        for pool in matched:
            used[pool.name] = pool
    if not parts:
        return
    capacity = 0
    for pool in used.values():
        if pool.max_size is None or not pool.gpu_count:
            how = (
                "(its spec.limits name no nvidia.com/gpu)"
                if pool.extra.get("source") == "NodePool"
                else profile_hint("pools[].max_size and gpus_per_node")
            )
            yield ctx.not_evaluated(
                obj, f"GPU pool {pool.name} states no maxSize or GPU count {how}"
            )
            return
        capacity += pool.max_size * pool.gpu_count
    if strategy == INCREMENTAL:
        surge = dig(obj.raw, "spec", "upgradeStrategy", "clusterUpgradeOptions", "maxSurgePercent")
        percent = surge if isinstance(surge, int) else DEFAULT_MAX_SURGE_PERCENT
        pending = max(pending, Fraction(math.ceil(active * percent / 100)))
    need = active + pending
    if need <= capacity:
        return
    pool_text = ", ".join(
        f"{p.name} {p.max_size} x {p.gpu_count} GPUs" for p in used.values() if p.max_size
    )
    yield ctx.violation(
        obj,
        f"upgradeStrategy {named} brings up a second RayCluster during an upgrade: the serving "
        f"cluster at its max holds {fmt_gpus(active)} GPUs and the new one starts with "
        f"{fmt_gpus(pending)} ({'; '.join(parts)}), {fmt_gpus(need)} in all, but the pools "
        f"hold {capacity} GPUs at maxSize ({pool_text}); the new cluster's Pods stay Pending "
        "while the serving one is busy and the upgrade stalls",
        ("spec", "upgradeStrategy") if dig(obj.raw, "spec", "upgradeStrategy") else ("spec",),
    )


RULE = Rule(
    RuleMeta(
        id="R006",
        name="upgrade-capacity",
        title="A RayService upgrade that starts a second cluster has GPUs for it",
        layer="ray",
        severity="medium",
        default_enforcement=ADVISORY,
        rationale=(
            "With upgradeStrategy NewCluster (KubeRay's default unless the operator runs with "
            "ENABLE_ZERO_DOWNTIME=false) every change to rayClusterConfig starts a new "
            "RayCluster with its initial workers and switches traffic only when its Serve "
            "applications are ready; the old cluster keeps serving at whatever size it has. "
            "NewClusterWithIncrementalUpgrade starts the new cluster from minReplicas and grows "
            "it by maxSurgePercent of the serving capacity. When the GPU pools at maxSize cannot "
            "hold both, the new Pods stay Pending and the upgrade stalls. KubeRay's own source "
            "notes that LLM serving often lacks GPUs for two clusters."
        ),
        fix=(
            "Raise the GPU pool's maxSize to hold the serving cluster at its max plus the new "
            "cluster's initial workers, or set upgradeStrategy.type: None (cluster changes then "
            "need a manual rollout) or NewClusterWithIncrementalUpgrade with a small "
            "maxSurgePercent."
        ),
        references=(
            f"{KUBERAY_V170}/controllers/ray/rayservice_controller.go",
            f"{KUBERAY_V170}/apis/ray/v1/rayservice_types.go",
            "https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/rayservice.html",
        ),
        scope="stack",
    ),
    check,
)
