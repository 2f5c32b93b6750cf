"""V006 block-size-valid."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from gpustrata.catalog.vllm_release_types import BlockSizeRelease, ForcedBlockSize, source_url
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import (
    EngineSite,
    Version,
    engine_sites,
    neighbours,
    release_key,
    release_version,
    site_architecture,
    site_gpus,
)
from gpustrata_policies.view.objects import K8sObject

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture
    from gpustrata.catalog.hardware import GpuModel

Answer = tuple[bool | None, str]
"""One release's answer on one block size, model kind and GPU: (refused?, why); None when
the release's behaviour on that GPU was not read."""

_MULTIPLE_OF_16 = (
    "its CUDA attention backends need a multiple of 16 (FlashAttention and Triton stop with "
    "'Block size must be a multiple of 16.')"
)


def _legacy(version: str, choices: tuple[int, ...]) -> Callable[..., Answer]:
    """Releases with ``--block-size`` choices (``CacheConfig.BlockSize``); the
    default CUDA backend by compute capability (``vllm/platforms/cuda.py``): FlashAttention
    (or Triton, for sinks / FP8 KV off Hopper) on 8.x-9.x, FlashInfer on 10.x, FlexAttention
    below 8.0."""

    def verdict(block: int, mla: bool, cc: tuple[int, int], cli: bool) -> Answer:
        # The choices bind the command line only: engine kwargs (Ray Serve LLM) reach
        # CacheConfig, whose block_size is SkipValidation[BlockSize].
        if cli and block not in choices:
            return True, (
                f"vLLM {version}'s --block-size only takes {', '.join(map(str, choices))} "
                "(CacheConfig.BlockSize), so the argument parser rejects it"
            )
        if mla:
            # CudaPlatform.check_and_update_config forces FlashMLA's 64 (compute capability
            # 9) or CUTLASS MLA's 128 (10): any listed size is accepted (and replaced).
            if cc[0] in (9, 10):
                return False, ""
            return None, (
                f"the MLA backends of vLLM {version} below compute capability 9 were not read"
            )
        if cc[0] >= 10:  # FlashInfer is the default there; its limits were not read
            return None, (
                f"vLLM {version}'s default backend on compute capability 10 (FlashInfer) "
                "was not read"
            )
        if cc[0] < 8:  # FlexAttention, which declares no block-size limit there
            return None, (
                f"vLLM {version}'s default backend below compute capability 8 (FlexAttention) "
                "has no stated block-size limit"
            )
        return (True, _MULTIPLE_OF_16) if block % 16 else (False, "")

    return verdict


def _modern(version: str) -> Callable[..., Answer]:
    """Releases without ``--block-size`` choices (the reference release): any positive int
    parses; the backend must support it (all CUDA ones declare multiples of 16:
    FlashAttention/Triton/Flex MultipleOf(16), FlashInfer 16/32/64, Triton-MLA and
    FlashAttention-MLA MultipleOf(16), FlashMLA 64, FlashInfer-MLA 32/64, CUTLASS-MLA 128),
    else CudaPlatform.get_attn_backend_cls stops."""

    def verdict(block: int, mla: bool, cc: tuple[int, int], cli: bool) -> Answer:
        if block % 16:
            kind = "MLA" if mla else "attention"
            return True, (
                f"no CUDA {kind} backend of vLLM {version} takes it (every one needs a "
                "multiple of 16), so it stops with 'No valid attention backend found'"
            )
        return False, ""

    return verdict


@dataclass(frozen=True, slots=True)
class Release:
    """The block-size facts read in one vLLM release."""

    version: str
    verdict: Callable[..., Answer]
    sources: tuple[str, ...]
    forced: tuple[ForcedBlockSize, ...] = ()


def _parser_only(version: str, choices: tuple[int, ...]) -> Callable[..., Answer]:
    """Releases of which only the ``--block-size`` choices were read: a size outside them
    is refused on the command line; the attention backends' limits are unknown."""

    def verdict(block: int, mla: bool, cc: tuple[int, int], cli: bool) -> Answer:
        if cli and block not in choices:
            return True, (
                f"vLLM {version}'s --block-size only takes {', '.join(map(str, choices))}, "
                "so the argument parser rejects it"
            )
        return None, f"the attention backends' block-size limits of vLLM {version} were not read"

    return verdict


def _release(read: BlockSizeRelease) -> Release:
    if read.cli_choices and not read.backends_read:
        verdict = _parser_only(read.version, read.cli_choices)
    elif read.cli_choices:
        verdict = _legacy(read.version, read.cli_choices)
    else:
        verdict = _modern(read.version)
    sources = tuple(source_url(x) for x in (*read.sources, *(f.source for f in read.forced)))
    return Release(read.version, verdict, sources, read.forced)


READ: list[tuple[Version, Release]] = [
    (release_key(r.version), _release(r)) for r in catalogs.vllm_releases().block_size
]
"""The releases whose block-size facts were read (release catalogue), oldest first."""
_ALL_CC = ((7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0))


def _judge(
    releases: list[Release],
    block: int,
    mla_options: tuple[bool, ...],
    ccs: list[tuple[int, int]],
    cli: bool,
) -> Answer:
    """Refused only if every release, model kind and GPU considered refuses it."""
    results = [
        r.verdict(block, mla, cc, cli) for r in releases for mla in mla_options for cc in ccs
    ]
    if all(refused is True for refused, _ in results):
        return True, results[-1][1]
    if all(refused is False for refused, _ in results):
        return False, ""
    return None, next((why for refused, why in results if refused is None), "") or (
        "the releases, GPUs or model kinds considered disagree"
    )


def _text(site: EngineSite, key: str) -> str | None:
    value = site.engine.get(key)
    if value is UNKNOWN:
        raise UnknownInput(f"{key} of {site.label}")
    return None if value is None else str(value)


def _forced(
    site: EngineSite,
    block: int,
    releases: list[Release],
    arch: ModelArchitecture | None,
    gpus: list[tuple[GpuModel, str]],
) -> tuple[ForcedBlockSize, str] | None:
    """A backend page size the release forces that the block size breaks, where the engine
    names that backend (``--attention-backend``): (the fact, its source) or None. Without
    the flag vLLM picks another backend instead, so nothing stops."""
    backend = _text(site, "attention_backend")
    if arch is None or not gpus or backend is None:
        return None
    kv_dtype = _text(site, "kv_cache_dtype") or "auto"
    mla = arch.attention == "mla"
    for fact in releases[0].forced:
        agreed = all(fact in r.forced for r in releases)
        if not agreed or backend.upper() != fact.backend or block % fact.multiple_of == 0:
            continue
        if all(
            fact.applies(g.capability[0], arch.head_dim, kv_dtype, mla, arch.model_type)
            for g, _ in gpus
        ):
            return fact, source_url(fact.source)
    return None


def _gpu_names(gpus: list[tuple[GpuModel, str]]) -> tuple[tuple[str, str], ...]:
    """(GPU, where it was read) of each GPU the engine may get."""
    return tuple((g.name, w) for g, w in gpus)


def _judge_site(ctx: RuleContext, site: EngineSite, block: int) -> Verdict | None:
    """One engine's explicit, positive block size against its release and GPUs."""
    release = site.release()
    version, where = release.version, release.where
    parsed = release_version(version)
    values: dict[str, Value] = {"engine": site.label, "block_size": block, "version": version}
    if version is None or parsed is None:
        return Verdict("not_evaluated", "release-unknown", values={**values, "where": where})
    releases = neighbours(parsed, READ)
    if releases is None:
        read = tuple(r.version for _, r in READ)
        return Verdict("not_evaluated", "release-not-read", values, thresholds={"read": read})
    arch = site_architecture(site)
    mla_options = (arch.attention == "mla",) if arch else (False, True)
    found = site_gpus(ctx, site)  # MIG: the slice, with its parent's compute capability
    gpus = [] if isinstance(found, str) else [(r.gpu, r.where) for r in found]
    ccs = [g.capability for g, _ in gpus] or list(_ALL_CC)
    refused, why = _judge(releases, block, mla_options, ccs, not site.ray)
    forced = _forced(site, block, releases, arch, gpus) if refused is False else None
    values.update(where=where, gpus=_gpu_names(gpus), why=why)
    if forced is not None:
        fact, url = forced
        values.update(
            backend=fact.backend,
            model=arch.id if arch else "this model",
            head_size=fact.head_size,
            why=fact.why,
        )
        thresholds = {"multiple_of": fact.multiple_of}
        return Verdict("violation", "forced-backend-page", values, thresholds, (url,), site.path)
    if refused is None:
        return Verdict("not_evaluated", "backend-unread", values)
    if not refused:
        return None
    values["judged_by"] = tuple(r.version for r in releases) if len(releases) == 2 else ()
    return Verdict("violation", "block-size-refused", values, path=site.path)


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """An explicit block_size is one the vLLM release and its CUDA backend accept."""
    for site in engine_sites(ctx, obj):
        raw = site.int_flag("block_size")
        if raw is None:
            continue  # vLLM's default (16) is valid for every release and backend read
        if isinstance(raw, str) or raw < 1:
            values = {"engine": site.label, "block_size": raw}
            yield Verdict("violation", "not-positive", values, path=site.path)
            continue
        verdict = _judge_site(ctx, site, raw)
        if verdict is not None:
            yield verdict


def _on(gpus: Value) -> str:
    """The GPUs of a verdict as the message names them."""
    return ", ".join(f"{name} ({where})" for name, where in cast(tuple[tuple[str, str]], gpus))


def _refused_message(v: Mapping[str, Value]) -> str:
    """The prose of a block size every release read refuses."""
    judged = f"vLLM {v['version']} ({v['where']})"
    if v["judged_by"]:
        older, newer = cast(tuple[str, str], v["judged_by"])
        judged = (
            f"vLLM {v['version']} ({v['where']}; judged by {older} and {newer}, the releases "
            "read around it, which agree)"
        )
    on = f"on {_on(v['gpus'])}" if v["gpus"] else "on any GPU (no pool or GPU selector names one)"
    return (
        f"{v['engine']} sets block_size {v['block_size']}, which {judged} refuses {on}: "
        f"{v['why']}; use 16 (vLLM's default) or another multiple of 16 that this release accepts"
    )


def message(verdict: Verdict) -> str:
    """The prose of a V006 verdict."""
    v, reason = verdict.values, verdict.reason
    head = f"{v['engine']} sets block_size {v['block_size']}"
    if reason == "not-positive":
        return (
            f"{head}, which is not a positive number of tokens; use 16 (vLLM's default) or "
            "another multiple of 16"
        )
    if reason == "release-unknown":
        return f"{head}, but {v['where']}, and the block sizes vLLM accepts depend on its version"
    if reason == "release-not-read":
        read = ", ".join(cast(tuple[str, ...], verdict.thresholds["read"]))
        return (
            f"{head} for vLLM {v['version']}; V006 knows the block sizes of vLLM {read} (read "
            f"from their sources), not of {v['version']}"
        )
    if reason == "backend-unread":
        return f"{head} for vLLM {v['version']}: {v['why']}"
    if reason == "block-size-refused":
        return _refused_message(v)
    backend, multiple = v["backend"], verdict.thresholds["multiple_of"]
    return (
        f"{head} with attention_backend {backend}, which vLLM {v['version']} ({v['where']}) "
        f"refuses for {v['model']} (head size {v['head_size']}) on {_on(v['gpus'])}: "
        f"{v['why']}, so {backend} takes only multiples of {multiple} and the engine stops "
        f"with 'Selected backend {backend} is not valid for this configuration' "
        f"({verdict.sources[0]}); use a multiple of {multiple} (vLLM's own choice there when "
        "block_size is unset) or drop attention_backend"
    )


def _references() -> tuple[str, ...]:
    seen: list[str] = []
    for _, release in READ:
        seen += [s for s in release.sources if s not in seen]
    return tuple(seen)


RULE = folder_rule(__name__, judged(judge, message), facts={"read_sources": _references()})
