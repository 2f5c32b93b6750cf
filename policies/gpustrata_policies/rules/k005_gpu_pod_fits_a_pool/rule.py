"""K005 gpu-pod-fits-a-pool."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any, cast

from gpustrata.core.quantity import (
    ZERO,
    exact_sum,
    exceeds,
    format_cores,
    kubelet_reserved,
    parse_quantity,
)
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.device_plugin import Sharing
from gpustrata_policies.view.nodes import (
    KUBE_RESERVED,
    cluster_gpu_sharing,
    fmt_count,
    gpu_pools,
    gpu_requests,
    kubelet_of,
    pool_label,
    targeted_pools,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, as_map
from gpustrata_policies.view.pools import GpuPool, launchable_types

MIB = 1024**2
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Demand:
    """What one pod asks of a node."""

    gpus: Fraction
    """Whole-GPU resources (``nvidia.com/gpu`` and renamed shared GPUs); MIG excluded."""
    cpu: Fraction | None
    memory: Fraction | None


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one node of a pool offers, and how that was worked out."""

    gpus: int | None
    cpu: Fraction | None
    memory: Fraction | None
    basis: str


def _resource(pod: PodRef, name: str) -> Fraction | None:
    """Effective pod request of cpu/memory: sum of app containers, max with init ones,
    plus the pod overhead; ``None`` when no container states it."""
    found = False

    def one(c: Any) -> Fraction:
        nonlocal found
        raw = c.resources("requests").get(name)
        if raw is None:
            raw = c.resources("limits").get(name)
        if raw is UNKNOWN:
            raise UnknownInput(f"{name} of {c.label}")
        value = parse_quantity(raw)
        if value is None:
            return ZERO
        found = True
        return value

    app = exact_sum(one(c) for c in pod.containers(init=False))
    init = max((one(c) for c in pod.containers() if c.init), default=ZERO)
    overhead = parse_quantity(as_map(pod.spec.get("overhead"), "overhead").get(name))
    if not found:
        return None
    most = init if exceeds(init, app) else app  # max(app, init)
    return most + overhead if overhead else most


def _demand(pod: PodRef, extra: tuple[str, ...]) -> Demand:
    gpus = exact_sum(
        n for r, n in gpu_requests(pod, extra).items() if not r.startswith("nvidia.com/mig-")
    )
    return Demand(gpus, _resource(pod, "cpu"), _resource(pod, "memory"))


def _reserved(kubelet: Mapping[str, Any], name: str, capacity: Fraction) -> Fraction:
    return kubelet_reserved(
        as_map(kubelet.get("systemReserved"), "systemReserved"),
        as_map(kubelet.get("kubeReserved"), "kubeReserved"),
        as_map(kubelet.get("evictionHard"), "evictionHard"),
        name,
        capacity,
    )


def _capacity(
    pool: GpuPool, instance: str | None = None, sharing: Sharing | None = None
) -> Capacity:
    """A node's capacity in *pool*; *instance*: one of the instance types a Karpenter
    NodePool may launch (its GPUs, CPU and memory from the hardware catalogue); *sharing*:
    the cluster's device-plugin sharing config, if any."""
    replicas = parse_quantity(pool.labels.get("nvidia.com/gpu.replicas")) or 1
    shared = ""
    if (
        replicas == 1
        and sharing is not None
        and sharing.resource == "nvidia.com/gpu"
        and not pool.from_nodes
    ):
        # The device plugin advertises each GPU `replicas` times (its README, time-slicing
        # and MPS); Nodes show that in GFD's nvidia.com/gpu.replicas label (no label: not
        # shared there), a described pool does not show it.
        replicas, shared = Fraction(sharing.replicas), f", {sharing.where}"
    if pool.from_nodes:  # what the kubelet reports: after its reservations already
        allocatable = as_map(pool.extra.get("allocatable"), "allocatable")
        return Capacity(
            int(pool.gpu_count * replicas) if pool.gpu_count else None,
            parse_quantity(allocatable.get("cpu")),
            parse_quantity(allocatable.get("memory")),
            "Node status.allocatable",
        )
    cpu = parse_quantity(pool.extra.get("cpu"))
    mem_mib = parse_quantity(pool.extra.get("memoryMiB"))
    memory = mem_mib * MIB if mem_mib is not None else None
    source = "described"
    name = instance or pool.text("instanceType")
    if (cpu is None or memory is None) and name:
        inst = catalogs.instance(name)
        if inst is not None:
            cpu = cpu if cpu is not None else Fraction(inst.vcpu)
            memory = memory if memory is not None else Fraction(inst.memory_mib * MIB)
            source = f"{name} in the hardware catalogue"
    count = pool.gpu_count
    if instance is not None:
        inst = catalogs.instance(instance)
        count = inst.gpu_count if inst is not None else None
    gpus = int(count * replicas) if count else None
    kubelet = kubelet_of(pool)
    if kubelet is None:
        return Capacity(
            gpus, cpu, memory, f"capacity ({source}; reservations not described{shared})"
        )
    if cpu is not None:
        cpu -= _reserved(kubelet, "cpu", cpu)
    if memory is not None:
        memory -= _reserved(kubelet, "memory", memory)
    return Capacity(gpus, cpu, memory, f"allocatable after kubelet reservations{shared}")


def _gib(value: Fraction) -> str:
    return f"{float(value) / GIB:.1f}Gi"


Shortfall = tuple[str, Fraction | int]
"""(``gpus``, ``cpu`` or ``memory``, what one node offers of it) where the pod needs more."""
PoolMiss = tuple[str, int, str | None, tuple[Shortfall, ...], str]
"""(pool label, instance types it may launch or 0, the largest one, shortfalls, basis)."""


def _shortfalls(demand: Demand, cap: Capacity) -> tuple[tuple[Shortfall, ...], bool]:
    """What does not fit, and whether any needed figure was unknown."""
    short: list[Shortfall] = []
    unknown = False
    if demand.gpus:
        if cap.gpus is None:
            unknown = True
        elif exceeds(demand.gpus, cap.gpus):
            short.append(("gpus", cap.gpus))
    for what, need, have in (("cpu", demand.cpu, cap.cpu), ("memory", demand.memory, cap.memory)):
        if need is None or need == 0:
            continue
        if have is None:
            unknown = True
        elif exceeds(need, have):
            short.append((what, have))
    return tuple(short), unknown


def _shortfall_text(short: tuple[Shortfall, ...]) -> str:
    """``4 GPU(s) per node, 7.5 CPU, 60.0Gi memory``."""
    parts = []
    for what, have in short:
        if what == "gpus":
            parts.append(f"{have} GPU(s) per node")
        elif what == "cpu":
            parts.append(f"{format_cores(Fraction(have))} CPU")
        else:
            parts.append(f"{_gib(Fraction(have))} memory")
    return ", ".join(parts)


def _labels(labels: Mapping[str, Any]) -> str:
    if not labels:
        return "no node labels"
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _demand_values(pod: PodRef, demand: Demand) -> dict[str, Value]:
    return {
        "pod": f"pod{pod.where}",
        "gpus": demand.gpus,
        "cpu": demand.cpu,
        "memory": demand.memory,
    }


def _asks(v: Mapping[str, Value]) -> str:
    gpus, cpu, memory = (cast(Fraction | None, v[k]) for k in ("gpus", "cpu", "memory"))
    parts = [f"{fmt_count(gpus)} GPU(s)"] if gpus else []
    if cpu:
        parts.append(f"{format_cores(cpu)} CPU")
    if memory:
        parts.append(f"{_gib(memory)} memory")
    return ", ".join(parts)


def _judge_pools(
    ctx: RuleContext, pod: PodRef, demand: Demand, pools: list[GpuPool]
) -> Iterator[Verdict]:
    targeted = targeted_pools(pod, pools)
    values = _demand_values(pod, demand)
    if not targeted:
        values["selected"] = _labels(pod.selected_labels())
        values["pools"] = tuple(p.name for p in pools)
        yield Verdict("violation", "no-pool-matches", values, path=(*pod.path, "nodeSelector"))
        return
    misses: list[PoolMiss] = []
    unknown: list[str] = []
    # The pod's selectors, read at the first pool (as a read per pool would) and kept.
    selectors: tuple[dict[str, Any], list[list[Mapping[str, Any]]]] | None = None
    for pool in targeted:
        if selectors is None:
            selectors = (pod.node_selector(), pod.required_affinity_terms())
        found = _pool_fit(ctx, pool, demand, launchable_types(pool, *selectors))
        if found is None:
            return  # fits this pool
        if isinstance(found, str):
            unknown.append(found)
        else:
            misses.append(found)
    if unknown:
        values["unknown_pools"] = tuple(unknown)
        yield Verdict("not_evaluated", "pool-capacity-unknown", values)
        return
    values["misses"] = tuple(misses)
    yield Verdict("violation", "fits-no-pool", values, path=(*pod.path, "containers"))


def _pool_fit(
    ctx: RuleContext, pool: GpuPool, demand: Demand, types: list[str]
) -> PoolMiss | str | None:
    """None where the pod fits *pool*, its name where a figure is unknown, else the miss."""
    if types:
        # A Karpenter NodePool launches whichever of its types fits the pod.
        caps: list[Capacity] = [
            ctx.memo(
                f"k005-capacity:{id(pool)}:{t}",
                partial(_capacity, pool, t, cluster_gpu_sharing(ctx)),
            )
            for t in types
        ]
        results = [_shortfalls(demand, c) for c in caps]
        if any(not short and not missing for short, missing in results):
            return None
        if all(short for short, _ in results) and not pool.extra.get("unknownTypes"):
            largest = max(zip(types, caps, strict=True), key=lambda tc: tc[1].cpu or 0)
            short = _shortfalls(demand, largest[1])[0]
            return (pool_label(pool), len(types), largest[0], short, largest[1].basis)
        return pool.name
    # A pool's capacity, worked out once per evaluation rather than once per Pod.
    cap: Capacity = ctx.memo(
        f"k005-capacity:{id(pool)}", partial(_capacity, pool, None, cluster_gpu_sharing(ctx))
    )
    short, missing = _shortfalls(demand, cap)
    if not short and not missing:
        return None
    if short:
        return (pool_label(pool), 0, None, short, cap.basis)
    return pool.name


def _judge_selectors(pod: PodRef, demand: Demand) -> Iterator[Verdict]:
    """No pool described: use the instance type / GPU count the pod selects, if any."""
    labels = pod.selected_labels()
    name = labels.get("node.kubernetes.io/instance-type")
    count = parse_quantity(labels.get("nvidia.com/gpu.count"))
    values = _demand_values(pod, demand)
    if isinstance(name, str):
        inst = catalogs.instance(name)
        if inst is None:
            yield Verdict("not_evaluated", "instance-uncatalogued", {**values, "instance": name})
            return
        cap = Capacity(
            inst.gpu_count,
            Fraction(inst.vcpu),
            Fraction(inst.memory_mib * MIB),
            f"{name} capacity before kubelet reservations, hardware catalogue",
        )
        where = f"instance type {name}"
    elif count is not None:
        cap = Capacity(int(count), None, None, "nvidia.com/gpu.count node selector")
        where = f"nodes labelled nvidia.com/gpu.count={fmt_count(count)}"
    else:
        return
    short, _ = _shortfalls(demand, cap)
    if short:
        values = {**values, "selects": where, "shortfalls": short, "basis": cap.basis}
        yield Verdict(
            "violation", "selected-node-too-small", values, path=(*pod.path, "nodeSelector")
        )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A GPU pod fits (GPUs, CPU, memory after reservations) a pool it selects."""
    extra = ctx.config.gpu_resources
    for pod in obj.pods():
        if not gpu_requests(pod, extra):
            continue
        demand = _demand(pod, extra)
        pools = gpu_pools(ctx)
        if pools:
            yield from _judge_pools(ctx, pod, demand, pools)
        else:
            yield from _judge_selectors(pod, demand)


def _miss_text(miss: PoolMiss) -> str:
    label, types, largest, short, basis = miss
    if not types:
        return f"{label} offers {_shortfall_text(short)} ({basis})"
    return (
        f"{label}: none of the {types} instance type(s) it may launch for this pod fits, the "
        f"largest, {largest}, offers {_shortfall_text(short) or 'too little'} ({basis})"
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K005 message quotes beyond its values: the pod's demand, the pools named,
    and what each pool or node offers short of it."""
    v = verdict.values
    out = {"asks": _asks(v)}
    if "pools" in v:
        out["pool_names"] = ", ".join(cast(tuple[str, ...], v["pools"]))
    if "unknown_pools" in v:
        out["unknown_names"] = ", ".join(cast(tuple[str, ...], v["unknown_pools"]))
    if "shortfalls" in v:
        out["short"] = _shortfall_text(cast(tuple[Shortfall, ...], v["shortfalls"]))
    if "misses" in v:
        out["misses"] = "; ".join(_miss_text(m) for m in cast(tuple[PoolMiss, ...], v["misses"]))
    return out


RULE = folder_rule(__name__, worded(judge, fields), facts={"KUBE_RESERVED": KUBE_RESERVED})
