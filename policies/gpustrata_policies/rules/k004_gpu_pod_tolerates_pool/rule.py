"""K004 gpu-pod-tolerates-pool."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.launchers import KSERVE_PRESET_SOURCE
from gpustrata_policies.view.nodes import (
    AKS_ADMISSION,
    EKS_ADMISSION,
    EXTENDED_RESOURCE_TOLERATION,
    GKE_ADMISSION,
    K8S_DEFAULT_ADMISSION,
    Admission,
    admitted_tolerations,
    cluster_admission,
    gpu_pools,
    gpu_requests,
    targeted_pools,
    tolerations_of,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, dig
from gpustrata_policies.view.pools import GpuPool, tolerates
from gpustrata_policies.view.profile import active_profile

DEFAULT_TAINT = {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}


def _taint(t: Mapping[str, str]) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if t["value"] else f"{t['key']}:{t['effect']}"


def _tolerates_default(tolerations: list[Mapping[str, Any]]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        key = tol.get("key") or ""
        if effect not in ("", "NoSchedule", "NO_SCHEDULE"):  # a tuple: effect may be a list
            continue
        if key == "nvidia.com/gpu" or (not key and tol.get("operator") == "Exists"):
            return True  # an Equal toleration's value cannot be checked without pool data
    return False


def _tolerates_some_taint(tolerations: list[Mapping[str, Any]]) -> bool:
    """Does the Pod tolerate any NoSchedule taint (its own cluster's GPU taint, whatever
    its key)? NoExecute-only tolerations (``node.kubernetes.io/not-ready``) do not count."""
    return any(
        (tol.get("effect") or "") in ("", "NoSchedule", "NO_SCHEDULE") for tol in tolerations
    )


Taint = tuple[str, str, str]
"""(key, value, effect) of a node taint."""


def _untolerated_profile_taints(
    taints: Iterable[Any], tolerations: list[Mapping[str, Any]]
) -> tuple[Taint, ...]:
    """The profile's NoSchedule/NoExecute GPU taints the tolerations miss."""
    hard = [
        {"key": t.key, "value": t.value, "effect": t.effect}
        for t in taints
        if t.effect in ("NoSchedule", "NoExecute")
    ]
    return tuple(_as_tuple(t) for t in hard if not tolerates(tolerations, t))


def _as_tuple(t: Mapping[str, str]) -> Taint:
    return (t["key"], t["value"], t["effect"])


def _taints_text(taints: object) -> str:
    return ", ".join(
        _taint({"key": k, "value": v, "effect": e}) for k, v, e in cast(tuple[Taint, ...], taints)
    )


def _admission(admission: Admission) -> dict[str, Value]:
    """The cluster's admission as verdict values."""
    return {
        "flavour": admission.flavour,
        "evidence": admission.evidence,
        "extended_resource_toleration": admission.extended_resource_toleration,
    }


def _admission_note(v: Mapping[str, Value]) -> str:
    if v["extended_resource_toleration"] is False:
        return (
            f" (a {v['flavour']} cluster, {v['evidence']}: the "
            "ExtendedResourceToleration admission plugin is off by default and adds no "
            "toleration)"
        )
    return ""


def _tolerated(
    tolerations: list[Mapping[str, Any]],
    taint: Mapping[str, str],
    verdicts: dict[tuple[str, str, str], bool],
) -> bool:
    """:func:`tolerates`, kept in *verdicts* per distinct taint."""
    key = (taint["key"], taint["value"], taint["effect"])
    found = verdicts.get(key)
    if found is None:
        found = verdicts[key] = tolerates(tolerations, taint)
    return found


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A GPU pod tolerates the hard taints of a pool it targets, as the cluster admits it."""
    extra = ctx.config.gpu_resources
    pools = gpu_pools(ctx)
    for pod in obj.pods():
        gpus = pod.gpu_count(extra)
        if gpus <= 0:
            continue
        stated = tolerations_of(pod)
        path = (*pod.path, "tolerations")
        label = f"pod{pod.where}"
        if obj.kind == "LLMInferenceService" and not stated:
            if dig(obj.raw, "spec", "baseRefs") and obj.merged_with is None:
                yield Verdict("not_evaluated", "base-refs-unread", {"pod": label})
                continue
            # KServe completes the pod from its presets, which add no tolerations (read at
            # the release whose presets give the engine command line): judged as written,
            # merged over the baseRefs configs where they are among the inputs.
            label += f" (KServe's presets add no tolerations, {KSERVE_PRESET_SOURCE})"
        admission = cluster_admission(ctx, pod)
        requested = set(gpu_requests(pod, extra))
        tolerations = [*stated, *admitted_tolerations(admission, requested)]
        values: dict[str, Value] = {"pod": label, "gpus": gpus, **_admission(admission)}
        profile = active_profile()
        if not pools and profile is not None and profile.gpu_taints is not None:
            # The cluster profile states the taints GPU nodes carry: judged exactly.
            untolerated = _untolerated_profile_taints(profile.gpu_taints, tolerations)
            if untolerated:
                values["untolerated"] = untolerated
                yield Verdict("violation", "profile-taints", values, path=path)
            continue
        if not pools:
            # Without pool data a Pod that tolerates some taint of its own cluster
            # (nodetype=gpu, a MIG resource key) is not judged: only one that tolerates
            # none gets the advisory, naming the assumption (RULES.md K004).
            if (
                admission.extended_resource_toleration
                or _tolerates_default(tolerations)
                or _tolerates_some_taint(stated)
            ):
                continue
            values["untolerated"] = (_as_tuple(DEFAULT_TAINT),)
            yield Verdict("advisory", "assumed-default-taint", values, path=path)
            continue
        yield from _judge_pools(pod, targeted_pools(pod, pools), tolerations, requested, values)


def _judge_pools(
    pod: PodRef,
    targeted: list[GpuPool],
    tolerations: list[Mapping[str, Any]],
    requested: set[str],
    values: dict[str, Value],
) -> Iterator[Verdict]:
    """The pod against the hard taints of the pools it targets."""
    path = (*pod.path, "tolerations")
    if not targeted:
        values = {"pod": values["pod"], "selected": f"{pod.selected_labels() or 'none'}"}
        yield Verdict("not_evaluated", "no-pool-matches", values)
        return
    # Pools share taints (nvidia.com/gpu:NoSchedule): each distinct one is judged once.
    verdicts: dict[tuple[str, str, str], bool] = {}
    if any(all(_tolerated(tolerations, t, verdicts) for t in p.hard_taints) for p in targeted):
        return  # one pool it can land on is enough
    # By pool name: the pools of one name (Nodes of one pool) are named once, as the last.
    by_name = {
        p.name: tuple(
            _as_tuple(t) for t in p.hard_taints if not _tolerated(tolerations, t, verdicts)
        )
        for p in targeted
    }
    missing = tuple(by_name.items())
    # A taint keyed by a requested resource, NoSchedule, is one the admission plugin
    # would tolerate: only where it is known off is a miss certain.
    admissible = all(
        key in requested and effect == "NoSchedule"
        for _, taints in missing
        for key, _, effect in taints
    )
    values = {**values, "missing": missing}
    if admissible and values["extended_resource_toleration"] is None:
        yield Verdict("advisory", "pool-taints-admission-unknown", values, path=path)
        return
    yield Verdict("violation", "pool-taints", values, path=path)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K004 message quotes beyond its values: taints as written, the pools'
    names and missed taints, and what the cluster's admission adds or leaves open."""
    v = verdict.values
    out: dict[str, str] = {}
    if "untolerated" in v:
        out["taints"] = _taints_text(v["untolerated"])
    if "extended_resource_toleration" in v:
        out["admission_note"] = _admission_note(v)
        out["admission_unknown"] = (
            ""
            if v["extended_resource_toleration"] is not None
            else ", and nothing says whether the cluster's ExtendedResourceToleration "
            "admission plugin adds it, as EKS and GKE do"
        )
    if "missing" in v:
        missing = cast(tuple[tuple[str, tuple[Taint, ...]], ...], v["missing"])
        out["names"] = ", ".join(name for name, _ in missing)
        out["detail"] = "; ".join(
            f"pool {name}: {_taints_text(taints)}" for name, taints in missing
        )
    return out


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={
        "EXTENDED_RESOURCE_TOLERATION": EXTENDED_RESOURCE_TOLERATION,
        "EKS_ADMISSION": EKS_ADMISSION,
        "GKE_ADMISSION": GKE_ADMISSION,
        "AKS_ADMISSION": AKS_ADMISSION,
        "K8S_DEFAULT_ADMISSION": K8S_DEFAULT_ADMISSION,
    },
)
