"""R001 ray-gpus-match-container."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import MANDATORY
from gpustrata_policies.view.kuberay import fmt_gpus as format_number
from gpustrata_policies.view.kuberay import ray_groups
from gpustrata_policies.view.objects import K8sObject

KUBERAY_POD_GO = (
    "https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/common/pod.go"
)


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """A worker group advertises to Ray exactly the GPUs its Ray container gets."""
    extra = ctx.config.gpu_resources
    for group in ray_groups(obj):
        if group.is_head:
            continue  # R002
        try:
            advertised, where = group.advertised_gpus()
        except ValueError as exc:
            yield ctx.not_evaluated(obj, f"{group.label}: {exc}")
            continue
        container = group.container
        if container is None:
            continue
        if advertised is None:
            claimed = container.claimed_gpus()
            if claimed:  # KubeRay reads limits, not DRA claims: Ray is told 0 GPUs
                yield ctx.violation(
                    obj,
                    f"{group.label} leaves rayStartParams num-gpus unset, so KubeRay takes "
                    f"the Ray container's GPU limit (none), but '{container.name}' claims "
                    f"{format_number(claimed)} GPU(s) through DRA; Ray advertises no GPU "
                    "there and no GPU engine is ever placed on these Pods",
                    (*group.path, "rayStartParams"),
                )
            continue  # KubeRay sets num-gpus from the Ray container's GPU limit
        limit = group.container_gpus(extra)
        if advertised == limit:
            continue
        if limit == 0:
            effect = (
                "Ray schedules GPU engine workers onto Pods that have no GPU, and CUDA fails "
                "when they start"
            )
        elif advertised > limit:
            effect = (
                f"Ray places {format_number(advertised)} GPU workers on each Pod but only "
                f"{format_number(limit)} GPU(s) exist there; the extra workers fail to start"
            )
        else:
            effect = (
                f"{format_number(limit - advertised)} GPU(s) of each Pod stay idle, and "
                "placement groups sized to the Pod do not fit"
            )
        yield ctx.violation(
            obj,
            f"{group.label} tells Ray it has {format_number(advertised)} GPU(s) per Pod "
            f"({where}) but its Ray container '{container.name}' has "
            f"{format_number(limit)} GPU(s) in its limits; {effect}",
            (*group.path, "rayStartParams"),
        )


RULE = Rule(
    RuleMeta(
        id="R001",
        name="ray-gpus-match-container",
        title="A Ray worker group advertises the GPUs its container gets",
        layer="ray",
        severity="high",
        default_enforcement=MANDATORY,
        rationale=(
            "Ray schedules placement groups and GPU actors against the GPUs each node "
            "advertises (rayStartParams num-gpus), not against what Kubernetes gave the Pod. "
            "KubeRay derives num-gpus from the Ray container's GPU limit (the first resource "
            "ending in 'gpu' or an nvidia.com/mig-* profile) only when num-gpus is unset; an "
            "explicit value (or, since KubeRay 1.5, the group's top-level resources) wins. A "
            "larger value makes Ray start engine workers on GPUs that are not there; a "
            "smaller one leaves GPUs idle and makes placement groups sized to the Pod "
            "unschedulable."
        ),
        fix=(
            "Remove num-gpus from rayStartParams (KubeRay then uses the container's GPU "
            "limit) or set it to the Ray container's nvidia.com/gpu limit (with DRA, which "
            "KubeRay does not read, set it to the claim's device count)."
        ),
        references=(
            KUBERAY_POD_GO,
            "https://github.com/ray-project/kuberay/blob/v1.7.0/ray-operator/controllers/ray/utils/resources.go",
            "https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/config.html",
        ),
        # The GPUs may sit in another object: a DRA ResourceClaimTemplate the Pod claims.
        scope="stack",
    ),
    check,
)
