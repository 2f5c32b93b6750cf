"""V007 memory-fraction-valid."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.vllm_release_types import source_url
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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


def _utilization(site: EngineSite) -> tuple[float | None, str, bool]:
    """(value, as written, set) of gpu_memory_utilization; value None when unreadable."""
    raw = site.flag("gpu_memory_utilization")
    if raw is UNKNOWN:
        raise UnknownInput(f"gpu_memory_utilization of {site.label}")
    if raw is None:
        return (
            DEFAULT_FLOOR,
            f"vLLM's default gpu_memory_utilization (at least {DEFAULT_FLOOR})",
            False,
        )
    if isinstance(raw, bool):
        return None, f"gpu_memory_utilization {raw}", True
    try:
        return float(str(raw)), f"gpu_memory_utilization {raw}", True
    except ValueError:
        return None, f"gpu_memory_utilization {raw}", True


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


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """0 < gpu_memory_utilization <= 1; engines sharing one GPU sum to at most 1."""
    sites = engine_sites(ctx, obj, ray_pods=True)
    for site in sites:
        container = site.container
        if container is None:
            continue
        value, text, explicit = _utilization(site)
        where = container.label
        if explicit and (value is None or not 0 < value <= 1):
            yield ctx.violation(
                obj,
                f"{where} sets {text}; vLLM accepts a fraction in (0, 1] and refuses to start",
                (*container.path, "args"),
            )
            continue
        if value is None or container.gpu_limit(ctx.config.gpu_resources) != 1:
            continue
        sharing = _sharing(ctx, container)
        if sharing is None or sharing.replicas * value <= 1:
            continue
        count = str(sharing.replicas) if sharing.exact else f"at least {sharing.replicas}"
        yield ctx.violation(
            obj,
            f"{where} gets a time-sliced GPU ({sharing.where}) that {count} Pods share with no "
            f"memory isolation, and its engine takes {text} of the GPU's memory: {count} "
            f"engines need {sharing.replicas * value:.2f} x the GPU; the second fails with out "
            "of memory",
            (*container.path, "resources"),
        )
    if obj.kind != "RayService":
        return
    by_label = {s.label: s for s in sites if s.ray}
    placements, _ = engine_placements(obj)
    for placement in placements:
        ray_site = by_label.get(placement.label)
        if ray_site is None:
            continue
        value, text, explicit = _utilization(ray_site)
        if explicit and (value is None or not 0 < value <= 1):
            yield ctx.violation(
                obj,
                f"{placement.where} sets {text}; vLLM accepts a fraction in (0, 1] and refuses "
                "to start",
                ("spec", "serveConfigV2"),
            )
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
        yield ctx.violation(
            obj,
            f"{placement.where} places workers in bundles of {fmt_gpus(smallest)} GPU, so Ray "
            f"can put {per_gpu} of them on one GPU, each taking {text} of its memory: "
            f"{per_gpu * value:.2f} x the GPU; set gpu_memory_utilization to at most "
            f"{math.floor(100 / per_gpu) / 100:g}",
            ("spec", "serveConfigV2"),
        )


RULE = folder_rule(__name__, check, facts={"gpu_memory_utilization_source": VLLM_CACHE_CONFIG})
