"""O004 components-pinned."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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


def _overrides(op: GpuOperatorView) -> tuple[list[str], bool]:
    """Stated component versions outside the release's tested set; False if not catalogued."""
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
        out.append(f"{component}.version {version} (tested: {tested})")
    return out, True


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The chart is pinned and component versions are the release's tested set."""
    for op in operators_for(ctx, obj):
        if op.source == "HelmValues":  # the version is on the helm command line, not here
            yield ctx.not_evaluated(
                obj,
                "a values file does not state the chart version it is installed with, so "
                "whether the release is pinned is unknown",
            )
            continue
        if op.is_helm and not op.pinned:
            shown = op.version or "unset"
            yield ctx.violation(
                obj,
                f"the GPU Operator chart version is not pinned ({shown}); each install takes "
                "the newest release and with it new driver, toolkit, device plugin and DCGM "
                "exporter versions",
                op.version_path or ("spec",),
            )
            continue
        overrides, catalogued = _overrides(op)
        if not catalogued:
            reason = (
                f"{op.label} is not in the compatibility catalogue"
                if op.version
                else "the GPU Operator's release is not stated (helm.sh/chart label)"
            )
            yield ctx.not_evaluated(obj, f"{reason}, so its tested component versions are unknown")
            continue
        if overrides:
            yield ctx.violation(
                obj,
                f"{op.label} runs components outside its tested set: {'; '.join(overrides)}; "
                f"declare deliberate overrides ({DECLARED_OVERRIDES_ANNOTATION} or "
                "declaredOverrides) or use the tested versions",
                op.values_path,
            )


RULE = folder_rule(__name__, check, facts={"GPU_OPERATOR_VALUES": GPU_OPERATOR_VALUES})
