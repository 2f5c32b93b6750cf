"""K006 kubelet-reservations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata.core.quantity import parse_quantity
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.karpenter import KARPENTER_NODECLASS_DOCS
from gpustrata_policies.view.nodes import KUBE_RESERVED, gpu_pools, kubelet_of, pool_label
from gpustrata_policies.view.objects import K8sObject, as_map
from gpustrata_policies.view.pools import GpuPool

RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")


def _reserved(section: Mapping[str, Any], key: str) -> bool:
    value = parse_quantity(section.get(key))
    return value is not None and value > 0


Problem = tuple[str, str, tuple[str, ...]]
"""(case, kubelet section, resources): ``not-reservable``, ``unreserved`` or
``no-eviction-floor``."""


def _problems(kubelet: Mapping[str, Any], karpenter: bool = False) -> tuple[Problem, ...]:
    problems: list[Problem] = []
    for name in ("systemReserved", "kubeReserved"):
        section = as_map(kubelet.get(name), f"kubelet.{name}")
        bad = tuple(sorted(k for k in section if k not in RESERVABLE))
        if bad:
            problems.append(("not-reservable", name, bad))
        missing = tuple(k for k in ("cpu", "memory") if not _reserved(section, k))
        if karpenter and name == "kubeReserved" and name not in kubelet:
            missing = ()  # Karpenter computes kubeReserved from the instance type when unset
        if missing:
            problems.append(("unreserved", name, missing))
    eviction = as_map(kubelet.get("evictionHard"), "kubelet.evictionHard")
    threshold = eviction.get("memory.available")
    if not isinstance(threshold, str | int | float) or not str(threshold).lstrip("<"):
        problems.append(("no-eviction-floor", "evictionHard", ("memory.available",)))
    return tuple(problems)


def _problem_text(problem: Problem) -> str:
    """One problem of a kubelet configuration, as a clause."""
    case, name, keys = problem
    if case == "not-reservable":
        return (
            f"{name} lists {', '.join(keys)}, which the kubelet cannot reserve (it "
            f"accepts only {', '.join(RESERVABLE)} and exits with 'cannot reserve "
            f'"{keys[0]}" resource\')'
        )
    if case == "unreserved":
        who = "system daemons" if name == "systemReserved" else "the kubelet and runtime"
        return f"{name} reserves no {' or '.join(keys)} for {who}"
    return (
        "evictionHard sets no memory.available threshold (at most the kubelet's 100Mi "
        "default applies)"
    )


def _judge_karpenter(obj: K8sObject, pools: list[GpuPool]) -> Iterator[Verdict]:
    """The kubelet settings of Karpenter GPU NodePools: the EC2NodeClass's ``spec.kubelet``
    (v1), or the NodePool's ``template.spec.kubelet`` (v1beta1); one finding per object."""
    if obj.kind == "NodePool":
        orphans = [p for p in pools if p.obj is obj and p.extra.get("kubeletObject") is None]
        for pool in orphans:
            node_class = str(pool.extra.get("nodeClass") or "(none)")
            values = {"pool": pool.name, "node_class": node_class}
            yield Verdict("not_evaluated", "node-class-missing", values=values)
    served = [p for p in pools if p.extra.get("kubeletObject") is obj]
    if not served:
        return
    kubelet = kubelet_of(served[0]) or {}
    problems = _problems(kubelet, karpenter=True)
    if not problems:
        return
    path = ("spec", "kubelet") if obj.kind == "EC2NodeClass" else ("spec", "template", "spec")
    yield Verdict(
        "violation",
        "karpenter-kubelet",
        values={
            "object": f"{obj.kind} {obj.name}",
            "pools": tuple(p.name for p in served),
            "has_kubelet": bool(kubelet),
            "problems": problems,
        },
        thresholds={"reservable": RESERVABLE},
        path=path if obj.kind == "EC2NodeClass" else (*path, "kubelet"),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """GPU pools reserve cpu/memory for system and kubelet and set a memory eviction floor."""
    if obj.kind in ("EC2NodeClass", "NodePool"):
        yield from _judge_karpenter(
            obj, [p for p in gpu_pools(ctx) if p.extra.get("source") == "NodePool"]
        )
        return
    if obj.kind != "GpuNodePool":
        return
    for pool in gpu_pools(ctx):
        if pool.obj is not obj:
            continue
        kubelet = kubelet_of(pool)
        if kubelet is None:
            values: dict[str, Value] = {"pool": pool_label(pool), "derived": pool.derived}
            yield Verdict("not_evaluated", "kubelet-undescribed", values=values)
            continue
        problems = _problems(kubelet)
        if problems:
            values = {"pool": pool_label(pool), "problems": problems}
            yield Verdict(
                "violation",
                "pool-kubelet",
                values=values,
                thresholds={"reservable": RESERVABLE},
                path=("spec", "kubelet"),
            )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K006 message quotes beyond its values: the problems as clauses, the pools
    a node class serves, and where the kubelet settings live."""
    v = verdict.values
    out: dict[str, str] = {}
    if "derived" in v:
        out["where"] = (
            "is a node group whose kubelet settings live in its launch template user data"
            if v["derived"]
            else "does not describe its kubelet settings (spec.kubelet)"
        )
    if "problems" in v:
        problems = cast(tuple[Problem, ...], v["problems"])
        out["problems"] = "; ".join(_problem_text(p) for p in problems)
    if "pools" in v:
        out["names"] = ", ".join(cast(tuple[str, ...], v["pools"]))
        out["kubelet"] = "its spec.kubelet" if v["has_kubelet"] else "it sets no spec.kubelet"
    return out


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"KUBE_RESERVED": KUBE_RESERVED, "KARPENTER_NODECLASS_DOCS": KARPENTER_NODECLASS_DOCS},
)
