"""V009 startup-window-covers-load."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION
from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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


def _window(startup: Probe | None, liveness: Probe | None) -> tuple[int, str, Probe] | None:
    """Seconds the kubelet gives the engine before restarting it, and the working."""
    chosen = startup or liveness
    if chosen is None:
        return None
    seconds = chosen.initial_delay + chosen.failure_threshold * chosen.period
    prefix = "" if startup is not None else "no startupProbe, so the "
    return (
        seconds,
        f"{prefix}{chosen.kind} {chosen.text('initialDelaySeconds')} + "
        f"{chosen.text('failureThreshold')} x {chosen.text('periodSeconds')} = {seconds} s",
        chosen,
    )


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


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The startup (or, without one, liveness) window exceeds the estimated engine startup."""
    factor = ctx.threshold("safety_factor")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
        yield ctx.not_evaluated(obj, f"safety_factor {quoted(factor)} is not a number >= 1")
        return
    for site in engine_sites(ctx, obj):
        container = site.container
        if container is None:
            continue  # the Ray path has no kubelet probe on the engine: R005 covers it
        startup, liveness = probe(container, "startupProbe"), probe(container, "livenessProbe")
        for bad in (startup, liveness):
            if isinstance(bad, str):
                yield ctx.not_evaluated(obj, f"{site.name}: {bad}")
        if isinstance(startup, str) or isinstance(liveness, str):
            continue
        window = _window(startup, liveness)
        if window is None:
            continue  # nothing restarts the container while it loads
        seconds, working, chosen = window
        model = resolve_model(site)
        if isinstance(model, str):
            yield ctx.not_evaluated(obj, not_evaluated_reason(site, model))
            continue
        annotated = annotated_startup(site)
        maybe, hedge = False, ""
        if annotated is not None:
            needed = annotated * factor
            chain = (
                f"the planner's estimate {annotated} s (annotation {STARTUP_ESTIMATE_ANNOTATION}) "
                f"x{factor:g} = {needed:.0f} s"
            )
        else:
            estimate = _estimate(site, model, float(factor))
            if isinstance(estimate, str):
                yield ctx.not_evaluated(obj, not_evaluated_reason(site, estimate))
                continue
            needed = estimate.budget_s
            if estimate.optimistic_s is not None and seconds >= estimate.optimistic_s:
                # Published loads of this source spread widely; at the fastest of them the
                # window would suffice: a likely restart, not a certain one.
                maybe = True
                hedge = (
                    f" (at {estimate.optimistic_explanation} the window would suffice: "
                    "measure this cluster's load bandwidth)"
                )
            _, where = weights_source(site, model)
            chain = f"{estimate.explanation} ({where})"
        if seconds >= needed:
            continue
        failures = math.ceil((needed - chosen.initial_delay) / chosen.period)
        if chosen.kind == "startupProbe":
            fix = (
                f"raise startupProbe.failureThreshold to {failures} (x periodSeconds "
                f"{chosen.period} = {failures * chosen.period} s)"
            )
        else:
            fix = (
                f"add a startupProbe on /health with periodSeconds 10 and failureThreshold "
                f"{math.ceil(needed / 10)}, keeping the livenessProbe for steady state"
            )
        yield ctx.violation(
            obj,
            f"{site.name} gets {seconds} s to start ({working}) but {model.name} needs an "
            f"estimated {needed:.0f} s: {chain}; the kubelet restarts the container before the "
            f"model has loaded, again on every attempt{hedge}. Fix: {fix}",
            (*container.path, chosen.kind),
            advisory=maybe,
        )


RULE = folder_rule(__name__, check)
