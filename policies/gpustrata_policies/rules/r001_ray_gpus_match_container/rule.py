"""R001 ray-gpus-match-container."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.kuberay import fmt_gpus as format_number
from gpustrata_policies.view.kuberay import ray_groups
from gpustrata_policies.view.objects import K8sObject


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


RULE = folder_rule(__name__, check)
