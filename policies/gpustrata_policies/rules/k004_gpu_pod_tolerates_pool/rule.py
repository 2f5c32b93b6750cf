"""K004 gpu-pod-tolerates-pool."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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
from gpustrata_policies.view.objects import K8sObject, dig
from gpustrata_policies.view.pools import tolerates
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


def _untolerated_profile_taints(taints: Iterable[Any], tolerations: list[Mapping[str, Any]]) -> str:
    """The profile's NoSchedule/NoExecute GPU taints the tolerations miss, as text ('' when
    none)."""
    hard = [
        {"key": t.key, "value": t.value, "effect": t.effect}
        for t in taints
        if t.effect in ("NoSchedule", "NoExecute")
    ]
    return ", ".join(_taint(t) for t in hard if not tolerates(tolerations, t))


def _admission_note(admission: Admission) -> str:
    if admission.extended_resource_toleration is False:
        return (
            f" (a {admission.flavour} cluster, {admission.evidence}: the "
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


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
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
                yield ctx.not_evaluated(
                    obj,
                    f"{label} is completed from the LLMInferenceServiceConfigs its baseRefs "
                    "name, which may add the tolerations and are not among the inputs",
                )
                continue
            # KServe completes the pod from its presets, which add no tolerations (read at
            # the release whose presets give the engine command line): judged as written,
            # merged over the baseRefs configs where they are among the inputs.
            label += f" (KServe's presets add no tolerations, {KSERVE_PRESET_SOURCE})"
        admission = cluster_admission(ctx, pod)
        requested = set(gpu_requests(pod, extra))
        tolerations = [*stated, *admitted_tolerations(admission, requested)]
        profile = active_profile()
        if not pools and profile is not None and profile.gpu_taints is not None:
            # The cluster profile states the taints GPU nodes carry: judged exactly.
            untolerated = _untolerated_profile_taints(profile.gpu_taints, tolerations)
            if untolerated:
                yield ctx.violation(
                    obj,
                    f"{label} requests {gpus} GPU(s) but does not tolerate "
                    f"{untolerated}, which GPU nodes carry (cluster profile gpu_taints)"
                    f"{_admission_note(admission)}; it stays Pending",
                    path,
                )
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
            yield ctx.violation(
                obj,
                f"{label} requests {gpus} GPU(s) but does not tolerate "
                f"{_taint(DEFAULT_TAINT)}, the taint GPU nodes usually carry (assumed: no Node "
                "object or GpuNodePool describes the pool's taints"
                + (
                    ""
                    if admission.known
                    else ", and nothing says whether the cluster's ExtendedResourceToleration "
                    "admission plugin adds it, as EKS and GKE do"
                )
                + "); on nodes with that taint it stays Pending",
                path,
                advisory=True,
            )
            continue
        targeted = targeted_pools(pod, pools)
        if not targeted:
            yield ctx.not_evaluated(
                obj,
                f"no described GPU pool matches the node selectors of {label} "
                f"({pod.selected_labels() or 'none'}); see K005",
            )
            continue
        # Pools share taints (nvidia.com/gpu:NoSchedule): each distinct one is judged once.
        verdicts: dict[tuple[str, str, str], bool] = {}
        if any(all(_tolerated(tolerations, t, verdicts) for t in p.hard_taints) for p in targeted):
            continue  # one pool it can land on is enough
        missing = {
            p.name: [t for t in p.hard_taints if not _tolerated(tolerations, t, verdicts)]
            for p in targeted
        }
        detail = "; ".join(
            f"pool {name}: {', '.join(_taint(t) for t in taints)}"
            for name, taints in missing.items()
        )
        # A taint keyed by a requested resource, NoSchedule, is one the admission plugin
        # would tolerate: only where it is known off is a miss certain.
        admissible = all(
            t["key"] in requested and t["effect"] == "NoSchedule"
            for taints in missing.values()
            for t in taints
        )
        if admissible and not admission.known:
            yield ctx.violation(
                obj,
                f"{label} requests {gpus} GPU(s) and targets GPU pool(s) "
                f"{', '.join(missing)} but does not tolerate their taints ({detail}); it stays "
                "Pending unless the cluster's ExtendedResourceToleration admission plugin adds "
                "the toleration (EKS and GKE enable it; nothing in the input says which "
                "cluster this is)",
                path,
                advisory=True,
            )
            continue
        yield ctx.violation(
            obj,
            f"{label} requests {gpus} GPU(s) and targets GPU pool(s) "
            f"{', '.join(missing)} but does not tolerate their taints ({detail})"
            f"{_admission_note(admission)}; it stays Pending",
            path,
        )


RULE = folder_rule(
    __name__,
    check,
    facts={
        "EXTENDED_RESOURCE_TOLERATION": EXTENDED_RESOURCE_TOLERATION,
        "EKS_ADMISSION": EKS_ADMISSION,
        "GKE_ADMISSION": GKE_ADMISSION,
        "AKS_ADMISSION": AKS_ADMISSION,
        "K8S_DEFAULT_ADMISSION": K8S_DEFAULT_ADMISSION,
    },
)
