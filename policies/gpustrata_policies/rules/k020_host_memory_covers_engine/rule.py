"""K020 host-memory-covers-engine."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

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
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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


def _shm_note(container: ContainerRef) -> str:
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
            return (
                "; its memory-backed /dev/shm has no sizeLimit, and what NCCL and the "
                "workers write there counts against the same limit"
            )
    return ""


def _estimates(ctx: RuleContext, site: EngineSite) -> tuple[int | None, int | None]:
    """KV bytes per token on one GPU and the weight bytes the loader reads (None: the
    model or GPU is unknown, which V003 reports)."""
    found = capacity_inputs(ctx, site)
    if isinstance(found, str) or not found:
        return None, None
    per_token = min(i.estimate.kv.bytes_per_token for i in found)
    return per_token, min(i.estimate.weights.total_bytes for i in found)


def _release_note(site: EngineSite) -> str:
    """The loader paths are read at the reference release: say so where the image names
    another release or none (the release is not assumed)."""
    release = site.release()
    version = release.version
    reference = reference_release()
    if version == reference:
        return ""
    runs = f"the image runs vLLM {version}" if version else "the image names no vLLM release"
    return f" (vLLM's loader as read at {reference}; {runs})"


def _loading(
    ctx: RuleContext,
    obj: K8sObject,
    site: EngineSite,
    container: ContainerRef,
    sizes: tuple[int, int, int],
) -> Outcome | None:
    """A memory limit below the weights the engine loads: mandatory where the loader holds
    them all in process memory at once, advisory where it fails or not by the checkpoint's
    shards, or merely cannot keep them cached."""
    weights, limit, gpus = sizes
    loading = weight_loading(site.engine.values)
    if isinstance(loading, str):
        return ctx.not_evaluated(obj, f"{site.name}: {loading}") if limit < weights else None
    if loading.holds == "none":
        return None
    held = weights * gpus if loading.holds == "all" else weights
    if limit >= held:
        return None
    path = (*container.path, "resources", "limits", "memory")
    head = (
        f"{site.label} loads {_gib(weights)} of weights under a memory limit of "
        f"{_gib(float(limit))}: {loading.how}{_release_note(site)}"
    )
    need = math.ceil(held / GIB)
    if loading.holds == "all":
        return ctx.violation(
            obj,
            f"{head}, so {gpus} worker(s) hold {_gib(held)} and the kernel OOM-kills the "
            f"container during the load. Set limits.memory above {need}Gi plus the engine's "
            "own memory, or drop enable_multithread_load",
            path,
        )
    if loading.holds == "files":
        return ctx.violation(
            obj,
            f"{head}. Whether the load is OOM-killed depends on the largest files held at "
            f"once times {gpus} worker(s), which the checkpoint's shards decide (not read "
            f"here). Set limits.memory above {need}Gi, or load safetensors memory-mapped "
            "(vLLM's default)",
            path,
            advisory=True,
        )
    return ctx.violation(
        obj,
        f"{head}. Not a failure: the load completes, but the weights cannot stay cached in "
        f"the container, and vLLM {reference_release()} skips its automatic prefetch on "
        "NFS/Lustre (it needs the checkpoint within 90% of the container's free memory, "
        f"{VLLM_LOADER_SRC}). Set "
        f"limits.memory above {need}Gi plus the engine's own memory to keep them cached",
        path,
        advisory=True,
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
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
            yield ctx.not_evaluated(obj, f"{site.name}: {host}")
            continue
        known(container.resources("limits").get("memory"), f"memory limit of {site.label}")
        limit = container.memory_limit()
        if limit is None:
            continue
        if weights:
            found = _loading(ctx, obj, site, container, (weights, math.ceil(limit), gpus))
            if found is not None:
                yield found
        if not host.total_bytes or limit >= host.total_bytes:
            continue
        tokens = f", holding {host.kv_tokens:,} tokens on the host" if host.kv_tokens else ""
        need = math.ceil(host.total_bytes / GIB)
        yield ctx.violation(
            obj,
            f"{site.label} pins at least {_gib(host.total_bytes)} of host memory "
            f"({'; '.join(host.parts)}){tokens}, but its memory limit is "
            f"{_gib(float(limit))}; the kernel OOM-kills the container once the buffer fills"
            f"{_shm_note(container)}. Set limits.memory above {need}Gi plus what the engine "
            "processes themselves use, or shrink the offload",
            (*container.path, "resources", "limits", "memory"),
        )


RULE = folder_rule(
    __name__,
    check,
    facts={
        "VLLM_CACHE_SRC": VLLM_CACHE_SRC,
        "VLLM_WEIGHTS_SRC": VLLM_WEIGHTS_SRC,
        "VLLM_LOADER_SRC": VLLM_LOADER_SRC,
    },
)
