"""V010 liveness-outlasts-longest-step."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata.catalog.vllm_release_types import Fact, source_url
from gpustrata.catalog.vllm_releases import v0_dead_after, v0_in_process_dead_after
from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import on_every_candidate, release_unknown, releases_split
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.candidates import (
    GpuCandidates,
    ReleaseCandidates,
    candidate_engines,
    candidate_inputs,
    candidate_releases,
    release_inputs,
    unsized_reason,
)
from gpustrata_policies.view.capacity import (
    Inputs,
    Probe,
    capacity_inputs,
    engine_sites,
    engine_version,
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


FLOOR_KEYS = ("min_timeout_seconds", "min_failure_threshold", "min_tolerance_seconds")
"""The thresholds of the floor every /health check needs."""
PROBE_NAMES = ("timeoutSeconds", "failureThreshold", "periodSeconds")
SERVE_NAMES = ("health_check_timeout_s", "", "health_check_period_s")


def _floor_problems(
    floor: Mapping[str, Value], timeout: float, failures: int, period: float
) -> tuple[str, ...]:
    """What falls below the floor: ``timeout``, ``failures``, ``tolerance`` (failures x
    period)."""
    min_timeout, min_failures, min_tolerance = (cast(float, floor[k]) for k in FLOOR_KEYS)
    out = []
    if timeout < min_timeout:
        out.append("timeout")
    if failures < min_failures:
        out.append("failures")
    if failures * period < min_tolerance:
        out.append("tolerance")
    return tuple(out)


def _problems_text(v: Mapping[str, Value], t: Mapping[str, Value], names: tuple[str, ...]) -> str:
    """The floor's broken parts, in words (``names``: the timeout, failures, period keys)."""
    t_name, f_name, p_name = names
    timeout, period = cast(float, v["timeout"]), cast(float, v["period"])
    failures = cast(int, v["failures"])
    out = []
    for problem in cast(tuple[str, ...], v["problems"]):
        if problem == "timeout":
            out.append(f"{t_name} {timeout:g} < {t['min_timeout_seconds']}")
        elif problem == "failures":
            out.append(f"{f_name} {failures} < {t['min_failure_threshold']}")
        else:
            times = f"{f_name} {failures}" if f_name else f"{failures} failures"
            out.append(
                f"{times} x {p_name} {period:g} = {failures * period:g} s < "
                f"{t['min_tolerance_seconds']} s"
            )
    return "; ".join(out)


def _floor(
    ctx: RuleContext, site: EngineSite, live: Probe, where: str, v0: str | None
) -> Verdict | None:
    """The floor every /health probe of a container engine needs (V1, and V0 from the
    release whose front end reads only an error flag)."""
    floor = {k: ctx.threshold(k) for k in FLOOR_KEYS}
    problems = _floor_problems(floor, live.timeout, live.failure_threshold, live.period)
    if not problems:
        return None
    # A floor, not a certain failure: advisory (RULES.md), on every release.
    return Verdict(
        "advisory",
        "probe-below-floor",
        values={
            "engine": site.name,
            "where": where,
            "v0": v0,
            "timeout": live.timeout,
            "failures": live.failure_threshold,
            "period": live.period,
            "written": tuple(live.text(k) for k in PROBE_NAMES),
            "problems": problems,
        },
        thresholds=floor,
        sources=(_source(HEALTH.sources[0]),) if v0 is not None else (),
        path=(*site.container.path, "livenessProbe") if site.container else site.path,
    )


def _engine_text(v: Mapping[str, Value], sources: tuple[str, ...]) -> tuple[Value, str]:
    """(where the release was read, why /health never waits on a prefill) as worded."""
    where = v["where"]
    if v["v0"] is None and str(where).startswith("vLLM "):
        return where, (
            "on the V1 engine, whose /health only reads an error flag in the API-server "
            "process (AsyncLLM.check_health)"
        )
    if v["v0"] is None:  # no release known: the floor holds for every one from 0.6.4
        return f"a vLLM release its image does not name ({where})", (
            f"; from vLLM {HEALTH.v0_engine_loop_until} on, V0 and V1 alike, /health only "
            "reads an error flag in the API-server process"
        )
    return where, (
        f"on the V0 engine ({v['v0']}), whose multiprocessing front end's /health only reads "
        f"an error flag (MQLLMEngineClient.check_health, {sources[0]})"
    )


def _floor_message(verdict: Verdict) -> str:
    """The prose of a container liveness probe below the floor."""
    v, t = verdict.values, verdict.thresholds
    where, engine = _engine_text(v, verdict.sources)
    timeout, failures, period = cast(tuple[str, str, str], v["written"])
    t_name, f_name, p_name = PROBE_NAMES
    floor = (
        f"{t_name} >= {t['min_timeout_seconds']}, {f_name} >= "
        f"{t['min_failure_threshold']} and {f_name} x {p_name} >= "
        f"{t['min_tolerance_seconds']} s"
    )
    return (
        f"{v['engine']} runs {where}{'' if engine.startswith(';') else ' '}{engine}, so a long "
        "prefill never blocks it; "
        "but that process also tokenizes, detokenizes and streams every request and answers "
        f"late under load, and its livenessProbe ({timeout}, {failures}, {period}) restarts a "
        f"busy, healthy Pod: {_problems_text(v, t, PROBE_NAMES)}. Fix: {floor}"
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


def _death(version: str, in_process: bool) -> tuple[Fact, str] | str:
    """(seconds one step may last before /health fails for good, mechanism) of V0 release
    *version*, or the catalogue key that lacks it. In process
    (``--disable-frontend-multiprocessing``) the AsyncLLMEngine's step timeout applies in
    every release read, in place of the heartbeat and also after the 0.6.4 fix; otherwise
    only releases before that fix are loop-bound."""
    death = v0_dead_after(version) if _loop_bound(version) else None
    if in_process and (death is None or death[1] == "heartbeat"):
        fact = v0_in_process_dead_after(version)
        return (fact, "iteration-timeout") if fact is not None else "v0_in_process_dead_after_s"
    return death if death is not None else "v0_dead_after"


def _v0_loop_bound(
    ctx: RuleContext,
    site: EngineSite,
    version: str,
    in_process: bool,
    why_text: tuple[str, str],
) -> Iterator[Verdict]:
    """A V0 engine is marked dead (and /health fails for good) once one engine step outlasts
    a limit, whatever the probe: the AsyncLLMEngine's iteration timeout through 0.6.1 and
    wherever it runs in the API server, the MQLLMEngine heartbeat in 0.6.2-0.6.3 (catalogue,
    per release read). The longest step must stay under it."""
    where, why = why_text
    death = _death(version, in_process)
    if isinstance(death, str):
        yield Verdict(
            "not_evaluated",
            "health-unread",
            {
                "why": f"{site.name}: what /health in vLLM {version} waits on is not read in "
                f"the catalogue (health.{death}), nor agreed by the read releases around it"
            },
        )
        return
    fact, mechanism = death
    limit = fact.value

    def judge_engine(inp: Inputs) -> Iterator[Verdict]:
        step = inp.estimate.longest_step
        if step.seconds < limit:
            return
        yield Verdict(
            "violation",
            "step-outlasts-v0-heartbeat",
            values={
                "engine": site.name,
                "where": where,
                "why": why,
                "model": inp.model.name,
                "gpu": inp.gpu.label,
                "step_s": step.seconds,
                "step_explanation": step.explanation,
                "defaults": inp.default_notes("enable_chunked_prefill", "max_num_batched_tokens"),
                "mechanism": mechanism,
                "in_process": in_process,
            },
            thresholds={"dead_after_s": limit},
            sources=(_source(fact.source),),
            path=(*site.container.path, "livenessProbe") if site.container else site.path,
        )

    found = capacity_inputs(ctx, site)
    if isinstance(found, str):
        # The release is known; the GPU is not: the longest step on every GPU the engine may
        # run on, reported where they agree (as V003/V004 do), else which GPUs decide it. A
        # GPU it does not start on (V003/V004) has no step: there the question does not arise.
        on_each = candidate_inputs(ctx, site)
        if on_each is not None:
            yield from on_every_candidate(
                site, on_each, lambda inp: judge_engine(inp) if inp.estimate.fits else ()
            )
            return
        yield Verdict("not_evaluated", "capacity-unread", {"why": unsized_reason(ctx, site, found)})
        return
    for inp in found:
        yield from judge_engine(inp)


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


def _ray(ctx: RuleContext, site: EngineSite) -> Iterator[Verdict]:
    """Ray Serve health checks of a Ray Serve LLM replica, against the same floor."""
    config = as_map(site.llm_config.get("deployment_config"), "deployment_config")
    values: dict[str, float] = {}
    defaulted: list[str] = []
    for key, default in SERVE_LLM_HEALTH_DEFAULTS.items():
        value = _seconds(config, key)
        if isinstance(value, str):
            yield Verdict("not_evaluated", "value-unreadable", {"why": f"{site.name}: {value}"})
            return
        values[key] = value if value is not None else float(default)
        if value is None:
            defaulted.append(key)
    floor = {k: ctx.threshold(k) for k in FLOOR_KEYS}
    timeout, period = values["health_check_timeout_s"], values["health_check_period_s"]
    problems = _floor_problems(floor, timeout, SERVE_UNHEALTHY_THRESHOLD, period)
    if "failures" in problems:
        problems = tuple(p for p in problems if p != "failures")  # Ray Serve's, not the user's
    if problems:
        yield Verdict(
            "advisory",
            "serve-check-below-floor",
            values={
                "engine": site.name,
                "timeout": timeout,
                "failures": SERVE_UNHEALTHY_THRESHOLD,
                "period": period,
                "defaulted": tuple(defaulted),
                "problems": problems,
            },
            thresholds=floor,
            path=site.path,
        )


def _serve_message(verdict: Verdict) -> str:
    """The prose of Ray Serve health checks below the floor."""
    v, t = verdict.values, verdict.thresholds
    defaulted = cast(tuple[str, ...], v["defaulted"])

    def shown(key: str, value: Value) -> str:
        default = " (Ray Serve LLM default)" if key in defaulted else ""
        return f"{key} {cast(float, value):g}{default}"

    return (
        f"{v['engine']}: Ray Serve restarts the replica (and reloads the model) after "
        f"{SERVE_UNHEALTHY_THRESHOLD} failed health checks in a row "
        f"({shown('health_check_timeout_s', v['timeout'])}, "
        f"{shown('health_check_period_s', v['period'])}); the "
        "check awaits vLLM's AsyncLLM.check_health in the replica's event loop, which "
        f"answers late under load: {_problems_text(v, t, SERVE_NAMES)}. Fix: "
        f"health_check_timeout_s >= {t['min_timeout_seconds']} and "
        f"{SERVE_UNHEALTHY_THRESHOLD} x health_check_period_s >= "
        f"{t['min_tolerance_seconds']} s in the deployment_config"
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """A liveness check that a long prefill (V0) or a busy API server (V1) cannot fail."""
    for site in engine_sites(ctx, obj):
        if site.container is None:
            yield from _ray(ctx, site)
            continue
        live = probe(site.container, "livenessProbe")
        if isinstance(live, str):
            yield Verdict("not_evaluated", "value-unreadable", {"why": f"{site.name}: {live}"})
            continue
        if live is None or "tcpSocket" in live.raw:
            continue  # no liveness probe, or one the kernel answers (the listen backlog)
        version = engine_version(site)
        floor = _floor(ctx, site, live, version.where, version.why if version.v0 else None)
        if floor is not None:
            yield floor
        in_process = bool(site.bool_flag("disable_frontend_multiprocessing"))
        if version.version is None:
            yield from _unknown_release(ctx, site, version.where, in_process)
        elif version.v0 and (in_process or _loop_bound(version.version)):
            yield from _v0_loop_bound(
                ctx, site, version.version, in_process, (version.where, version.why)
            )


def _unknown_release(
    ctx: RuleContext, site: EngineSite, where: str, in_process: bool
) -> Iterator[Verdict]:
    """No release is assumed: where the longest step would mark a V0 engine of a release
    before the fix (or any V0 engine run in process) dead, whether this engine is one is not
    known ("not evaluated")."""
    cands = candidate_releases(site)
    engines = candidate_engines(site, cands) if cands is not None else ()
    bound = [
        r
        for r, v0 in zip(cands.releases if cands is not None else (), engines, strict=True)
        if v0 and (in_process or _loop_bound(r))
    ]
    if cands is not None and not bound:
        return  # no release it may run has a /health that waits on the engine loop
    found: list[Inputs] | str = capacity_inputs(ctx, site)
    gpus = None
    if cands is not None and isinstance(found, str):
        # The GPU unknown as well: judged on every candidate GPU (silent only where no
        # release it may run marks the engine dead on any of them).
        on_each = candidate_inputs(ctx, site)
        if on_each is not None and not any(isinstance(i, str) for i in on_each.inputs):
            found = [i for i in on_each.inputs if not isinstance(i, str)]
            gpus = on_each.candidates
    if cands is not None and not isinstance(found, str):
        yield from _every_release(ctx, site, cands, set(bound), in_process, found, gpus)
        return
    limit = HEALTH.v0_dead_after_s.value
    if in_process and HEALTH.in_process_dead_after:
        limit = min(fact.value for _, fact in HEALTH.in_process_dead_after)
    values: dict[str, Value] = {
        "engine": site.name,
        "where": where,
        "in_process": in_process,
        "hint": cands.hint if cands is not None else profile_hint("images"),
    }
    if isinstance(found, str):
        values["step_unread"] = found
    else:
        long = [inp for inp in found if inp.estimate.longest_step.seconds >= limit]
        if not long:
            return  # shorter than the limit on every GPU: no release can fail here
        values["step_s"] = max(inp.estimate.longest_step.seconds for inp in long)
    yield Verdict("not_evaluated", "release-unknown", values, thresholds={"dead_after_s": limit})


def _every_release(
    ctx: RuleContext,
    site: EngineSite,
    cands: ReleaseCandidates,
    bound: set[str],
    in_process: bool,
    found: list[Inputs],
    gpus: GpuCandidates | None = None,
) -> Iterator[Verdict]:
    """An image that names no release but bounds it, on known GPUs: the longest step of
    each release it may run (its own defaults: the V0 engine's unchunked prompts) against
    the limit of each whose /health waits on the engine loop (*bound*); silent where none
    fails, otherwise "not evaluated" naming the releases on each side. *gpus*: *found* is
    the engine on each GPU it may run on (its GPU unknown too); a release fails where it
    fails on any of them."""
    outcome: dict[str, tuple[Verdict, ...] | str] = {r: () for r in cands.releases}
    steps: list[float] = []
    for inp in found:
        classes = release_inputs(ctx, inp)
        for releases, sized in classes.classes if classes is not None else ():
            for release in (r for r in releases if r in bound):
                death = _death(release, in_process)
                if isinstance(sized, str) or isinstance(death, str):
                    outcome[release] = sized if isinstance(sized, str) else f"health.{death}"
                elif sized.estimate.longest_step.seconds >= death[0].value:
                    outcome[release] = (Verdict("violation", "step-outlasts-v0-heartbeat"),)
                    steps.append(sized.estimate.longest_step.seconds)
    judged = [((r,), o) for r, o in outcome.items()]
    if all(o == () for _, o in judged):
        return  # no release it may run marks it dead
    if in_process and HEALTH.in_process_dead_after:
        limit = min(fact.value for _, fact in HEALTH.in_process_dead_after)
        dead = (
            "a V0 engine run in the API server (--disable-frontend-multiprocessing) marks "
            f"itself dead after one step of {limit:g} s or more (by release)"
        )
    else:
        dead = (
            f"before vLLM {HEALTH.v0_engine_loop_until} the V0 engine is marked dead after one "
            f"step of {HEALTH.v0_dead_after_s.value:g} s or more (by release)"
        )
    step = f"; its longest step under them is estimated at {max(steps):.1f} s" if steps else ""
    if gpus is not None:
        most = f": its longest step there is estimated at up to {max(steps):.1f} s" if steps else ""
        step = (
            f"; its GPU is unknown too ({gpus.unnamed}), so each release is judged on "
            f"{gpus.basis} ({len(gpus.gpus)} models) and fails where it fails on any{most}"
        )
    why = (
        f"{site.name}: {release_unknown(site, cands)}; {dead}{step}; "
        f"{releases_split(cands, judged)}"
    )
    yield Verdict("not_evaluated", "releases-split", {"why": why})


def _step_message(verdict: Verdict) -> str:
    """The prose of a V0 engine step that outlasts the front end's heartbeat."""
    v, limit = verdict.values, cast(float, verdict.thresholds["dead_after_s"])
    if v.get("mechanism") == "iteration-timeout":
        dead = (
            f"whose AsyncLLMEngine aborts an engine step after {limit:g} s and stays errored "
            f"(VLLM_ENGINE_ITERATION_TIMEOUT_S, {verdict.sources[0]})"
        )
    else:
        dead = (
            "whose multiprocessing front end (MQLLMEngineClient) marks the engine dead when "
            f"its loop has not come round for {limit:g} s (last_alive_threshold = 3 x "
            f"VLLM_RPC_TIMEOUT, {verdict.sources[0]})"
        )
    if v.get("in_process"):
        dead = f"run in the API server (--disable-frontend-multiprocessing), {dead}"
        other = (
            "or drop --disable-frontend-multiprocessing (from "
            f"{HEALTH.v0_engine_loop_until} the multiprocess front end's /health no longer "
            "waits on the engine loop, vllm#9818)"
        )
    else:
        other = f"or use a vLLM release from {HEALTH.v0_engine_loop_until} (vllm#9818)"
    return (
        f"{v['engine']} runs {v['where']} on the V0 engine ({v['why']}), {dead}; /health then "
        "fails until the livenessProbe restarts the container. The longest engine step of "
        f"{v['model']} on {v['gpu']} is estimated at {cast(float, v['step_s']):.1f} s: "
        f"{v['step_explanation']}{v['defaults']}; one long prompt gets the Pod killed. Fix: "
        f"enable chunked prefill with a smaller max_num_batched_tokens, {other}"
    )


def _release_message(verdict: Verdict) -> str:
    """The prose of an engine whose release (so whether V0 applies) is unknown."""
    v, limit = verdict.values, cast(float, verdict.thresholds["dead_after_s"])
    if "step_unread" in v:
        step_text = f"its longest step is not estimated ({v['step_unread']})"
    else:
        step_text = f"its longest step is estimated at {cast(float, v['step_s']):.1f} s"
    if v.get("in_process"):
        dead = (
            "a V0 engine run in the API server (--disable-frontend-multiprocessing, any "
            f"release with V0) marks itself dead after a step of {limit:g} s"
        )
    else:
        dead = (
            f"vLLM before {HEALTH.v0_engine_loop_until} (V0) marks the engine dead after a "
            f"step of {limit:g} s or more (by release)"
        )
    return (
        f"{v['engine']}: {v['where']}, so whether /health waits on the engine loop is not "
        f"known: {dead}, and {step_text}. Pin the image to a vLLM release "
        f"{v.get('hint') or profile_hint('images')}"
    )


_MESSAGES = {
    "probe-below-floor": _floor_message,
    "serve-check-below-floor": _serve_message,
    "step-outlasts-v0-heartbeat": _step_message,
    "release-unknown": _release_message,
}
"""The prose of V010's verdicts, by reason (the unread ones carry their own)."""


def message(verdict: Verdict) -> str:
    """The prose of a V010 verdict."""
    if verdict.reason in _MESSAGES:
        return _MESSAGES[verdict.reason](verdict)
    return str(verdict.values["why"])


RULE = folder_rule(
    __name__,
    judged(judge, message),
    facts={
        "v0_engine_loop_until": HEALTH.v0_engine_loop_until,
        "v0_dead_after_s": f"{HEALTH.v0_dead_after_s.value:g}",
        "health_sources": tuple(source_url(s) for s in HEALTH.sources),
    },
)
