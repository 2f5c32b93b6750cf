"""K007 shm-for-multi-gpu."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import cast

from gpustrata.core.quantity import format_bytes, parse_quantity
from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.controllers import pod_group
from gpustrata_policies.view.engines import EngineSite, engine_sites, unread_ray_engines
from gpustrata_policies.view.kuberay import operator_release
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef, as_list, as_map, dig
from gpustrata_policies.view.profile import profile_hint

RUNTIME_DEFAULT_SHM = Fraction(64 * 2**20)  # Docker/containerd default /dev/shm: 64 MiB
PLASMA_DIRECTORY = "plasma-directory"
KUBERAY_POD_GO = "ray-project/kuberay@v1.6.0:ray-operator/controllers/ray/common/pod.go"
Kuberay = tuple[bool | None, str]
"""(skips /dev/shm injection when plasma-directory is set, or None when unknown; what said so)."""


def _kuberay_skips(ctx: RuleContext) -> Kuberay:
    """Does the deployed KubeRay skip its /dev/shm injection for an explicit plasma-directory?"""
    found = operator_release(ctx)
    if found is None:
        return (
            None,
            f"the KubeRay operator's version is not stated {profile_hint('versions.kuberay')}",
        )
    release, where = found
    if release is None:
        return None, f"{where} is not in the compatibility catalogue"
    return release.shm_skipped_with_plasma_directory, where


def _pod_memory_limit(pod: PodRef) -> Fraction | None:
    limits = [c.memory_limit() for c in pod.containers(init=False)]
    if not limits or any(x is None for x in limits):
        return None
    return sum((x for x in limits if x is not None), Fraction(0))


def shm_status(
    pod: PodRef, c: ContainerRef, kuberay: Kuberay = (False, "")
) -> tuple[str, Fraction | None, str]:
    """(medium, size or None for node-bounded, description) of the container's /dev/shm.

    The medium is ``unknown`` for a Ray container whose ``rayStartParams`` set
    ``plasma-directory`` when the KubeRay release (``kuberay``) is not known: KubeRay 1.6.0+
    then adds no /dev/shm.
    """
    if pod.spec.get("hostIPC") is True:
        return "memory", None, "uses the host IPC namespace and its /dev/shm (hostIPC: true)"
    for mount in as_list(c.raw.get("volumeMounts"), f"volumeMounts of {c.label}"):
        if (
            not isinstance(mount, Mapping)
            or str(mount.get("mountPath", "")).rstrip("/") != "/dev/shm"
        ):
            continue
        name = str(mount.get("name"))
        volume = pod.volumes().get(name, {})
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, Mapping) or ("emptyDir" in volume and empty_dir is None):
            empty_dir = empty_dir or {}
            if empty_dir.get("medium") != "Memory":
                return "disk", None, f"mounts the disk-backed emptyDir '{name}' at /dev/shm"
            size_limit = parse_quantity(empty_dir.get("sizeLimit"))
            pod_limit = _pod_memory_limit(pod)
            sizes = [s for s in (size_limit, pod_limit) if s is not None]
            size = min(sizes) if sizes else None
            why = "sizeLimit" if size is not None and size == size_limit else "pod memory limit"
            desc = (
                f"mounts a memory-backed /dev/shm of {format_bytes(size)} ({why})" if size else ""
            )
            return "memory", size, desc
        if dig(volume, "hostPath", "path") == "/dev/shm":
            return "memory", None, "mounts the host's /dev/shm"
        return "disk", None, f"mounts volume '{name}' at /dev/shm, which is not memory-backed"
    params = as_map(dig(pod.ray_group or {}, "rayStartParams"), "rayStartParams")
    if pod.is_ray and PLASMA_DIRECTORY in params:
        skips, where = kuberay
        plasma = f"rayStartParams {PLASMA_DIRECTORY}: {params[PLASMA_DIRECTORY]}"
        if skips is None:
            return (
                "unknown",
                None,
                (
                    f"sets {plasma}, for which KubeRay 1.6.0 and later add no /dev/shm "
                    f"({KUBERAY_POD_GO}), and {where}"
                ),
            )
        if skips:
            return (
                "none",
                RUNTIME_DEFAULT_SHM,
                (
                    f"sets {plasma}, so {where} adds no /dev/shm ({KUBERAY_POD_GO}) and it mounts "
                    "none (the container runtime gives 64Mi)"
                ),
            )
    if pod.is_ray:  # KubeRay adds a memory emptyDir sized to the memory limit (else request)
        size = c.memory_limit() or c.memory_request()
        desc = (
            f"gets KubeRay's injected /dev/shm sized to its memory of {format_bytes(size)}"
            if size
            else ""
        )
        return "memory", size, desc
    return (
        "none",
        RUNTIME_DEFAULT_SHM,
        "mounts nothing at /dev/shm (the container runtime gives 64Mi)",
    )


def _ray_engine_gpus(sites: list[EngineSite], obj: K8sObject) -> int | None:
    """GPUs of the largest Ray Serve LLM engine of a RayService, when every engine is read."""
    ray = [s for s in sites if s.ray]
    if not ray or unread_ray_engines(obj):
        return None
    sizes = [s.gpus_per_engine() for s in ray]
    if all(s is not None for s in sizes):
        return max(s for s in sizes if s is not None)
    return None


def _engine_gpus(
    pod: PodRef,
    c: ContainerRef,
    sites: Mapping[int, EngineSite],
    ray_engines: int | None,
    extra: tuple[str, ...],
) -> tuple[bool, int | None]:
    """(runs a GPU engine, GPUs per engine or None when not readable) of container *c*
    (*sites*: the engines of the object's containers, by container)."""
    if pod.is_ray:
        return c.gpu_limit(extra) > 0, ray_engines
    site = sites.get(id(c))
    if site is None:
        return False, None
    per_engine = site.gpus_per_engine()
    if per_engine == 1 and not site.engine.complete:
        per_engine = None  # flags may come from elsewhere ($@, variables)
    return True, per_engine


def _container(
    pod: PodRef,
    c: ContainerRef,
    per_engine: int | None,
    kuberay: Kuberay,
    minimum: Fraction,
    extra: tuple[str, ...],
) -> Verdict | None:
    """The verdict on one engine container's /dev/shm, or None when it passes."""
    medium, size, desc = shm_status(pod, c, kuberay)
    if medium == "memory" and (size is None or size >= minimum):
        return None
    values: dict[str, Value] = {
        "container": c.label,
        "medium": medium,
        "shm_bytes": size,
        "shm": desc,
        "engine_gpus": per_engine,
    }
    thresholds: dict[str, Value] = {"min_shm_bytes": minimum}
    # The KubeRay release that said whether /dev/shm is injected (not the reason it is unknown).
    sources = (kuberay[1],) if pod.is_ray and kuberay[0] is not None and kuberay[1] else ()
    if medium == "unknown":
        if per_engine is None or per_engine > 1:
            return Verdict("not_evaluated", "kuberay-injection-unknown", values, sources=sources)
        return None
    if per_engine is None:
        gpus = c.gpu_limit(extra)
        if gpus > 1:
            values["gpus"] = gpus
            return Verdict("not_evaluated", "parallel-sizes-unread", values, thresholds)
        return None
    if per_engine <= 1:
        return None
    if pod_group(pod) is not None and c.gpu_limit(extra) <= 1:
        # an engine spread over a group of Pods: only the GPUs in this Pod talk
        # over its /dev/shm, the others over the network
        return None
    return Verdict(
        "violation", "shm-too-small", values, thresholds, sources, (*c.path, "volumeMounts")
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Multi-GPU vLLM engines get a memory-backed /dev/shm of at least the minimum."""
    minimum = parse_quantity(ctx.threshold("min_shm_size"))
    if minimum is None:
        spelled = quoted(ctx.threshold("min_shm_size"))
        yield Verdict("not_evaluated", "min-shm-not-a-quantity", {"min_shm_size": spelled})
        return
    extra = ctx.config.gpu_resources
    sites = engine_sites(ctx, obj)
    by_container = {id(s.container): s for s in sites if s.container is not None}
    ray_engines = _ray_engine_gpus(sites, obj)
    kuberay: Kuberay | None = None
    for pod in obj.pods():
        if pod.is_ray and kuberay is None:
            kuberay = _kuberay_skips(ctx)
        for c in pod.containers(init=False):
            runs_engine, per_engine = _engine_gpus(pod, c, by_container, ray_engines, extra)
            if runs_engine:
                found = _container(pod, c, per_engine, kuberay or (False, ""), minimum, extra)
                if found is not None:
                    yield found


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K007 message quotes beyond its values: the /dev/shm minimum, in bytes."""
    minimum = verdict.thresholds.get("min_shm_bytes")
    return {"minimum": format_bytes(cast(Fraction, minimum))} if minimum is not None else {}


RULE = folder_rule(__name__, worded(judge, fields))
