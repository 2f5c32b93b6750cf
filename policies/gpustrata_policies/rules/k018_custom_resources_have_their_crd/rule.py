"""K018 custom-resources-have-their-crd."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.device_classes import (
    DRIVER_FIX,
    claims_gpu_class,
    device_classes_installed,
)
from gpustrata_policies.view.dra import GPU_DEVICE_CLASS
from gpustrata_policies.view.nodes import operators
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import active_profile
from gpustrata_policies.view.scheduling import chart_name, chart_of, crds_installed, custom_kind

# The delivery tools' own kinds: a manifest set that uses them is applied by them, so
# their CRDs are there (Flux, Argo CD).
_DELIVERY_GROUPS = ("toolkit.fluxcd.io", "argoproj.io")

# Which chart (or project) installs the CRDs of the custom resources people put next to an
# inference workload, for the message's fix.
_OWNERS = {
    "monitoring.coreos.com": "the prometheus-operator CRDs (kube-prometheus-stack or "
    "prometheus-operator-crds chart)",
    "keda.sh": "KEDA (the keda chart)",
    "ray.io": "the KubeRay operator (kuberay-operator chart)",
    "karpenter.sh": "Karpenter (the karpenter chart)",
    "karpenter.k8s.aws": "Karpenter (the karpenter chart)",
    "nvidia.com": "the NVIDIA GPU Operator chart",
    "inference.networking.x-k8s.io": "the Gateway API Inference Extension CRDs",
    "inference.networking.k8s.io": "the Gateway API Inference Extension CRDs",
    "gateway.networking.k8s.io": "the Gateway API CRDs",
    "serving.kserve.io": "KServe",
    "leaderworkerset.x-k8s.io": "LeaderWorkerSet",
}


@dataclass(frozen=True)
class _Installed:
    crds: dict[str, str]
    evaluated: bool
    """The input says what is installed: a stack, or a manifest set that installs CRDs or
    charts itself."""
    unknown_charts: list[str]
    """Releases whose chart the catalogue does not know (they may install the CRD)."""
    owned_elsewhere: frozenset[str]
    """Kinds whose CRD the chart of a release not catalogued at its version installs at
    every catalogued version (a chart keeps its CRDs across versions)."""


def _installed(objects: Sequence[K8sObject]) -> _Installed:
    """What the input installs, with the CRDs the cluster profile lists as installed (a
    profile that lists CRDs makes the rule evaluated on a bare application manifest)."""
    found = _installed_by(objects)
    profile = active_profile()
    if profile is None or profile.crds is None:
        return found
    stated = {crd: "the cluster profile (crds)" for crd in profile.crds}
    return replace(found, crds={**stated, **found.crds}, evaluated=True)


def _listed(found: _Installed, group_kind: str) -> bool:
    """Is *group_kind* installed, by kind or by its group's ``group/*`` profile entry?"""
    return group_kind in found.crds or f"{group_kind.rsplit('/', 1)[0]}/*" in found.crds


def _installed_by(objects: Sequence[K8sObject]) -> _Installed:
    releases = [o for o in objects if o.kind == "HelmRelease"]
    unknown = []
    owned: set[str] = set()
    for release in releases:
        chart, why = chart_of(release)
        if chart is not None:
            continue
        name = chart_name(release)
        from gpustrata.catalog.charts import chart_releases  # a HelmRelease to read: issue 35

        versions = [r.crds for r in chart_releases() if r.chart == name]
        if versions:
            owned |= set.intersection(*(set(crds) for crds in versions))
        unknown.append(f"{release.resource} ({why})")
    stack = any(o.file is None for o in objects)
    installs = bool(releases) or any(o.kind == "CustomResourceDefinition" for o in objects)
    return _Installed(crds_installed(objects), stack or installs, unknown, frozenset(owned))


def _owner(group_kind: str, group: str) -> str:
    """What to install: the project that owns the group, and the catalogued chart releases
    that install this kind (the chart catalogue's ``crds``)."""
    from gpustrata.catalog.charts import crd_owner  # read once a kind lacks its CRD: issue 35

    releases = crd_owner(group_kind)
    charts = sorted({r.chart for r in releases})
    owner = _OWNERS.get(group) or (
        f"the {' or '.join(charts)} chart" if charts else f"the CRD of {group_kind}"
    )
    if not releases:
        return owner
    pinned = ", ".join(sorted({f"{r.chart} {r.version}" for r in releases}))
    return f"{owner}, e.g. {pinned},"


def _profile_lists_crds() -> bool:
    profile = active_profile()
    return profile is not None and profile.crds is not None


def _device_class(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A claim on the ``gpu.nvidia.com`` DeviceClass needs the DRA driver that creates it."""
    classes = ctx.memo(
        "k018_device_classes", lambda: device_classes_installed(ctx.objects, operators(ctx))
    )
    profile = active_profile()
    stated = profile.device_classes if profile is not None else None
    if GPU_DEVICE_CLASS in classes or GPU_DEVICE_CLASS in (stated or ()):
        return
    what = f"DeviceClass {GPU_DEVICE_CLASS}"
    if stated is None:
        shown = ctx.memo("k018_installed_by", lambda: _installed_by(ctx.objects))
        if not shown.evaluated:
            if profile is not None and profile.crds is not None:
                yield Verdict("not_evaluated", "device-class-unknown", values={"what": what})
            return  # a bare application manifest: the cluster's drivers are not in the input
        if shown.unknown_charts:
            values: dict[str, Value] = {"what": what, "charts": tuple(shown.unknown_charts)}
            yield Verdict("not_evaluated", "charts-uncatalogued", values=values)
            return
    yield Verdict(
        "violation",
        "device-class-missing",
        values={
            "object": f"{obj.kind} {obj.name}",
            "device_class": GPU_DEVICE_CLASS,
            "profile_lists": stated is not None,
        },
        path=("spec",),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A custom resource's CRD is installed by the same stack or manifest set; a DRA GPU
    claim's DeviceClass likewise."""
    if claims_gpu_class(obj):
        yield from _device_class(ctx, obj)
        return
    group_kind = custom_kind(obj)
    if group_kind is None or obj.kind == "CustomResourceDefinition":
        return
    group = group_kind.rsplit("/", 1)[0]
    if any(group == g or group.endswith(f".{g}") for g in _DELIVERY_GROUPS):
        return
    found: _Installed = ctx.memo("k018_installed", lambda: _installed(ctx.objects))
    if not found.evaluated or _listed(found, group_kind) or group_kind in found.owned_elsewhere:
        return  # a bare application manifest: the cluster's CRDs are not in the input
    if found.unknown_charts:
        values: dict[str, Value] = {
            "what": f"CRD for {group_kind}",
            "charts": tuple(found.unknown_charts),
        }
        yield Verdict("not_evaluated", "charts-uncatalogued", values=values)
        return
    yield Verdict(
        "violation",
        "crd-missing",
        values={
            "kind": obj.kind,
            "group_kind": group_kind,
            "api_version": f"{obj.raw.get('apiVersion')}",
            "owner": _owner(group_kind, group),
            "profile_lists": _profile_lists_crds(),
        },
        path=("kind",),
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K018 message quotes beyond its values: the charts the catalogue does not
    know, the profile's clause, and the DRA driver's fix."""
    v = verdict.values
    device_classes = " and the cluster profile's device_classes do not list it"
    crds = " and the cluster profile's crds do not list"
    listed = device_classes if verdict.reason == "device-class-missing" else crds
    return {
        "chart_list": ", ".join(cast(tuple[str, ...], v.get("charts", ()))),
        "listed": listed if v.get("profile_lists") else "",
        "driver_fix": DRIVER_FIX,
    }


RULE = folder_rule(__name__, worded(judge, fields))
