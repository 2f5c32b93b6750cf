"""Helpers shared by the vLLM engine rules V002, V005 and V006 (not a rule).

Where a vLLM engine runs (a ``vllm serve`` container, or a Ray Serve LLM config in a
RayService), which vLLM version it is (the image tag; a ``rayproject/ray-llm`` tag through
the Ray release's pinned vLLM in the compatibility catalogue), which GPU it gets (the
pools it targets, else its GPU node selectors) and the model architecture (catalogue).

Version-dependent facts live in the rules and are keyed by the vLLM releases whose
source was read. A version between two read releases is judged under both, and a rule
reports only what both agree on (otherwise "not evaluated", saying why); releases outside
the read range are not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from gpustrata.catalog.vllm_releases import vllm_file_url as vllm_source
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.vllm.flags import flag_bool, int_setting
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import (
    EngineArgs,
    serve_config,
    split_image,
    vllm_engine,
    vllm_version,
)
from gpustrata_policies.view.nodes import (
    gpu_model_of_pool,
    gpu_model_of_selectors,
    gpu_pools,
    targeted_pools,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, dig

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture
    from gpustrata.catalog.hardware import GpuModel

Path = tuple[str | int, ...]
Version = tuple[int, ...]
T = TypeVar("T")

__all__ = [
    "EngineSite",
    "as_bool",
    "as_int",
    "engine_sites",
    "neighbours",
    "parse_version",
    "release_key",
    "site_architecture",
    "site_gpus",
    "site_version",
    "vllm_source",
]


@dataclass(frozen=True, slots=True)
class EngineSite:
    """One vLLM engine and what surrounds it."""

    obj: K8sObject
    engine: EngineArgs
    path: Path
    """Where the settings are (container command, or ``spec.serveConfigV2``)."""
    images: tuple[Any, ...]
    env: Mapping[str, str]
    pods: tuple[PodRef, ...]
    """The pod specs whose GPUs run the engine (Ray: the worker groups)."""
    ray: bool
    models: tuple[str, ...] = ()
    """Names the model goes by (Ray: ``model_source`` first, then ``model_id``)."""

    @property
    def label(self) -> str:
        """Where the engine is, for messages (``container 'vllm'`` / serveConfigV2 path)."""
        return self.engine.source


def engine_sites(obj: K8sObject) -> Iterator[EngineSite]:
    """Every vLLM engine of the object (Ray Serve LLM configs once per RayService)."""
    if obj.kind == "RayService":
        cfg = serve_config(obj)
        workers = tuple(p for p in obj.pods() if p.is_ray and p.role != "head")
        containers = [c for p in workers for c in p.containers(init=False)]
        env: dict[str, str] = {}
        for c in containers:
            env.update(c.literal_env())
        images = tuple(c.image for c in containers)
        complete = [e for e in cfg.engines if e.complete] if cfg else []
        configs = cfg.llm_configs if cfg else []
        for ray_engine, llm_config in zip(complete, configs, strict=False):
            source = dig(llm_config, "model_loading_config", "model_source")
            names = tuple(n for n in (source, ray_engine.model) if isinstance(n, str) and n)
            yield EngineSite(
                obj, ray_engine, ("spec", "serveConfigV2"), images, env, workers, True, names
            )
        return
    for pod in obj.pods():
        if pod.is_ray:
            continue
        for c in pod.containers(init=False):
            engine = vllm_engine(c)
            if engine is not None:
                path = (*c.path, "args" if "args" in c.raw else "command")
                names = (engine.model,) if engine.model else ()
                yield EngineSite(
                    obj, engine, path, (c.image,), c.literal_env(), (pod,), False, names
                )


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def parse_version(text: str | None) -> Version | None:
    """``'1.2.3'`` -> ``(1, 2, 3)``, ``'v1.2'`` -> ``(1, 2, 0)`` (``.postN`` and local
    labels dropped)."""
    if not text:
        return None
    match = _NUMBER.match(text.lstrip("v"))
    if match is None:
        return None
    parts = tuple(int(p) for p in match.group(0).split("."))
    return (*parts, 0, 0, 0)[:3]


def release_key(version: str) -> Version:
    """A catalogued release as a comparison key (``'1.2.3'`` -> ``(1, 2, 3)``)."""
    key = parse_version(version)
    if key is None:
        raise ValueError(f"{version!r} is not a release version")
    return key


def site_version(site: EngineSite) -> tuple[str | None, str]:
    """(vLLM version, where it was read) of the engine's image; version None if unknown."""
    for image in site.images:
        if image is UNKNOWN:
            raise UnknownInput(f"image of {site.label}")
        version = vllm_version(image)
        if version:
            return version, f"image {image}"
        if isinstance(image, str) and split_image(image)[0].endswith("rayproject/ray-llm"):
            tag = split_image(image)[1] or ""
            info = catalogs.compat().ray_llm_image(tag)
            if info is not None and info.vllm:
                return info.vllm, f"image {image} (Ray {info.ray} pins vllm=={info.vllm})"
            return None, f"image {image} does not pin a vLLM version the catalogue knows"
    shown = ", ".join(str(i) for i in site.images) or "none"
    return None, f"the image ({shown}) does not name a vLLM version"


def site_gpus(ctx: RuleContext, site: EngineSite) -> list[tuple[GpuModel, str]]:
    """Catalogue GPUs the engine can run on: its target pools', else its GPU selectors'."""
    pools = gpu_pools(ctx)
    found: dict[str, tuple[GpuModel, str]] = {}
    for pod in site.pods:
        if pools:
            for pool in targeted_pools(pod, pools):
                gpu = gpu_model_of_pool(pool)
                if gpu is not None:
                    found.setdefault(gpu.id, (gpu, f"pool {pool.name}"))
        else:
            gpu, label = gpu_model_of_selectors(pod)
            if gpu is not None:
                found.setdefault(gpu.id, (gpu, label))
    return list(found.values())


def site_architecture(site: EngineSite) -> ModelArchitecture | None:
    """The catalogue architecture of the served model (by id or alias), or None."""
    for name in site.models:
        arch = catalogs.model_architecture(name)
        if arch is not None:
            return arch
    return None


def as_int(engine: EngineArgs, key: str) -> int | str | None:
    """An integer setting as vLLM reads it; ``None`` when unset; the raw text when vLLM
    would refuse it (:func:`gpustrata.vllm.flags.int_setting`)."""
    return int_setting(engine.values, key, engine.source)


def as_bool(engine: EngineArgs, key: str) -> bool | None:
    """A boolean setting (``--flag``, ``--no-flag``, ``--flag=false``, YAML bools)."""
    return flag_bool(engine.values, key, engine.source)


def neighbours(version: Version, read: Sequence[tuple[Version, T]]) -> list[T] | None:
    """Facts of the read release itself, or of the read releases around it.

    ``read`` is sorted by version. Returns None outside the read range.
    """
    for key, facts in read:
        if key == version:
            return [facts]
    below = [f for k, f in read if k < version]
    above = [f for k, f in read if k > version]
    if not below or not above:
        return None
    return [below[-1], above[0]]


def fmt_version(version: Version) -> str:
    """``(0, 11, 1)`` -> ``0.11.1``."""
    return ".".join(str(p) for p in version)


def gib(gpu: GpuModel) -> str:
    """``79.65 GiB`` for messages."""
    return f"{gpu.memory_gib:g} GiB"
