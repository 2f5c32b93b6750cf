"""V009 startup-window-covers-load."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION
from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.capacity import (
    ModelRef,
    Probe,
    annotated_startup,
    engine_settings,
    engine_sites,
    not_evaluated_reason,
    probe,
    resolve_model,
    startup_conditions,
    weights_source,
)
from gpustrata_policies.view.engines import EngineSite
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import active_profile

if TYPE_CHECKING:
    from gpustrata.vllm.capacity import StartupEstimate


def _window(startup: Probe | None, liveness: Probe | None) -> dict[str, Value] | None:
    """Seconds the kubelet gives the engine before restarting it, with the probe's figures
    as written (``None``: no probe restarts it)."""
    chosen = startup or liveness
    if chosen is None:
        return None
    return {
        "window_s": chosen.initial_delay + chosen.failure_threshold * chosen.period,
        "probe": chosen.kind,
        "startup_probe": startup is not None,
        "initial_delay": chosen.initial_delay,
        "period": chosen.period,
        "written": tuple(
            chosen.text(k) for k in ("initialDelaySeconds", "failureThreshold", "periodSeconds")
        ),
    }


def _estimate(site: EngineSite, model: ModelRef, factor: float) -> StartupEstimate | str:
    """The planner's startup estimate for this engine's weights and settings."""
    from gpustrata.vllm.capacity import CapacityError, startup_estimate, weights_estimate

    settings = engine_settings(site, model.arch, v0=False)
    if isinstance(settings, str):
        return settings
    engine = settings.engine
    source, _ = weights_source(site, model)
    env = site.container.literal_env() if site.container is not None else {}
    conditions = startup_conditions(env, site.engine)
    profile = active_profile()
    load_gbps = profile.storage.load_gbps.get(source) if profile is not None else None  # type: ignore[call-overload]
    storage = profile.storage.kind.get(source) if profile is not None else None  # type: ignore[call-overload]
    try:
        weights = weights_estimate(
            model.arch,
            tensor_parallel_size=int(engine.tensor_parallel_size or 1),
            pipeline_parallel_size=int(engine.pipeline_parallel_size or 1),
            model_dtype=engine.dtype or "auto",
            quantization=engine.quantization,
        )
        return startup_estimate(
            model.arch,
            weights,
            weights_source=source,
            load_gbps=load_gbps,
            load_gbps_source=f"storage.load_gbps.{source} {load_gbps} set in the cluster profile",
            enforce_eager=engine.enforce_eager is True,
            safety_factor=factor,
            hf_transfer=conditions.hf_transfer,
            streamer_distributed=conditions.streamer_distributed,
            capture_sizes=conditions.capture_sizes,
            storage=storage,
        )
    except CapacityError as exc:
        return str(exc)


def _needed(
    site: EngineSite, model: ModelRef, factor: float, window: int
) -> dict[str, Value] | Verdict:
    """The startup the engine needs (the annotated estimate, or the planner's) with its
    working, or the not-evaluated verdict that says why it is not known."""
    annotated = annotated_startup(site)
    if annotated is not None:
        return {"needed_s": annotated * factor, "annotated_s": annotated}
    estimate = _estimate(site, model, float(factor))
    if isinstance(estimate, str):
        return Verdict(
            "not_evaluated", "estimate-failed", values={"why": not_evaluated_reason(site, estimate)}
        )
    # Published loads of this source spread widely; at the fastest of them the window
    # would suffice: a likely restart, not a certain one.
    optimistic = estimate.optimistic_s is not None and window >= estimate.optimistic_s
    _, where = weights_source(site, model)
    return {
        "needed_s": estimate.budget_s,
        "annotated_s": None,
        "explanation": f"{estimate.explanation} ({where})",
        "optimistic": estimate.optimistic_explanation if optimistic else None,
    }


def _judge_site(ctx: RuleContext, site: EngineSite, factor: float) -> Iterator[Verdict]:
    """One container engine's startup window against its estimated load."""
    container = site.container
    if container is None:
        return  # the Ray path has no kubelet probe on the engine: R005 covers it
    startup, liveness = probe(container, "startupProbe"), probe(container, "livenessProbe")
    for bad in (startup, liveness):
        if isinstance(bad, str):
            yield Verdict(
                "not_evaluated", "probe-unreadable", values={"why": f"{site.name}: {bad}"}
            )
    if isinstance(startup, str) or isinstance(liveness, str):
        return
    window = _window(startup, liveness)
    if window is None:
        return  # nothing restarts the container while it loads
    model = resolve_model(site)
    if isinstance(model, str):
        yield Verdict(
            "not_evaluated", "model-unresolved", values={"why": not_evaluated_reason(site, model)}
        )
        return
    needed = _needed(site, model, factor, cast(int, window["window_s"]))
    if isinstance(needed, Verdict):
        yield needed
        return
    if cast(int, window["window_s"]) >= cast(float, needed["needed_s"]):
        return
    yield Verdict(
        "advisory" if needed.get("optimistic") else "violation",
        "window-too-short",
        values={"engine": site.name, "model": model.name, **window, **needed},
        thresholds={"safety_factor": factor},
        path=(*container.path, str(window["probe"])),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The startup (or, without one, liveness) window exceeds the estimated engine startup."""
    factor = ctx.threshold("safety_factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
        why = f"safety_factor {quoted(factor)} is not a number >= 1"
        yield Verdict("not_evaluated", "safety-factor-invalid", values={"why": why})
        return
    for site in engine_sites(ctx, obj):
        yield from _judge_site(ctx, site, factor)


def _fix(v: Mapping[str, Value], needed: float) -> str:
    """How to widen the window to *needed* seconds."""
    period = cast(int, v["period"])
    if v["probe"] == "startupProbe":
        failures = math.ceil((needed - cast(int, v["initial_delay"])) / period)
        return (
            f"raise startupProbe.failureThreshold to {failures} (x periodSeconds "
            f"{period} = {failures * period} s)"
        )
    return (
        f"add a startupProbe on /health with periodSeconds 10 and failureThreshold "
        f"{math.ceil(needed / 10)}, keeping the livenessProbe for steady state"
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V009 message quotes beyond its values: which probe restarts the engine,
    how the needed startup was reached, the bandwidth hedge and the fix."""
    v = verdict.values
    if verdict.reason != "window-too-short":
        return {}
    needed = cast(float, v["needed_s"])
    if v["annotated_s"] is not None:
        factor = cast(float, verdict.thresholds["safety_factor"])
        chain = (
            f"the planner's estimate {v['annotated_s']} s (annotation "
            f"{STARTUP_ESTIMATE_ANNOTATION}) x{factor:g} = {needed:.0f} s"
        )
    else:
        chain = str(v["explanation"])
    return {
        "prefix": "" if v["startup_probe"] else "no startupProbe, so the ",
        "chain": chain,
        "hedge": (
            f" (at {v['optimistic']} the window would suffice: measure this cluster's load "
            "bandwidth)"
            if v.get("optimistic")
            else ""
        ),
        "fix": _fix(v, needed),
    }


RULE = folder_rule(__name__, worded(judge, fields))
