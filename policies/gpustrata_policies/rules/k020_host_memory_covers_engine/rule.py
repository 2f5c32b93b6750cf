"""K020 host-memory-covers-engine."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import cast

from gpustrata.catalog.vllm_releases import reference_release
from gpustrata.core.unknown import known
from gpustrata.vllm.offload import (
    GIB,
    VLLM_CACHE_SRC,
    VLLM_LOADER_SRC,
    VLLM_WEIGHTS_SRC,
    host_memory,
    weight_loading,
)
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.capacity import capacity_inputs
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.objects import ContainerRef, K8sObject, as_list

_READ = (
    "kv_offloading_size",
    "kv_offloading_backend",
    "kv_transfer_config",
    "cpu_offload_gb",
    "load_format",
    "safetensors_load_strategy",
    "model_loader_extra_config",
)


def _gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def _shm_unbounded(container: ContainerRef) -> bool:
    """A memory-backed /dev/shm without sizeLimit: its pages count against the limit."""
    volumes = container.pod.volumes()
    for mount in as_list(container.raw.get("volumeMounts"), "volumeMounts"):
        if not isinstance(mount, Mapping):
            continue
        if str(mount.get("mountPath", "")).rstrip("/") != "/dev/shm":
            continue
        empty = volumes.get(str(mount.get("name")), {}).get("emptyDir")
        memory = isinstance(empty, Mapping) and empty.get("medium") == "Memory"
        if memory and isinstance(empty, Mapping) and empty.get("sizeLimit") is None:
            return True
    return False


def _estimates(ctx: RuleContext, site: EngineSite) -> tuple[int | None, int | None]:
    """KV bytes per token on one GPU and the weight bytes the loader reads (None: the
    model or GPU is unknown, which V003 reports)."""
    found = capacity_inputs(ctx, site)
    if isinstance(found, str) or not found:
        return None, None
    per_token = min(i.estimate.kv.bytes_per_token for i in found)
    return per_token, min(i.estimate.weights.total_bytes for i in found)


def _release_note(v: Mapping[str, Value]) -> str:
    """The loader paths are read at the reference release: say so where the image names
    another release or none (the release is not assumed)."""
    version, reference = v["vllm"], v["reference_vllm"]
    if version == reference:
        return ""
    runs = f"the image runs vLLM {version}" if version else "the image names no vLLM release"
    return f" (vLLM's loader as read at {reference}; {runs})"


def _loading(
    site: EngineSite, container: ContainerRef, sizes: tuple[int, int, int]
) -> Verdict | None:
    """A memory limit below the weights the engine loads: mandatory where the loader holds
    them all in process memory at once, advisory where it fails or not by the checkpoint's
    shards, or merely cannot keep them cached."""
    weights, limit, gpus = sizes
    loading = weight_loading(site.engine.values)
    if isinstance(loading, str):
        if limit < weights:
            return Verdict("not_evaluated", "loading-unread", {"site": site.name, "why": loading})
        return None
    if loading.holds == "none":
        return None
    held = weights * gpus if loading.holds == "all" else weights
    if limit >= held:
        return None
    return Verdict(
        "violation" if loading.holds == "all" else "advisory",
        f"loader-holds-{loading.holds}",
        values={
            "engine": site.label,
            "weights_bytes": weights,
            "held_bytes": held,
            "workers": gpus,
            "how": loading.how,
            "vllm": site.release().version,
            "reference_vllm": reference_release(),
        },
        thresholds={"memory_limit_bytes": limit},
        sources=(VLLM_LOADER_SRC,),
        path=(*container.path, "resources", "limits", "memory"),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The container memory limit covers the host KV cache and offloaded weights."""
    for site in engine_sites(ctx, obj):
        container = site.container
        if site.ray or container is None:
            continue
        gpus = site.engine.gpus_per_engine()
        if gpus is None:
            continue  # V001/V002 report an unreadable TP or PP
        for key in _READ:
            known(site.engine.get(key), f"{key} of {site.engine.source}")
        per_token, weights = _estimates(ctx, site)
        host = host_memory(site.engine.values, site.env, gpus, per_token)
        if isinstance(host, str):
            yield Verdict("not_evaluated", "host-memory-unread", {"site": site.name, "why": host})
            continue
        known(container.resources("limits").get("memory"), f"memory limit of {site.label}")
        limit = container.memory_limit()
        if limit is None:
            continue
        if weights:
            found = _loading(site, container, (weights, math.ceil(limit), gpus))
            if found is not None:
                yield found
        if not host.total_bytes or limit >= host.total_bytes:
            continue
        yield Verdict(
            "violation",
            "host-memory-exceeds-limit",
            values={
                "engine": site.label,
                "host_bytes": host.total_bytes,
                "parts": tuple(host.parts),
                "kv_tokens": host.kv_tokens,
                "shm_unbounded": _shm_unbounded(container),
            },
            thresholds={"memory_limit_bytes": limit},
            sources=(VLLM_CACHE_SRC, VLLM_WEIGHTS_SRC),
            path=(*container.path, "resources", "limits", "memory"),
        )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K020 message quotes beyond its values: sizes in GiB, the host buffer's
    parts and clauses, and the ``head`` the loader reasons share."""
    v = verdict.values
    if verdict.decision == "not_evaluated":
        return {}
    limit = _gib(float(cast(Fraction | int, verdict.thresholds["memory_limit_bytes"])))
    if verdict.reason == "host-memory-exceeds-limit":
        host = cast(int, v["host_bytes"])
        shm = (
            "; its memory-backed /dev/shm has no sizeLimit, and what NCCL and the workers "
            "write there counts against the same limit"
        )
        return {
            "limit": limit,
            "host": _gib(host),
            "host_gi": str(math.ceil(host / GIB)),
            "part_list": "; ".join(cast(tuple[str, ...], v["parts"])),
            "tokens": f", holding {v['kv_tokens']:,} tokens on the host" if v["kv_tokens"] else "",
            "shm": shm if v["shm_unbounded"] else "",
        }
    held = cast(int, v["held_bytes"])
    head = (
        f"{v['engine']} loads {_gib(cast(int, v['weights_bytes']))} of weights under a memory "
        f"limit of {limit}: {v['how']}{_release_note(v)}"
    )
    return {"head": head, "held": _gib(held), "need": str(math.ceil(held / GIB))}


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={
        "VLLM_CACHE_SRC": VLLM_CACHE_SRC,
        "VLLM_WEIGHTS_SRC": VLLM_WEIGHTS_SRC,
        "VLLM_LOADER_SRC": VLLM_LOADER_SRC,
    },
)
