"""V005 batch-budget-covers-context."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from gpustrata.catalog.vllm_facts import scheduler_releases
from gpustrata.catalog.vllm_release_types import BatchDefaults, SchedulerRelease, source_url
from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import every_release, release_unknown, releases_split
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.candidates import ReleaseCandidates, candidate_releases
from gpustrata_policies.view.engines import (
    EngineSite,
    Version,
    engine_sites,
    gib,
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

_CATALOGUE = catalogs.vllm_releases()
LONG_CONTEXT = _CATALOGUE.v0_defaults.long_context
"""V0 turns chunked prefill on by default above this max_model_len (_set_default_args_v0)."""
V0_DEFAULT_SEQS = _CATALOGUE.v0_defaults.max_num_seqs
DEFAULT_TOKENS = _CATALOGUE.default_batch_tokens.int_value
"""SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS (every release read)."""
ENGINE_CONTEXT_SEQS = _CATALOGUE.engine_context_seqs.int_value
"""SchedulerConfig.DEFAULT_MAX_NUM_SEQS: engines built outside ``vllm serve``."""


READ: list[tuple[Version, SchedulerRelease]] = [
    (release_key(r.version), r) for r in scheduler_releases()
]
"""The releases whose scheduler defaults were read (release catalogue), oldest first."""
V0_READ = tuple(release_key(v) for v in _CATALOGUE.v0_defaults.read_in)
"""Releases whose V0 engine defaults were read (_set_default_args_v0, SchedulerConfig)."""
_V1_DEFAULT = release_key(_CATALOGUE.v1_default_from)
_V0_REMOVED = release_key(_CATALOGUE.v0_removed_in)
_V1_OPT_IN = release_key(_CATALOGUE.v1_opt_in_from or _CATALOGUE.v1_default_from)
"""Before this release there is no V1 engine and VLLM_USE_V1=1 changes nothing."""


@dataclass(frozen=True, slots=True)
class World:
    """One way vLLM may run this engine (release read, GPU row, usage context)."""

    release: str
    chunked: bool | None
    chunked_why: str
    tokens: int | None
    tokens_why: str
    seqs: int | None
    seqs_why: str


@dataclass(frozen=True, slots=True)
class Settings:
    """What the engine states."""

    tokens: int | None
    seqs: int | None
    chunked: bool | None
    max_len: int | None
    max_len_why: str


def _v1_worlds(
    s: Settings, releases: list[SchedulerRelease], gpus: list[tuple[GpuModel, str]], ray: bool
) -> list[World]:
    worlds = []
    for r in releases:
        chunked = True if r.chunked_forced or s.chunked is None else s.chunked
        chunked_why = (
            f"vLLM {r.version}'s V1 engine always chunks prefills"
            if r.chunked_forced
            else ("--no-enable-chunked-prefill" if chunked is False else "on by default")
        )
        rows: list[tuple[BatchDefaults, str]] = [
            (
                r.batch_row(g.memory_gib, f"{g.id} {g.name}"),
                f"vllm serve on {g.name} ({gib(g)}, {where})",
            )
            for g, where in gpus
        ] or [(t, f"vllm serve on a GPU of {t.min_gib:g} GiB or more") for t in r.batch_defaults]
        contexts = [(t.tokens, t.seqs, why) for t, why in rows]
        if ray:  # Ray Serve LLM builds the engine itself: usage context not read
            contexts.append((DEFAULT_TOKENS, ENGINE_CONTEXT_SEQS, "an engine built by Ray"))
        for tokens_default, seqs_default, why in contexts:
            tokens, tokens_why = s.tokens, "set"
            if tokens is None:
                tokens_why = f"vLLM {r.version}'s default for {why}, EngineArgs.get_batch_defaults"
                tokens = tokens_default
                if chunked is False:  # raised to cover max_model_len
                    tokens = max(tokens, s.max_len) if s.max_len else None
            seqs, seqs_why = s.seqs, "set"
            if seqs is None:
                seqs = min(seqs_default, tokens) if r.clamp_seqs and tokens else seqs_default
                seqs_why = f"vLLM {r.version}'s default for {why}" + (
                    ", lowered to the token budget" if seqs != seqs_default else ""
                )
            worlds.append(
                World(r.version, chunked, chunked_why, tokens, tokens_why, seqs, seqs_why)
            )
    return worlds


def _v0_worlds(
    s: Settings, arch: ModelArchitecture | None, read: bool, release: str | None = None
) -> list[World]:
    """The V0 engine (read in the catalogue's v0_engine releases: _set_default_args_v0,
    SchedulerConfig)."""
    options: list[tuple[bool | None, str]]
    if s.chunked is not None:
        options = [(s.chunked, "--enable-chunked-prefill" if s.chunked else "chunked prefill off")]
    elif s.max_len is not None and s.max_len <= LONG_CONTEXT:
        options = [(False, f"the V0 engine's default for max_model_len up to {LONG_CONTEXT}")]
    elif s.max_len is not None and arch is not None:
        # off by default for MLA, sliding-window and multimodal models
        plain = arch.attention == "full" and not arch.architecture.endswith(
            "ForConditionalGeneration"
        )
        why = f"the V0 engine's default above {LONG_CONTEXT} tokens for {arch.id}"
        options = [(plain, why)]
    else:
        options = [(True, "V0 default"), (False, "V0 default")]
    worlds = []
    for chunked, why in options:
        tokens, tokens_why = s.tokens, "set"
        if tokens is None and read:
            if chunked:
                tokens = _CATALOGUE.v0_defaults.chunked_batch_tokens(release)
            else:  # raised to max_model_len: unknown without it
                tokens = max(DEFAULT_TOKENS, s.max_len) if s.max_len else None
            tokens_why = "the V0 engine's default (SchedulerConfig)"
        seqs, seqs_why = s.seqs, "set"
        if seqs is None and read:
            seqs, seqs_why = V0_DEFAULT_SEQS, "the V0 engine's default (_set_default_args_v0)"
        worlds.append(World("V0", chunked, why, tokens, tokens_why, seqs, seqs_why))
    return worlds


Judged = Literal["violates", "passes", "unknown"]


def _budget_vs_len(w: World, s: Settings) -> Judged:
    if w.chunked is True or s.tokens is None:
        return "passes"  # chunked, or vLLM raised its default to max_model_len
    if s.max_len is None or w.chunked is None:
        return "unknown" if s.max_len is None or s.tokens < s.max_len else "passes"
    return "violates" if s.tokens < s.max_len else "passes"


def _budget_vs_seqs(w: World) -> Judged:
    if w.tokens is None or w.seqs is None:
        return "unknown"
    return "violates" if w.tokens < w.seqs else "passes"


def _all(judged: list[Judged]) -> Judged:
    if judged and all(v == "violates" for v in judged):
        return "violates"
    if all(v == "passes" for v in judged):
        return "passes"
    return "unknown"


def _shown(values: list[int | None]) -> tuple[int, ...]:
    return tuple(sorted({v for v in values if v is not None}))


@dataclass(frozen=True, slots=True)
class _Running:
    """The worlds vLLM may run this engine in (None: the release was not read) and why not."""

    worlds: list[World] | None
    why_unknown: str
    values: dict[str, Value]
    """version, where (the release's source and how it was judged), v0."""


def _gpus(ctx: RuleContext, site: EngineSite) -> list[tuple[GpuModel, str]]:
    """The GPUs the engine gets (MIG: the slice, whose memory picks vLLM's batch tier);
    [] when none is known, and every tier is then judged."""
    found = site_gpus(ctx, site)
    return [] if isinstance(found, str) else [(r.gpu, r.where) for r in found]


def _running(
    ctx: RuleContext, site: EngineSite, s: Settings, candidate: str | None = None
) -> _Running:
    """Which release and engine (V0/V1) run *site*, and the worlds they allow; under
    *candidate*, one of the releases an image that names none may run, as if it named it."""
    release = site.release()
    version, where = release.version, release.where
    if candidate is not None:
        version, where = candidate, f"one of the releases image {release.image} may run"
    parsed = release_version(version)
    use_v1 = site.env.get("VLLM_USE_V1")
    worlds: list[World] | None
    if parsed is None:
        worlds, why_unknown = None, where
    elif (parsed >= _V1_DEFAULT and use_v1 != "0") or parsed >= _V0_REMOVED:
        releases = neighbours(parsed, READ)
        worlds = _v1_worlds(s, releases, _gpus(ctx, site), site.ray) if releases else None
        read = ", ".join(r.version for _, r in READ)
        why_unknown = f"the V1 engine of vLLM {version} was not read (read: {read})"
        if releases and len(releases) == 2:
            where += (
                f"; judged by {releases[0].version} and {releases[1].version}, the releases "
                "read around it"
            )
    elif parsed < _V1_DEFAULT and use_v1 == "1" and parsed >= _V1_OPT_IN:
        worlds, why_unknown = None, f"vLLM {version}'s experimental V1 engine was not read"
    else:
        arch = site_architecture(site)
        worlds = _v0_worlds(s, arch, V0_READ[0] <= parsed <= V0_READ[-1], version)
        why_unknown = ""
        if use_v1 == "0":
            where += ", VLLM_USE_V1=0"
    v0 = bool(worlds) and worlds is not None and worlds[0].release == "V0"
    return _Running(worlds, why_unknown, {"version": version, "where": where, "v0": v0})


def _seqs_verdict(site: EngineSite, s: Settings, run: _Running, worlds: list[World]) -> Verdict:
    """max_num_batched_tokens below max_num_seqs: vLLM refuses to start."""
    low = min(w.tokens for w in worlds if w.tokens) if worlds else s.tokens
    high = max(w.seqs for w in worlds if w.seqs) if worlds else s.seqs
    return Verdict(
        "violation",
        "tokens-below-seqs",
        values={
            "engine": site.label,
            **run.values,
            "tokens": s.tokens,
            "seqs": s.seqs,
            "default_tokens": _shown([w.tokens for w in worlds]),
            "default_seqs": _shown([w.seqs for w in worlds]),
            "tokens_why": worlds[0].tokens_why if worlds else None,
            "seqs_why": worlds[0].seqs_why if worlds else None,
            "budget": low,
        },
        thresholds={"min_tokens": high},
        path=site.path,
    )


def _judge_unread(site: EngineSite, s: Settings, run: _Running) -> Iterator[Verdict]:
    """The release was not read: only stated values can be judged."""
    if s.tokens is not None and s.seqs is not None and s.tokens < s.seqs:
        yield _seqs_verdict(site, s, run, [])
    elif (
        s.tokens is not None
        and s.seqs is not None
        and s.max_len is not None
        and not s.max_len_why  # stated, not derived
        and s.tokens >= s.max_len
    ):
        return  # the stated budget covers both, chunked or not, whatever the defaults
    elif s.tokens is not None or s.seqs is not None or s.chunked is False:
        yield Verdict(
            "not_evaluated",
            "defaults-unread",
            values={"engine": site.label, "why": run.why_unknown},
        )


def _judge_worlds(
    site: EngineSite, s: Settings, run: _Running, worlds: list[World]
) -> Iterator[Verdict]:
    """The budget against max_model_len (unchunked) and max_num_seqs in every world."""
    judged = _all([_budget_vs_len(w, s) for w in worlds])
    values: dict[str, Value] = {"engine": site.label, **run.values, "tokens": s.tokens}
    if judged == "violates":
        yield Verdict(
            "violation",
            "tokens-below-max-len",
            values={
                **values,
                "chunked_why": worlds[0].chunked_why,
                "max_len": s.max_len,
                "max_len_why": s.max_len_why,
            },
            thresholds={"min_tokens": s.max_len},
            path=site.path,
        )
    elif judged == "unknown":
        yield Verdict("not_evaluated", "chunking-unread", values=values)
    judged = _all([_budget_vs_seqs(w) for w in worlds])
    if judged == "violates":
        yield _seqs_verdict(site, s, run, worlds)
    elif judged == "unknown":
        yield Verdict(
            "not_evaluated",
            "seqs-open",
            values={
                **values,
                "defaults_read": not any(w.tokens is None or w.seqs is None for w in worlds),
                "default_tokens": _shown([w.tokens for w in worlds]),
                "default_seqs": _shown([w.seqs for w in worlds]),
            },
        )


def _settings(site: EngineSite) -> Settings | Verdict | None:
    """What the engine states (None: neither budget is set), or the value not a number."""
    raw = {k: site.int_flag(k) for k in ("max_num_batched_tokens", "max_num_seqs", "max_model_len")}
    bad = {k: v for k, v in raw.items() if isinstance(v, str)}
    if bad:
        key, value = next(iter(bad.items()))
        return Verdict(
            "not_evaluated",
            "not-a-number",
            values={"engine": site.label, "key": key, "value": str(value)},
        )
    tokens, seqs, max_len = (v if isinstance(v, int) else None for v in raw.values())
    chunked = site.bool_flag("enable_chunked_prefill")
    if tokens is None and seqs is None:
        return None  # vLLM's own defaults agree with each other in every release read
    arch = site_architecture(site)
    max_len_why = ""
    if max_len is None and arch is not None:
        max_len = arch.max_position_embeddings
        max_len_why = f" (unset: {arch.id}'s max_position_embeddings, which vLLM derives)"
    return Settings(tokens, seqs, chunked, max_len, max_len_why)


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The engine's batch token budget covers max_num_seqs, and max_model_len unchunked."""
    for site in engine_sites(ctx, obj):
        s = _settings(site)
        if isinstance(s, Verdict):
            yield s
        elif s is not None:
            run = _running(ctx, site, s)
            cands = candidate_releases(site) if run.values["version"] is None else None
            if cands is not None:
                yield from _every_release(ctx, site, s, cands)
            else:
                yield from _judge_run(site, s, run)


def _judge_run(site: EngineSite, s: Settings, run: _Running) -> Iterator[Verdict]:
    if run.worlds is None:
        yield from _judge_unread(site, s, run)
    else:
        yield from _judge_worlds(site, s, run, run.worlds)


def _every_release(
    ctx: RuleContext, site: EngineSite, s: Settings, cands: ReleaseCandidates
) -> Iterator[Verdict]:
    """An image that names no release but bounds it: judged under each release it may run
    (:func:`~gpustrata_policies.view.candidates.candidate_releases`), decided where all
    agree, otherwise "not evaluated" naming the releases on each side."""
    # Releases that read the same scheduler facts give the same worlds: judged once each.
    use_v1 = site.env.get("VLLM_USE_V1")
    classes: dict[Any, list[str]] = {}
    for release in cands.releases:
        classes.setdefault(_facts_read(release, use_v1), []).append(release)
    judged = [
        (tuple(rs), tuple(_judge_run(site, s, _running(ctx, site, s, rs[-1]))))
        for rs in classes.values()
    ]
    for verdict in every_release(
        cands,
        judged,
        lambda v: f"{site.label}, on every vLLM release {cands.span} its image may run",
        lambda rest, partial: Verdict(
            "not_evaluated",
            "defaults-unread",
            values={
                "engine": site.label,
                "why": f"{release_unknown(site, cands)}; {releases_split(cands, rest, partial)}",
            },
        ),
    ):
        if verdict.decision == "not_evaluated":
            yield verdict
        else:  # figures for the newest; "runs vLLM" without one release's name
            yield replace(verdict, values={**verdict.values, "version": "", "v0": False})


def _facts_read(release: str, use_v1: str | None) -> tuple[Any, ...]:
    """What :func:`_running` reads for *release*: the engine generation and the scheduler
    rows (V1: the read releases at or around it) or V0 defaults (read or not, the chunked
    budget) it judges by."""
    parsed = release_key(release)
    if (parsed >= _V1_DEFAULT and use_v1 != "0") or parsed >= _V0_REMOVED:
        rows = neighbours(parsed, READ)
        return ("v1", tuple(r.version for r in rows) if rows else None)
    if parsed < _V1_DEFAULT and use_v1 == "1" and parsed >= _V1_OPT_IN:
        return ("v1-opt-in",)
    read = V0_READ[0] <= parsed <= V0_READ[-1]
    return ("v0", read, _CATALOGUE.v0_defaults.chunked_batch_tokens(release))


def _joined(values: Value) -> str:
    return " or ".join(str(v) for v in cast(tuple[int, ...], values))


def _running_text(v: Mapping[str, Value]) -> str:
    engine_kind = "'s V0 engine" if v["v0"] else ""
    return f"vLLM {v['version']}{engine_kind} ({v['where']})" if v["version"] else "vLLM"


def _seqs_message(v: Mapping[str, Value], high: Value) -> str:
    if v["tokens"] is not None:
        tokens = f"max_num_batched_tokens {v['tokens']}"
    else:
        tokens = f"max_num_batched_tokens {_joined(v['default_tokens'])} (unset: {v['tokens_why']})"
    if v["seqs"] is not None:
        seqs = f"max_num_seqs {v['seqs']}"
    else:
        seqs = f"max_num_seqs {_joined(v['default_seqs'])} (unset: {v['seqs_why']})"
    return (
        f"{v['engine']} runs {_running_text(v)} with {tokens} below {seqs}: vLLM refuses to "
        f"start ('max_num_batched_tokens ({v['budget']}) must be greater than or equal to "
        f"max_num_seqs ({high}).'); raise max_num_batched_tokens to at least {high} or lower "
        "max_num_seqs"
    )


def message(verdict: Verdict) -> str:
    """The prose of a V005 verdict."""
    v, label = verdict.values, verdict.values["engine"]
    if verdict.reason == "not-a-number":
        return f"{label}: {v['key']} {quoted(v['value'])} is not a number"
    if verdict.reason == "tokens-below-seqs":
        return _seqs_message(v, verdict.thresholds["min_tokens"])
    if verdict.reason == "defaults-unread":
        return (
            f"{label}: the batch budget depends on vLLM's defaults and chunked prefill, "
            f"but {v['why']}"
        )
    if verdict.reason == "tokens-below-max-len":
        tokens, max_len = v["tokens"], v["max_len"]
        return (
            f"{label} runs {_running_text(v)} with chunked prefill off ({v['chunked_why']}) and "
            f"max_num_batched_tokens {tokens} below max_model_len {max_len}"
            f"{v['max_len_why']}: vLLM refuses to start ('max_num_batched_tokens ({tokens}) is "
            f"smaller than max_model_len ({max_len})'); set max_num_batched_tokens to at least "
            f"{max_len} or turn chunked prefill on"
        )
    if verdict.reason == "chunking-unread":
        return (
            f"{label} sets max_num_batched_tokens {v['tokens']}, but whether {_running_text(v)} "
            "chunks prefills or what max_model_len is could not be read"
        )
    if not v["defaults_read"]:
        why = f"the defaults of {_running_text(v)} were not read"
    else:
        why = (
            f"vLLM's defaults differ between the GPUs or releases considered "
            f"(max_num_batched_tokens {_joined(v['default_tokens'])}, max_num_seqs "
            f"{_joined(v['default_seqs'])})"
        )
    return f"{label}: whether max_num_batched_tokens covers max_num_seqs is open: {why}"


RULE = folder_rule(
    __name__,
    judged(judge, message),
    facts={
        "scheduler_releases": ", ".join(r.version for r in _CATALOGUE.scheduler),
        "scheduler_sources": tuple(source_url(s) for s in _CATALOGUE.scheduler_references),
    },
)
