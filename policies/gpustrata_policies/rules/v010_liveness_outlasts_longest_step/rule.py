"""V010 liveness-outlasts-longest-step."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata.catalog.vllm_release_types import source_url
from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.capacity import (
    Probe,
    capacity_inputs,
    engine_sites,
    engine_version,
    not_evaluated_reason,
    probe,
)
from gpustrata_policies.view.engines import EngineSite
from gpustrata_policies.view.objects import K8sObject, as_map
from gpustrata_policies.view.profile import profile_hint

HEALTH = catalogs.vllm_releases().health
"""What the V0 /health waits on, per release (catalogue)."""
SERVE_UNHEALTHY_THRESHOLD = 3
"""Ray Serve restarts a replica after 3 failed health checks in a row
(REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD, ray 2.60 python/ray/serve/_private/constants.py)."""
SERVE_LLM_HEALTH_DEFAULTS = {"health_check_period_s": 10, "health_check_timeout_s": 10}
"""Ray Serve LLM's deployment defaults (ray 2.60 python/ray/llm/_internal/serve/constants.py)."""


def _floor_problems(
    ctx: RuleContext, timeout: float, failures: int, period: float, names: tuple[str, str, str]
) -> list[str]:
    """What falls below the floor (timeout, failures, failures x period)."""
    t_name, f_name, p_name = names
    min_timeout = ctx.threshold("min_timeout_seconds")
    min_failures = ctx.threshold("min_failure_threshold")
    min_tolerance = ctx.threshold("min_tolerance_seconds")
    out = []
    if timeout < min_timeout:
        out.append(f"{t_name} {timeout:g} < {min_timeout}")
    if f_name and failures < min_failures:
        out.append(f"{f_name} {failures} < {min_failures}")
    if failures * period < min_tolerance:
        times = f"{f_name} {failures}" if f_name else f"{failures} failures"
        out.append(f"{times} x {p_name} {period:g} = {failures * period:g} s < {min_tolerance} s")
    return out


def _floor_text(ctx: RuleContext, names: tuple[str, str, str]) -> str:
    t_name, f_name, p_name = names
    return (
        f"{t_name} >= {ctx.threshold('min_timeout_seconds')}, {f_name} >= "
        f"{ctx.threshold('min_failure_threshold')} and {f_name} x {p_name} >= "
        f"{ctx.threshold('min_tolerance_seconds')} s"
    )


def _floor(
    ctx: RuleContext, site: EngineSite, live: Probe, where: str, v0: str | None
) -> str | None:
    """The floor every /health probe of a container engine needs (V1, and V0 from the
    release whose front end reads only an error flag)."""
    names = ("timeoutSeconds", "failureThreshold", "periodSeconds")
    problems = _floor_problems(ctx, live.timeout, live.failure_threshold, live.period, names)
    if not problems:
        return None
    if v0 is None and where.startswith("vLLM "):
        engine = (
            "on the V1 engine, whose /health only reads an error flag in the API-server "
            "process (AsyncLLM.check_health)"
        )
    elif v0 is None:  # no release known: the floor holds for every one from 0.6.4
        where, engine = (
            f"a vLLM release its image does not name ({where})",
            f"; from vLLM {HEALTH.v0_engine_loop_until} on, V0 and V1 alike, /health only "
            "reads an error flag in the API-server process",
        )
    else:
        engine = (
            f"on the V0 engine ({v0}), whose multiprocessing front end's /health only reads "
            f"an error flag (MQLLMEngineClient.check_health, {_source(HEALTH.sources[0])})"
        )
    return (
        f"{site.name} runs {where}{'' if engine.startswith(';') else ' '}{engine}, so a long "
        "prefill never blocks it; "
        "but that process also tokenizes, detokenizes and streams every request and answers "
        f"late under load, and its livenessProbe ({live.text('timeoutSeconds')}, "
        f"{live.text('failureThreshold')}, {live.text('periodSeconds')}) restarts a busy, "
        f"healthy Pod: {'; '.join(problems)}. Fix: {_floor_text(ctx, names)}"
    )


def _source(source: str) -> str:
    return source_url(source)


def _loop_bound(version: str | None) -> bool:
    """Does this release's V0 /health depend on the engine loop (before the release the
    catalogue names, vllm#9818)?"""
    if version is None:
        return False
    try:
        return parse_version(version) < parse_version(HEALTH.v0_engine_loop_until)
    except ValueError:
        return False


def _v0_loop_bound(
    ctx: RuleContext, obj: K8sObject, site: EngineSite, where: str, why: str
) -> Iterator[Outcome]:
    """Before the release that fixed it, the V0 multiprocessing front end marked the engine
    dead (and /health failed for good) once one engine step outlasted its heartbeat
    threshold, whatever the probe: the longest step must stay under it."""
    found = capacity_inputs(ctx, site)
    if isinstance(found, str):
        yield ctx.not_evaluated(obj, not_evaluated_reason(site, found))
        return
    limit = HEALTH.v0_dead_after_s.value
    for inp in found:
        step = inp.estimate.longest_step
        if step.seconds < limit:
            continue
        defaults = inp.default_notes("enable_chunked_prefill", "max_num_batched_tokens")
        yield ctx.violation(
            obj,
            f"{site.name} runs {where} on the V0 engine ({why}), whose multiprocessing front "
            f"end marks the engine dead when its loop has not come round for {limit:g} s "
            f"(last_alive_threshold = 3 x VLLM_RPC_TIMEOUT, "
            f"{_source(HEALTH.v0_dead_after_s.source)}); /health then fails until the "
            f"livenessProbe restarts the container. The longest engine step of "
            f"{inp.model.name} on {inp.gpu.label} is estimated at {step.seconds:.1f} s: "
            f"{step.explanation}{defaults}; one long prompt gets the Pod killed. Fix: enable "
            "chunked prefill with a smaller max_num_batched_tokens, or use a vLLM release "
            f"from {HEALTH.v0_engine_loop_until} (vllm#9818)",
            (*site.container.path, "livenessProbe") if site.container else site.path,
        )


def _seconds(config: Mapping[str, Any], key: str) -> float | str | None:
    value = config.get(key)
    if value is UNKNOWN:
        raise UnknownInput(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return f"{key} {quoted(value)} is not a number"
    try:
        return float(str(value))
    except ValueError:
        return f"{key} {quoted(value)} is not a number"


def _ray(ctx: RuleContext, obj: K8sObject, site: EngineSite) -> Iterator[Outcome]:
    """Ray Serve health checks of a Ray Serve LLM replica, against the same floor."""
    config = as_map(site.llm_config.get("deployment_config"), "deployment_config")
    values: dict[str, float] = {}
    written: dict[str, str] = {}
    for key, default in SERVE_LLM_HEALTH_DEFAULTS.items():
        value = _seconds(config, key)
        if isinstance(value, str):
            yield ctx.not_evaluated(obj, f"{site.name}: {value}")
            return
        values[key] = value if value is not None else float(default)
        written[key] = "" if value is not None else " (Ray Serve LLM default)"
    names = ("health_check_timeout_s", "", "health_check_period_s")
    problems = _floor_problems(
        ctx,
        values["health_check_timeout_s"],
        SERVE_UNHEALTHY_THRESHOLD,
        values["health_check_period_s"],
        names,
    )
    if problems:
        yield ctx.violation(
            obj,
            f"{site.name}: Ray Serve restarts the replica (and reloads the model) after "
            f"{SERVE_UNHEALTHY_THRESHOLD} failed health checks in a row "
            f"(health_check_timeout_s {values['health_check_timeout_s']:g}"
            f"{written['health_check_timeout_s']}, health_check_period_s "
            f"{values['health_check_period_s']:g}{written['health_check_period_s']}); the "
            "check awaits vLLM's AsyncLLM.check_health in the replica's event loop, which "
            f"answers late under load: {'; '.join(problems)}. Fix: "
            f"health_check_timeout_s >= {ctx.threshold('min_timeout_seconds')} and "
            f"{SERVE_UNHEALTHY_THRESHOLD} x health_check_period_s >= "
            f"{ctx.threshold('min_tolerance_seconds')} s in the deployment_config",
            site.path,
            advisory=True,
        )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """A liveness check that a long prefill (V0) or a busy API server (V1) cannot fail."""
    for site in engine_sites(ctx, obj):
        if site.container is None:
            yield from _ray(ctx, obj, site)
            continue
        live = probe(site.container, "livenessProbe")
        if isinstance(live, str):
            yield ctx.not_evaluated(obj, f"{site.name}: {live}")
            continue
        if live is None or "tcpSocket" in live.raw:
            continue  # no liveness probe, or one the kernel answers (the listen backlog)
        version = engine_version(site)
        text = _floor(ctx, site, live, version.where, version.why if version.v0 else None)
        if text is not None:
            # A floor, not a certain failure: advisory (RULES.md), on every release.
            yield ctx.violation(obj, text, (*site.container.path, "livenessProbe"), advisory=True)
        in_process = site.bool_flag("disable_frontend_multiprocessing")
        if version.version is None and not in_process:
            yield from _unknown_release(ctx, obj, site, version.where)
        elif version.v0 and _loop_bound(version.version) and not in_process:
            yield from _v0_loop_bound(ctx, obj, site, version.where, version.why)


def _unknown_release(
    ctx: RuleContext, obj: K8sObject, site: EngineSite, where: str
) -> Iterator[Outcome]:
    """No release is assumed: where the longest step would mark a V0 engine of a release
    before the fix dead, whether this engine is one is not known ("not evaluated")."""
    found = capacity_inputs(ctx, site)
    limit = HEALTH.v0_dead_after_s.value
    if isinstance(found, str):
        step_text = f"its longest step is not estimated ({found})"
    else:
        long = [inp for inp in found if inp.estimate.longest_step.seconds >= limit]
        if not long:
            return  # shorter than the limit on every GPU: no release can fail here
        step = max(inp.estimate.longest_step.seconds for inp in long)
        step_text = f"its longest step is estimated at {step:.1f} s"
    yield ctx.not_evaluated(
        obj,
        f"{site.name}: {where}, so whether /health waits on the engine loop is not known: "
        f"vLLM before {HEALTH.v0_engine_loop_until} (V0) marks the engine dead after "
        f"{limit:g} s without a loop turn, and {step_text}. Pin the image to a vLLM "
        f"release {profile_hint('images')}",
    )


RULE = folder_rule(
    __name__,
    check,
    facts={
        "v0_engine_loop_until": HEALTH.v0_engine_loop_until,
        "v0_dead_after_s": f"{HEALTH.v0_dead_after_s.value:g}",
        "health_sources": tuple(source_url(s) for s in HEALTH.sources),
    },
)
