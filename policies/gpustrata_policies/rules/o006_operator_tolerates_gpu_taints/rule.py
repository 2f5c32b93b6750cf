"""O006 operator-tolerates-gpu-taints."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.gpu_operator import ASSET_TOLERATIONS_URL
from gpustrata_policies.view.nodes import GPU_OPERATOR_VALUES, gpu_pools, operators_for
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import tolerates


def _taint(t: Mapping[str, str]) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if t["value"] else f"{t['key']}:{t['effect']}"


def _toleration(t: Mapping[str, Any]) -> str:
    key = t.get("key") or "*"
    op = t.get("operator") or "Equal"
    value = f"={t.get('value') or chr(34) * 2}" if op == "Equal" else ""
    effect = f":{t['effect']}" if t.get("effect") else ""
    return f"{key}{value}{effect} ({op})"


_CONSEQUENCE = {
    "daemonsets": (
        "operand DaemonSets (daemonsets.tolerations)",
        "the device plugin, GPU Feature Discovery and DCGM exporter never run there, so "
        "those nodes advertise no nvidia.com/gpu",
    ),
    "nfd": (
        "node-feature-discovery workers (node-feature-discovery.worker.tolerations)",
        "those nodes get no PCI labels, so the operator does not recognise them as GPU "
        "nodes and deploys no operands there",
    ),
}


def _default(helm: bool) -> str:
    return ", the chart default" if helm else ", the operator's DaemonSet assets' default"


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The operator's DaemonSets and NFD tolerate every hard taint of the GPU pools."""
    for op in operators_for(ctx, obj):
        pools = gpu_pools(ctx)
        if not pools:
            yield ctx.not_evaluated(obj, "no GpuNodePool describes the GPU nodes' taints")
            continue
        which = ["daemonsets", "nfd"] if op.deploys_nfd else ["daemonsets"]
        for component in which:
            tolerations, default = op.tolerations(component)
            missing = [
                f"pool {p.name}: {', '.join(_taint(t) for t in bad)}"
                for p in pools
                if (bad := [t for t in p.hard_taints if not tolerates(tolerations, t)])
            ]
            if not missing:
                continue
            has = ", ".join(_toleration(t) for t in tolerations) or "none"
            what, consequence = _CONSEQUENCE[component]
            path = (
                op.path("daemonsets", "tolerations")
                if component == "daemonsets"
                else op.path("node-feature-discovery", "worker", "tolerations")
            )
            yield ctx.violation(
                obj,
                f"{op.label}: the {what} do not tolerate {'; '.join(missing)} (they tolerate "
                f"{has}{_default(op.is_helm) if default else ''}); {consequence}",
                path,
            )


RULE = folder_rule(
    __name__,
    check,
    facts={
        "GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES,
        "ASSET_TOLERATIONS_URL": ASSET_TOLERATIONS_URL,
    },
)
