"""V007 memory-fraction-valid."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from gpustrata.catalog.vllm_release_types import source_url
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import Path, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.kuberay import engine_placements, fmt_gpus
from gpustrata_policies.view.nodes import (
    REPLICAS_LABEL,
    STRATEGY_LABEL,
    config_map_time_slicing,
    gpu_pools,
    targeted_pools,
)
from gpustrata_policies.view.objects import ContainerRef, K8sObject

VLLM_CACHE_CONFIG = source_url(catalogs.vllm_releases().gpu_memory_utilization.source)
DEFAULT_FLOOR = 0.9
"""vLLM's default gpu_memory_utilization is at least 0.9 in every release (the release
catalogue holds the reference release's)."""
SHARED_RESOURCE = "nvidia.com/gpu.shared"


def _utilization(site: EngineSite) -> tuple[float | None, str | None]:
    """(value, as written) of gpu_memory_utilization: value None when unreadable, written
    None when unset (vLLM's default, at least :data:`DEFAULT_FLOOR`)."""
    raw = site.flag("gpu_memory_utilization")
    if raw is UNKNOWN:
        raise UnknownInput(f"gpu_memory_utilization of {site.label}")
    if raw is None:
        return DEFAULT_FLOOR, None
    if isinstance(raw, bool):
        return None, f"{raw}"
    try:
        return float(str(raw)), f"{raw}"
    except ValueError:
        return None, f"{raw}"


def _out_of_range(value: float | None, written: str | None) -> bool:
    """A stated gpu_memory_utilization vLLM refuses (unreadable, or outside (0, 1])."""
    return written is not None and (value is None or not 0 < value <= 1)


def _refused(engine: str, written: str | None, path: Path) -> Verdict:
    """The verdict on *engine*'s gpu_memory_utilization, *written* out of range (at *path*:
    a container's args, a RayService's serveConfigV2)."""
    return Verdict(
        "violation",
        "fraction-out-of-range",
        values={"engine": engine, "utilization": written},
        thresholds={"range": (0, 1)},
        path=path,
    )


@dataclass(frozen=True, slots=True)
class _Sharing:
    replicas: int
    exact: bool
    where: str


def _config_map_time_slicing(ctx: RuleContext) -> _Sharing | None:
    """Cluster-wide time-slicing from a device-plugin sharing ConfigMap in the input."""
    found = config_map_time_slicing(ctx)
    return _Sharing(found[0], True, found[1]) if found else None


def _sharing(ctx: RuleContext, container: ContainerRef) -> _Sharing | None:
    """Time-slicing that lets several Pods use the GPU this container gets."""
    pod = container.pod
    limits = container.resources("limits")
    if SHARED_RESOURCE in limits:
        return _Sharing(2, False, f"it requests {SHARED_RESOURCE} (a time-sliced GPU)")
    label_sets: list[tuple[str, Mapping[str, Any]]] = [("its node selector", pod.selected_labels())]
    for pool in targeted_pools(pod, gpu_pools(ctx)):
        label_sets.append((f"pool {pool.name}", pool.labels))
    for where, labels in label_sets:
        strategy = str(labels.get(STRATEGY_LABEL, ""))
        replicas = labels.get(REPLICAS_LABEL)
        count = int(str(replicas)) if str(replicas or "").isdigit() else None
        if strategy == "time-slicing" or (count and count > 1 and strategy != "mps"):
            if count and count > 1:
                return _Sharing(count, True, f"{where}: {REPLICAS_LABEL}={count}")
            return _Sharing(2, False, f"{where}: {STRATEGY_LABEL}=time-slicing")
    if "nvidia.com/gpu" in limits:
        return _config_map_time_slicing(ctx)
    return None


def _judge_containers(ctx: RuleContext, sites: list[EngineSite]) -> Iterator[Verdict]:
    """Each container engine's fraction, and the engines a time-sliced GPU holds."""
    for site in sites:
        container = site.container
        if container is None:
            continue
        value, written = _utilization(site)
        if _out_of_range(value, written):
            yield _refused(container.label, written, (*container.path, "args"))
            continue
        if value is None or container.gpu_limit(ctx.config.gpu_resources) != 1:
            continue
        sharing = _sharing(ctx, container)
        if sharing is None or sharing.replicas * value <= 1:
            continue
        yield Verdict(
            "violation",
            "time-sliced-gpu-oversubscribed",
            values={
                "engine": container.label,
                "sharing": sharing.where,
                "pods": sharing.replicas,
                "exact": sharing.exact,
                "utilization": written,
                "fraction": value,
            },
            thresholds={"max_total": 1},
            path=(*container.path, "resources"),
        )


def _judge_placements(obj: K8sObject, sites: list[EngineSite]) -> Iterator[Verdict]:
    """A RayService's engines: the fraction, and workers Ray packs onto one GPU."""
    by_label = {s.label: s for s in sites if s.ray}
    placements, _ = engine_placements(obj)
    for placement in placements:
        ray_site = by_label.get(placement.label)
        if ray_site is None:
            continue
        value, written = _utilization(ray_site)
        if _out_of_range(value, written):
            yield _refused(placement.where, written, ("spec", "serveConfigV2"))
            continue
        gpus = placement.bundle_gpus
        # 0 < g < 1 on the integers (a Fraction's denominator is positive): no Fraction compares
        fractional = [g for g in gpus if 0 < g.numerator < g.denominator]
        if value is None or not fractional:
            continue
        smallest = min(fractional)
        per_gpu = math.floor(1 / smallest)
        if per_gpu * value <= 1:
            continue
        yield Verdict(
            "violation",
            "bundles-oversubscribe-gpu",
            values={
                "engine": placement.where,
                "bundle_gpus": smallest,
                "per_gpu": per_gpu,
                "utilization": written,
                "fraction": value,
            },
            thresholds={"max_utilization": math.floor(100 / per_gpu) / 100},
            path=("spec", "serveConfigV2"),
        )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """0 < gpu_memory_utilization <= 1; engines sharing one GPU sum to at most 1."""
    # a KServe preset's engine too: the range and a shared GPU need no release (the default
    # is at least DEFAULT_FLOOR in every one)
    sites = engine_sites(ctx, obj, ray_pods=True, presets=True)
    yield from _judge_containers(ctx, sites)
    if obj.kind == "RayService":
        yield from _judge_placements(obj, sites)


def _text(written: Value) -> str:
    """gpu_memory_utilization as the message names it."""
    if written is None:
        return f"vLLM's default gpu_memory_utilization (at least {DEFAULT_FLOOR})"
    return f"gpu_memory_utilization {written}"


def fields(verdict: Verdict) -> dict[str, object]:
    """The text a V007 message derives: the fraction as named, the Pods sharing a GPU, the
    GPU size of a bundle, and the GPUs the engines need together."""
    v = verdict.values
    out: dict[str, object] = {"text": _text(v["utilization"])}
    fraction = cast(float, v.get("fraction", 0.0))
    if "pods" in v:
        pods = cast(int, v["pods"])
        out["count"] = str(pods) if v["exact"] else f"at least {pods}"
        out["need"] = pods * fraction
    if "per_gpu" in v:
        out["bundle"] = fmt_gpus(cast(Fraction, v["bundle_gpus"]))
        out["need"] = cast(int, v["per_gpu"]) * fraction
    return out


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"gpu_memory_utilization_source": VLLM_CACHE_CONFIG},
)
