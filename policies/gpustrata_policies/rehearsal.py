"""The deploy rehearsal: what the cluster would do, step by step, as `pulumi up` creates
a program's resources.

``pulumi preview`` says what changes; it does not say whether the stack comes up. The
rehearsal replays the registered resources in their registration order (Pulumi creates a
resource only after everything it depends on, and registration follows that order) and,
at each step, asks of a model of the cluster what a real ``up`` would meet:

* the nodes that exist then: the node groups and Karpenter NodePools (with their
  controller) among the step's transitive dependencies, with their taints, labels and
  minimum size (a resource that does not depend on a node group may start before it
  exists, however the program is ordered);
* the CRDs installed then: by the charts and CustomResourceDefinitions among its
  dependencies;
* each awaited Pod of the step: a Helm release (``skipAwait`` false) waits for its chart's
  controller Pods (catalogued per chart and version, :mod:`gpustrata.catalog.charts`), an
  EKS add-on for its Pods, a Deployment or StatefulSet for its replicas.

A step the cluster cannot satisfy *would hang* (a wait that times out: the release's 15
minutes) or *would fail* (the API server refuses it). A KubeRay custom resource is not
awaited by Pulumi, so a Ray head with no node leaves ``up`` green and the model
*serving nothing*. What the offline model cannot know (a chart not catalogued, a Secret
created outside the stack, quotas and zone capacity of the account) is said so, never
assumed. Destroy is rehearsed in reverse: what must go before what it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gpustrata_policies.inputs.pulumi import (
    ADDON_TOKEN,
    HELM_RELEASE_TOKENS,
    NODE_GROUP_TOKEN,
    addon_object,
    object_from_pulumi,
)
from gpustrata_policies.view.device_classes import (
    DRIVER_FIX,
    claims_gpu_class,
    device_classes_installed,
)
from gpustrata_policies.view.dra import GPU_DEVICE_CLASS
from gpustrata_policies.view.kinds import RAY_KINDS
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool, pools_of
from gpustrata_policies.view.scheduling import (
    ADDON_KIND,
    PodNeed,
    chart_name,
    cluster_autoscaler,
    crds_installed,
    custom_kind,
    landing,
    pods_that_must_run,
    room,
)

__all__ = ["Rehearsal", "Step", "rehearse"]

Status = Literal["ok", "would-hang", "would-fail", "serves-nothing", "not-evaluated"]
BLOCKING: frozenset[str] = frozenset({"would-hang", "would-fail", "serves-nothing"})
_AWAITED_KINDS = frozenset({"Deployment", "StatefulSet", "Job", "ReplicaSet", "Pod"})
_KARPENTER_CHART = "karpenter"
CLUSTER_TOKEN = "aws:eks/cluster:Cluster"


class Record(Protocol):
    """What the rehearsal reads of a registered resource (``mockrun.Registered``)."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> dict[str, Any]: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Step:
    """One resource's step of the rehearsal."""

    index: int
    resource: str
    type: str
    status: Status
    message: str
    fix: str = ""

    @classmethod
    def of(cls, index: int, record: Record, status: Status, message: str, fix: str = "") -> Step:
        """The step of *record*, the *index*-th resource registered."""
        return cls(index, record.name, record.type, status, message, fix)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "index": self.index,
            "resource": self.resource,
            "type": self.type,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Rehearsal:
    """Every step that says something, in creation order, and the destroy checks."""

    steps: list[Step] = field(default_factory=list)
    destroy: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What only a real account can tell (quotas, zone capacity, Secrets made outside)."""

    @property
    def blockers(self) -> list[Step]:
        """Steps that would hang, fail or leave a model serving nothing."""
        return [s for s in [*self.steps, *self.destroy] if s.status in BLOCKING]

    @property
    def first_blocker(self) -> Step | None:
        """The first thing that would stop `up` (or leave it serving nothing)."""
        blockers = self.blockers
        return blockers[0] if blockers else None

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``plan --format json``'s ``rehearsal``)."""
        first = self.first_blocker
        return {
            "first_blocker": first.as_dict() if first else None,
            "steps": [s.as_dict() for s in self.steps],
            "destroy": [s.as_dict() for s in self.destroy],
            "notes": list(self.notes),
        }

    def text(self) -> list[str]:
        """Lines for the text report."""
        counted = {s: 0 for s in ("ok", *sorted(BLOCKING), "not-evaluated")}
        for s in self.steps:
            counted[s.status] = counted.get(s.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in counted.items() if n)
        lines = [f"Deploy rehearsal (creation order): {summary or 'nothing to check'}"]
        first = self.first_blocker
        if first is None:
            lines.append("  every awaited step can complete; no custom resource lacks its CRD")
        else:
            lines.append(f"  first blocker: [{first.status}] {first.resource}: {first.message}")
            if first.fix:
                lines.append(f"      fix: {first.fix}")
        for s in [*self.steps, *self.destroy]:
            if s is first or s.status == "ok":
                continue
            lines.append(f"  [{s.status}] {s.resource}: {s.message}")
            if s.fix:
                lines.append(f"      fix: {s.fix}")
        lines += [f"  note: {n}" for n in self.notes]
        return lines


def _closures(records: Sequence[Record]) -> dict[str, set[str]]:
    """Resource name -> everything it waits for, transitively (registration order is a
    topological order: a resource's dependencies were registered before it)."""
    out: dict[str, set[str]] = {}
    for r in records:
        seen: set[str] = set()
        for dep in r.depends_on:
            seen.add(dep)
            seen |= out.get(dep, set())
        out[r.name] = seen
    return out


def _is_karpenter(obj: K8sObject) -> bool:
    """The Karpenter controller's release (a chart name or an OCI reference to it)."""
    return obj.kind == "HelmRelease" and chart_name(obj) == _KARPENTER_CHART


def _skip_await(record: Record) -> bool:
    return bool(record.inputs.get("skipAwait"))


def _without_karpenter(pools: Iterable[GpuPool]) -> list[GpuPool]:
    """The pools that are not Karpenter's (a NodePool launches nothing without its
    controller)."""
    return [
        p for p in pools if p.obj.kind != "NodePool" and p.extra.get("provisioner") != "karpenter"
    ]


def _pools_at(objects: Iterable[K8sObject], karpenter_running: bool) -> list[GpuPool]:
    pools = pools_of(objects)
    return pools if karpenter_running else _without_karpenter(pools)


def _pool_fix(need: PodNeed) -> str:
    if need.chart is not None and need.values_path:
        return (
            f"give it a node: an untainted node group it selects, created before the "
            f"release (depends_on), or set {need.chart.chart} values {need.values_path} / "
            "its tolerations to a pool that exists"
        )
    return (
        "add an untainted system node group for Pods without a GPU toleration (or a "
        "toleration and selector for a pool that exists), and make this resource depend "
        "on it"
    )


def _place(
    need: PodNeed, now: Sequence[GpuPool], every: Sequence[GpuPool], autoscaled: bool = False
) -> tuple[bool, str, str]:
    """(lands, why not, fix) for one Pod against the pools that exist now (*autoscaled*: a
    Cluster Autoscaler runs, which scales a node group up from zero)."""
    fits, why = landing(need, now, scale_from_zero=autoscaled)
    if fits:
        short = room(need, fits, scale_from_zero=autoscaled)
        if short:
            names = ", ".join(p.name for p in fits)
            return False, short, f"give {names} a minimum size of {need.distinct_nodes}"
        return True, "", ""
    later, why_every = landing(need, every, scale_from_zero=autoscaled)
    if later:
        names = ", ".join(p.name for p in later)
        return (
            False,
            f"{need.name} can only run on {names}, which is not created before this step "
            "(no dependency): its wait starts before any node it can use exists",
            f"make it depend on the node group(s) {names}",
        )
    if not now:  # nothing before it; say why no pool of the whole stack would do either
        why = why_every
    reasons = "; ".join(why) if why else "the stack describes no node pool"
    empty = [w.split(":", 1)[0].removeprefix("pool ") for w in why if "min size 0" in w]
    if empty and len(empty) == len(why):
        return (
            False,
            f"{need.name} has no node: {reasons}",
            f"give {', '.join(empty)} min_size >= 1 (nothing in the stack scales a managed "
            "node group up from zero) or let Karpenter provision it (provisioner: karpenter)",
        )
    return False, f"{need.name} has no node: {reasons}", _pool_fix(need)


def rehearse(records: Sequence[Record]) -> Rehearsal:
    """Replay *records* (registration order) against a model of the cluster."""
    out = Rehearsal()
    objects: dict[str, K8sObject] = {}
    for r in records:
        raw = object_from_pulumi(r.type, r.name, r.inputs)
        if raw is not None:
            objects[r.name] = K8sObject(raw)
    closures = _closures(records)
    node_groups = [r for r in records if r.type == NODE_GROUP_TOKEN]
    existing_cluster = not any(r.type == CLUSTER_TOKEN for r in records)
    karpenter_anywhere = existing_cluster or any(_is_karpenter(o) for o in objects.values())
    every_pool = _pools_at(objects.values(), karpenter_running=karpenter_anywhere)
    if existing_cluster:
        out.notes.append(
            "an existing cluster: its nodes other than the pools the stack describes are "
            "not known here, so Pods that land nowhere described are reported, not assumed "
            "to hang"
        )
    classes = device_classes_installed(list(objects.values()))
    for index, r in enumerate(records):
        obj = objects.get(r.name)
        if r.type == CLUSTER_TOKEN:
            found = _self_managed_coredns(index, r, records, every_pool)
            out.steps += [found] if found is not None else []
        if obj is None:
            continue
        if claims_gpu_class(obj) and GPU_DEVICE_CLASS not in classes:
            out.steps.append(_device_class_step(index, r, obj, existing_cluster))
            continue
        before = [objects[n] for n in closures[r.name] if n in objects]
        if existing_cluster:  # described pools are there from the start
            before += [o for o in objects.values() if o.kind == "GpuNodePool"]
        karpenter = any(_is_karpenter(o) for o in before)
        step = _step(index, r, obj, before, karpenter, every_pool, existing_cluster)
        if step is not None:
            out.steps.append(step)
    out.destroy = _destroy_steps(records, objects, closures)
    if node_groups:
        out.notes.append(
            "EC2 vCPU quotas and which zones offer each instance type are the account's: "
            "the program picks subnets in zones that offer a GPU type, and `up` fails on a "
            "quota below the pools' vCPUs (see docs/howto/first-pulumi-up.md for the codes)"
        )
    return out


def _step(
    index: int,
    record: Record,
    obj: K8sObject,
    before: list[K8sObject],
    karpenter: bool,
    every_pool: list[GpuPool],
    existing_cluster: bool,
) -> Step | None:
    kind = obj.kind
    step = _crd_step(index, record, obj, before)
    if step is not None and existing_cluster:  # its CRDs are not in the program
        return Step.of(
            index,
            record,
            "not-evaluated",
            f"{step.message.split(':', 1)[0]}: nothing in the stack installs its CRD; the "
            "existing cluster may have it",
            step.fix,
        )
    if step is not None:
        return step
    awaited = (
        (record.type in HELM_RELEASE_TOKENS and not _skip_await(record))
        or kind == ADDON_KIND
        or kind in _AWAITED_KINDS
        or kind in RAY_KINDS
    )
    if not awaited:
        return None
    needs, unread = pods_that_must_run([obj])
    if unread:
        return Step.of(index, record, "not-evaluated", "; ".join(unread))
    needs = [n for n in needs if (n.awaited or kind in RAY_KINDS) and n.at_install]
    if not needs:
        return Step.of(index, record, "ok", "no Pod to place")
    now = _pools_at(before, karpenter)
    if kind in RAY_KINDS:  # nothing waits: its Pods land once any node they fit exists
        now = every_pool
    if _is_karpenter(obj):  # the controller cannot run on the nodes it would launch
        now, every_pool = _without_karpenter(now), _without_karpenter(every_pool)
    autoscaled = cluster_autoscaler(before) is not None
    placed = [(need, *_place(need, now, every_pool, autoscaled)) for need in needs]
    failing = [(need, why, fix) for need, lands, why, fix in placed if not lands]
    if not failing:
        return Step.of(index, record, "ok", f"{len(needs)} Pod(s) have a node")
    _, why, fix = failing[0]
    others = [n.name.rsplit(": ", 1)[-1] for n, _, _ in failing[1:]]
    if others:
        why += f" (likewise {', '.join(others)})"
    if existing_cluster:
        return Step.of(
            index,
            record,
            "not-evaluated",
            f"{why} (the existing cluster may have other nodes)",
            fix,
        )
    if kind in RAY_KINDS:
        return Step.of(
            index,
            record,
            "serves-nothing",
            f"{why}; Pulumi does not await KubeRay resources, so `up` succeeds and the "
            "model serves nothing",
            fix,
        )
    status: Status = "would-fail" if kind == ADDON_KIND else "would-hang"
    wait = (
        "the add-on stays DEGRADED and its creation fails"
        if kind == ADDON_KIND
        else "its wait times out"
    )
    return Step.of(index, record, status, f"{why}; {wait}", fix)


def _self_managed_coredns(
    index: int, cluster: Record, records: Sequence[Record], every_pool: Sequence[GpuPool]
) -> Step | None:
    """EKS installs CoreDNS itself (``bootstrapSelfManagedAddons`` defaults to true) unless
    the stack manages it as an add-on. Nothing awaits that Deployment: if no node of the
    stack takes its Pods, `up` finishes with no DNS in the cluster."""
    if cluster.inputs.get("bootstrapSelfManagedAddons") is False:
        return None
    if any(r.type == ADDON_TOKEN and r.inputs.get("addonName") == "coredns" for r in records):
        return None  # the add-on's own step checks it
    addon = K8sObject(addon_object(f"{cluster.name}-coredns", {"addonName": "coredns"}))
    needs, unread = pods_that_must_run([addon])
    if unread:
        return None
    for need in needs:
        lands, why, _fix = _place(need, every_pool, every_pool)
        if not lands:
            where = why.split(" has no node", 1)[-1]
            return Step.of(
                index,
                cluster,
                "serves-nothing",
                f"CoreDNS, which EKS installs itself, has no node{where}; nothing awaits it, so "
                "`up` goes on with no DNS in the cluster",
                "add an untainted system node group (CoreDNS tolerates only CriticalAddonsOnly "
                "and the control plane), or manage CoreDNS as an aws.eks.Addon whose "
                "configurationValues tolerate and select a pool that exists; without DNS, "
                "Karpenter, model downloads and Ray fail",
            )
    return None


def _device_class_step(index: int, record: Record, obj: K8sObject, existing_cluster: bool) -> Step:
    """A GPU claim on a DeviceClass nothing in the stack creates: its Pods stay Pending (the
    class need not come first: the scheduler retries once it exists)."""
    message = (
        f"{obj.kind} {obj.name} claims devices of the DeviceClass {GPU_DEVICE_CLASS}, which "
        "nothing in the stack installs (no NVIDIA DRA driver)"
    )
    if existing_cluster:
        return Step.of(
            index,
            record,
            "not-evaluated",
            f"{message}; the existing cluster may have it",
            DRIVER_FIX,
        )
    return Step.of(
        index,
        record,
        "would-hang",
        f"{message}: the claims are never allocated, the Pods that use them stay Pending and "
        "their workload's wait times out",
        DRIVER_FIX,
    )


def _crd_step(index: int, record: Record, obj: K8sObject, before: list[K8sObject]) -> Step | None:
    """A custom resource whose CRD nothing before it installs: 'no matches for kind'."""
    group_kind = custom_kind(obj)
    if group_kind is None:
        return None
    installed = crds_installed(before)
    if group_kind in installed:
        return None
    return Step.of(
        index,
        record,
        "would-fail",
        f"{obj.kind} ({group_kind}): no CRD is installed before it; the API server answers "
        f'"no matches for kind {obj.kind}"',
        "install the chart that owns the CRD in the stack and make this resource depend on "
        "it, or refuse the feature (e.g. monitoring.mode / keda.enabled in a gpustrata stack)",
    )


def _destroy_steps(
    records: Sequence[Record], objects: Mapping[str, K8sObject], closures: Mapping[str, set[str]]
) -> list[Step]:
    """Destroy goes in reverse dependency order: a Karpenter NodePool must depend on the
    controller's release (else the controller may go first and its instances keep
    running), and a Helm release on the node groups its Pods run on."""
    out: list[Step] = []
    karpenter = [r.name for r in records if r.name in objects and _is_karpenter(objects[r.name])]
    for index, r in enumerate(records):
        obj = objects.get(r.name)
        if obj is None or obj.kind != "NodePool" or not karpenter:
            continue
        if not any(k in closures[r.name] for k in karpenter):
            out.append(
                Step.of(
                    index,
                    r,
                    "would-fail",
                    "on destroy the Karpenter controller may be deleted before this NodePool, "
                    "leaving its NodeClaims' instances running (and billing)",
                    "make the NodePool depend on the Karpenter release",
                )
            )
    out += _delete_hooks(records, objects, closures)
    return out


def _delete_hooks(
    records: Sequence[Record], objects: Mapping[str, K8sObject], closures: Mapping[str, set[str]]
) -> list[Step]:
    """`helm uninstall` runs a chart's pre-delete hook Jobs and waits for them: their nodes
    must still exist, so the release must depend on the node groups they land on (destroy
    deletes dependents first)."""
    out: list[Step] = []
    every = pools_of(objects.values())
    for index, r in enumerate(records):
        obj = objects.get(r.name)
        if obj is None or r.type not in HELM_RELEASE_TOKENS:
            continue
        needs, _ = pods_that_must_run([obj])
        hooks = [n for n in needs if n.hook is not None and "pre-delete" in n.hook]
        kept = pools_of(objects[n] for n in closures[r.name] if n in objects)
        for need in hooks:
            if landing(need, kept)[0] or not landing(need, every)[0]:
                continue  # its node outlives the release, or K017 / the create steps say it
            names = ", ".join(p.name for p in landing(need, every)[0])
            out.append(
                Step.of(
                    index,
                    r,
                    "would-hang",
                    f"on destroy {need.name} (a pre-delete hook Job, awaited by `helm "
                    f"uninstall`) runs on {names}, which the release does not depend on: "
                    "destroy may delete those nodes first and the uninstall waits forever",
                    f"make the release depend on the node group(s) {names}",
                )
            )
            break
    return out
