"""O001 operator-supports-cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
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


def fields(verdict: Verdict) -> dict[str, object]:
    """The text an O001 message derives: what is wrong with the chart version, the pools
    named, the Kubernetes version quoted and the platform (its supported range is the
    verdict's thresholds)."""
    v = verdict.values
    version = v.get("version")
    return {
        "what": f"is a range or tag, not a release ({version})" if version else "is not stated",
        "names": ", ".join(cast(tuple[str, ...], v.get("pools", ()))),
        "unreadable": quoted(v["kubernetes"]) if "kubernetes" in v else "",
        "which": "Amazon EKS" if v.get("on_eks") else "upstream Kubernetes",
    }


RULE = folder_rule(
    __name__, worded(judge, fields), facts={"GPU_OPERATOR_PLATFORMS": GPU_OPERATOR_PLATFORMS}
)
