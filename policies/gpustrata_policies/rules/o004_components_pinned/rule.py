"""O004 components-pinned."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
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


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an O004 message derives: the chart version stated, why the operator's tested
    set is unknown, and the overrides listed."""
    v = verdict.values
    overrides = cast(tuple[tuple[str, str, str], ...], v.get("overrides", ()))
    return {
        "stated": f"{v.get('version') or 'unset'}",
        "uncatalogued": (
            f"{v.get('operator')} is not in the compatibility catalogue"
            if v.get("version")
            else "the GPU Operator's release is not stated (helm.sh/chart label)"
        ),
        "listed": "; ".join(
            f"{component}.version {stated} (tested: {tested})"
            for component, stated, tested in overrides
        ),
    }


_FACTS = {
    "GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES,
    "DECLARED_OVERRIDES_ANNOTATION": DECLARED_OVERRIDES_ANNOTATION,
}
"""The facts the rule's meta.yaml cites (``${NAME}``)."""

RULE = folder_rule(__name__, worded(judge, fields), facts=_FACTS)
