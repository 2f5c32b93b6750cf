"""K006 kubelet-reservations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata.core.quantity import parse_quantity
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.karpenter import KARPENTER_NODECLASS_DOCS
from gpustrata_policies.view.nodes import KUBE_RESERVED, gpu_pools, kubelet_of, pool_label
from gpustrata_policies.view.objects import K8sObject, as_map

RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")


def _reserved(section: Mapping[str, Any], key: str) -> bool:
    value = parse_quantity(section.get(key))
    return value is not None and value > 0


def _problems(kubelet: Mapping[str, Any], karpenter: bool = False) -> list[str]:
    problems = []
    for name in ("systemReserved", "kubeReserved"):
        section = as_map(kubelet.get(name), f"kubelet.{name}")
        bad = sorted(k for k in section if k not in RESERVABLE)
        if bad:
            problems.append(
                f"{name} lists {', '.join(bad)}, which the kubelet cannot reserve (it "
                f"accepts only {', '.join(RESERVABLE)} and exits with 'cannot reserve "
                f'"{bad[0]}" resource\')'
            )
        missing = [k for k in ("cpu", "memory") if not _reserved(section, k)]
        if karpenter and name == "kubeReserved" and name not in kubelet:
            missing = []  # Karpenter computes kubeReserved from the instance type when unset
        if missing:
            who = "system daemons" if name == "systemReserved" else "the kubelet and runtime"
            problems.append(f"{name} reserves no {' or '.join(missing)} for {who}")
    eviction = as_map(kubelet.get("evictionHard"), "kubelet.evictionHard")
    threshold = eviction.get("memory.available")
    if not isinstance(threshold, str | int | float) or not str(threshold).lstrip("<"):
        problems.append(
            "evictionHard sets no memory.available threshold (at most the kubelet's 100Mi "
            "default applies)"
        )
    return problems


def _check_karpenter(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The kubelet settings of Karpenter GPU NodePools: the EC2NodeClass's ``spec.kubelet``
    (v1), or the NodePool's ``template.spec.kubelet`` (v1beta1); one finding per object."""
    pools = [p for p in gpu_pools(ctx) if p.extra.get("source") == "NodePool"]
    if obj.kind == "NodePool":
        orphans = [p for p in pools if p.obj is obj and p.extra.get("kubeletObject") is None]
        for pool in orphans:
            yield ctx.not_evaluated(
                obj,
                f"GPU NodePool {pool.name} names EC2NodeClass "
                f"{pool.extra.get('nodeClass') or '(none)'}, which is not in the input, and "
                "sets no kubelet settings itself",
            )
    served = [p for p in pools if p.extra.get("kubeletObject") is obj]
    if not served:
        return
    kubelet = kubelet_of(served[0]) or {}
    problems = _problems(kubelet, karpenter=True)
    if not problems:
        return
    names = ", ".join(p.name for p in served)
    path = ("spec", "kubelet") if obj.kind == "EC2NodeClass" else ("spec", "template", "spec")
    where = "its spec.kubelet" if kubelet else "it sets no spec.kubelet"
    yield ctx.violation(
        obj,
        f"{obj.kind} {obj.name} launches the nodes of GPU NodePool(s) {names} and {where}: "
        f"{'; '.join(problems)} (Karpenter computes kubeReserved from the instance type when "
        "it is unset and reserves nothing for the system)",
        path if obj.kind == "EC2NodeClass" else (*path, "kubelet"),
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """GPU pools reserve cpu/memory for system and kubelet and set a memory eviction floor."""
    if obj.kind in ("EC2NodeClass", "NodePool"):
        yield from _check_karpenter(ctx, obj)
        return
    if obj.kind != "GpuNodePool":
        return
    for pool in gpu_pools(ctx):
        if pool.obj is not obj:
            continue
        kubelet = kubelet_of(pool)
        if kubelet is None:
            where = (
                "is a node group whose kubelet settings live in its launch template user data"
                if pool.derived
                else "does not describe its kubelet settings (spec.kubelet)"
            )
            yield ctx.not_evaluated(obj, f"{pool_label(pool)} {where}")
            continue
        problems = _problems(kubelet)
        if problems:
            yield ctx.violation(
                obj,
                f"GPU {pool_label(pool)}: {'; '.join(problems)}",
                ("spec", "kubelet"),
            )


RULE = folder_rule(
    __name__,
    check,
    facts={"KUBE_RESERVED": KUBE_RESERVED, "KARPENTER_NODECLASS_DOCS": KARPENTER_NODECLASS_DOCS},
)
