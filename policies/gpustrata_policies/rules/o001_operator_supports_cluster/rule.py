"""O001 operator-supports-cluster."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.nodes import GPU_OPERATOR_PLATFORMS, gpu_pools, operators_for
from gpustrata_policies.view.objects import K8sObject


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The GPU Operator release supports the Kubernetes minor the GPU nodes run."""
    for op in operators_for(ctx, obj):
        pools = gpu_pools(ctx)
        versions: dict[str, list[str]] = {}
        for pool in pools:
            if pool.kubernetes_version:
                versions.setdefault(pool.kubernetes_version, []).append(pool.name)
        for names in versions.values():
            names.sort()  # input order is not meaningful (Pulumi registers concurrently)
        if not versions:
            yield ctx.not_evaluated(
                obj,
                "the cluster's Kubernetes version is unknown: no GpuNodePool states "
                "spec.kubernetesVersion",
            )
            continue
        if not op.pinned:
            what = (
                f"is a range or tag, not a release ({op.version})"
                if op.version
                else ("is not stated")
            )
            yield ctx.not_evaluated(obj, f"the GPU Operator's chart version {what}")
            continue
        release = catalogs.operator_release(op.version)
        if release is None:
            yield ctx.not_evaluated(
                obj, f"GPU Operator {op.version} is not in the compatibility catalogue"
            )
            continue
        on_eks = any(p.ami_type for p in pools) and release.eks_kubernetes is not None
        matrix = release.eks_kubernetes if on_eks and release.eks_kubernetes else release.kubernetes
        which = "Amazon EKS" if on_eks else "upstream Kubernetes"
        for version, names in sorted(versions.items()):
            try:
                supported = matrix.supports(version)
            except ValueError:
                yield ctx.not_evaluated(
                    obj,
                    f"Kubernetes version {quoted(version)} of pool(s) {', '.join(names)} "
                    "is unreadable",
                )
                continue
            if supported:
                continue
            yield ctx.violation(
                obj,
                f"GPU Operator {release.version} supports {which} {matrix.min} to "
                f"{matrix.max} (its platform support matrix), but pool(s) {', '.join(names)} "
                f"run Kubernetes {version}",
                op.version_path or (),
            )


RULE = folder_rule(__name__, check, facts={"GPU_OPERATOR_PLATFORMS": GPU_OPERATOR_PLATFORMS})
