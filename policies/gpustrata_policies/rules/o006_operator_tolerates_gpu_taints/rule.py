"""O006 operator-tolerates-gpu-taints."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
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


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The operator's DaemonSets and NFD tolerate every hard taint of the GPU pools."""
    for op in operators_for(ctx, obj):
        pools = gpu_pools(ctx)
        if not pools:
            yield Verdict("not_evaluated", "no-pools")
            continue
        which = ["daemonsets", "nfd"] if op.deploys_nfd else ["daemonsets"]
        for component in which:
            tolerations, default = op.tolerations(component)
            missing = tuple(
                (p.name, tuple(_taint(t) for t in bad))
                for p in pools
                if (bad := [t for t in p.hard_taints if not tolerates(tolerations, t)])
            )
            if not missing:
                continue
            path = (
                op.path("daemonsets", "tolerations")
                if component == "daemonsets"
                else op.path("node-feature-discovery", "worker", "tolerations")
            )
            yield Verdict(
                "violation",
                "taints-not-tolerated",
                values={
                    "operator": op.label,
                    "component": component,
                    "untolerated": missing,
                    "tolerations": tuple(_toleration(t) for t in tolerations),
                    "default": _default(op.is_helm) if default else "",
                },
                path=path,
            )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an O006 message derives: the untolerated taints by pool, the tolerations
    set, and what the component is and what its missing tolerations cost."""
    v = verdict.values
    if "component" not in v:
        return {}
    missing = "; ".join(
        f"pool {name}: {', '.join(taints)}"
        for name, taints in cast(tuple[tuple[str, tuple[str, ...]], ...], v["untolerated"])
    )
    what, consequence = _CONSEQUENCE[str(v["component"])]
    return {
        "missing": missing,
        "has": ", ".join(cast(tuple[str, ...], v["tolerations"])) or "none",
        "what": what,
        "consequence": consequence,
    }


_FACTS = {
    "GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES,
    "ASSET_TOLERATIONS_URL": ASSET_TOLERATIONS_URL,
}
"""The facts the rule's meta.yaml cites (``${NAME}``)."""

RULE = folder_rule(__name__, worded(judge, fields), facts=_FACTS)
