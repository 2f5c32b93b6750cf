"""O001 operator-supports-cluster."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import cast

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.nodes import GPU_OPERATOR_PLATFORMS, gpu_pools, operators_for
from gpustrata_policies.view.objects import K8sObject


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
            yield Verdict("not_evaluated", "kubernetes-unknown")
            continue
        if not op.pinned:
            yield Verdict("not_evaluated", "chart-unpinned", values={"version": op.version})
            continue
        release = catalogs.operator_release(op.version)
        if release is None:
            yield Verdict("not_evaluated", "operator-uncatalogued", values={"version": op.version})
            continue
        on_eks = any(p.ami_type for p in pools) and release.eks_kubernetes is not None
        matrix = release.eks_kubernetes if on_eks and release.eks_kubernetes else release.kubernetes
        for version, names in sorted(versions.items()):
            values: dict[str, Value] = {"kubernetes": version, "pools": tuple(names)}
            try:
                supported = matrix.supports(version)
            except ValueError:
                yield Verdict("not_evaluated", "kubernetes-unreadable", values=values)
                continue
            if supported:
                continue
            yield Verdict(
                "violation",
                "kubernetes-unsupported",
                values={**values, "operator": release.version, "on_eks": on_eks},
                thresholds={"min_kubernetes": str(matrix.min), "max_kubernetes": str(matrix.max)},
                sources=(GPU_OPERATOR_PLATFORMS,),
                path=op.version_path or (),
            )


_NOT_EVALUATED: Mapping[str, str] = {
    "kubernetes-unknown": (
        "the cluster's Kubernetes version is unknown: no GpuNodePool states spec.kubernetesVersion"
    ),
    "operator-uncatalogued": "GPU Operator {version} is not in the compatibility catalogue",
}
"""The prose of O001's not-evaluated verdicts, by reason (``{key}``: a verdict value)."""


def message(verdict: Verdict) -> str:
    """The prose of an O001 verdict."""
    v, t = verdict.values, verdict.thresholds
    if verdict.reason in _NOT_EVALUATED:
        return _NOT_EVALUATED[verdict.reason].format_map(v)
    if verdict.reason == "chart-unpinned":
        what = (
            f"is a range or tag, not a release ({v['version']})"
            if v["version"]
            else "is not stated"
        )
        return f"the GPU Operator's chart version {what}"
    names = ", ".join(cast(tuple[str, ...], v["pools"]))
    if verdict.reason == "kubernetes-unreadable":
        return f"Kubernetes version {quoted(v['kubernetes'])} of pool(s) {names} is unreadable"
    which = "Amazon EKS" if v["on_eks"] else "upstream Kubernetes"
    return (
        f"GPU Operator {v['operator']} supports {which} {t['min_kubernetes']} to "
        f"{t['max_kubernetes']} (its platform support matrix), but pool(s) {names} "
        f"run Kubernetes {v['kubernetes']}"
    )


RULE = folder_rule(
    __name__, judged(judge, message), facts={"GPU_OPERATOR_PLATFORMS": GPU_OPERATOR_PLATFORMS}
)
