"""O004 components-pinned."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.gpu_operator import DECLARED_OVERRIDES_ANNOTATION, GpuOperatorView
from gpustrata_policies.view.nodes import GPU_OPERATOR_VALUES, operators_for
from gpustrata_policies.view.objects import K8sObject

_TESTED_FIELD = {
    "toolkit": "container_toolkit",
    "devicePlugin": "device_plugin",
    "dcgmExporter": "dcgm_exporter",
}


def _matches(stated: str, tested: str) -> bool:
    text = stated.strip().lstrip("vV")
    return text == tested or text.startswith(tested + "-")


def _overrides(op: GpuOperatorView) -> tuple[list[tuple[str, str, str]], bool]:
    """Stated component versions outside the release's tested set, as (component, stated,
    tested); False if the release is not catalogued."""
    stated = {
        c: v for c in ("driver", *_TESTED_FIELD) if op.enabled(c) and (v := op.component_version(c))
    }
    if not stated:
        return [], True
    release = catalogs.operator_release(op.version)
    if release is None:
        return [], False
    out = []
    for component, version in stated.items():
        if component in op.declared_overrides:
            continue
        if component == "driver":
            if catalogs.readable_version(version) and release.driver_is_tested(version):
                continue
            tested = ", ".join(release.tested_drivers)
        else:
            image = getattr(release, _TESTED_FIELD[component])
            if _matches(version, image.version):
                continue
            tested = image.tag
        out.append((component, version, tested))
    return out, True


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The chart is pinned and component versions are the release's tested set."""
    for op in operators_for(ctx, obj):
        if op.source == "HelmValues":  # the version is on the helm command line, not here
            yield Verdict("not_evaluated", "values-file-unversioned")
            continue
        if op.is_helm and not op.pinned:
            yield Verdict(
                "violation",
                "chart-unpinned",
                values={"version": op.version},
                path=op.version_path or ("spec",),
            )
            continue
        overrides, catalogued = _overrides(op)
        if not catalogued:
            values = {"operator": op.label, "version": op.version}
            yield Verdict("not_evaluated", "operator-uncatalogued", values=values)
            continue
        if overrides:
            yield Verdict(
                "violation",
                "untested-components",
                values={"operator": op.label, "overrides": tuple(overrides)},
                path=op.values_path,
            )


def message(verdict: Verdict) -> str:
    """The prose of an O004 verdict."""
    v = verdict.values
    if verdict.reason == "values-file-unversioned":
        return (
            "a values file does not state the chart version it is installed with, so "
            "whether the release is pinned is unknown"
        )
    if verdict.reason == "chart-unpinned":
        return (
            f"the GPU Operator chart version is not pinned ({v['version'] or 'unset'}); each "
            "install takes the newest release and with it new driver, toolkit, device plugin "
            "and DCGM exporter versions"
        )
    if verdict.reason == "operator-uncatalogued":
        reason = (
            f"{v['operator']} is not in the compatibility catalogue"
            if v["version"]
            else "the GPU Operator's release is not stated (helm.sh/chart label)"
        )
        return f"{reason}, so its tested component versions are unknown"
    overrides = cast(tuple[tuple[str, str, str], ...], v["overrides"])
    listed = "; ".join(
        f"{component}.version {stated} (tested: {tested})"
        for component, stated, tested in overrides
    )
    return (
        f"{v['operator']} runs components outside its tested set: {listed}; "
        f"declare deliberate overrides ({DECLARED_OVERRIDES_ANNOTATION} or "
        "declaredOverrides) or use the tested versions"
    )


RULE = folder_rule(
    __name__, judged(judge, message), facts={"GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES}
)
