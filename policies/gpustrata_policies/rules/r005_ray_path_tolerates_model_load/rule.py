"""R005 ray-path-tolerates-model-load."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION as ESTIMATE_ANNOTATION
from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.kuberay import operator_release, ray_groups
from gpustrata_policies.view.objects import K8sObject, as_map, dig
from gpustrata_policies.view.vllm_args import serve_config

if TYPE_CHECKING:
    from gpustrata.catalog.compat import KubeRayRelease

ENGINE_START_TIMEOUT_ENV = "RAYLLM_ENGINE_START_TIMEOUT_S"
ENGINE_START_TIMEOUT_DEFAULT_S = 3600  # ray 2.60 python/ray/llm/_internal/serve/constants.py
THRESHOLDS = {
    # KubeRay v0.6.0 rayservice_controller.go defaults: an application not RUNNING (still
    # DEPLOYING while its engine loads) for longer makes KubeRay replace the cluster. v1.0.0
    # raised them to 900 / 300 s and counted only UNHEALTHY/DEPLOY_FAILED; v1.1 dropped them.
    "serviceUnhealthySecondThreshold": 60,
    "deploymentUnhealthySecondThreshold": 60,
}
KUBERAY_1685 = "https://github.com/ray-project/kuberay/issues/1685"


def _seconds(value: Any, what: str) -> int | None:
    if value is UNKNOWN:
        raise UnknownInput(what)
    if isinstance(value, bool):
        return None
    try:
        return math.ceil(float(str(value)))
    except ValueError:
        return None


def _timeout(obj: K8sObject, app: Mapping[str, Any], llm: Mapping[str, Any]) -> tuple[int, str]:
    """RAYLLM_ENGINE_START_TIMEOUT_S for one engine, and where it is set."""
    for where, env in (
        ("llm_config runtime_env", dig(llm, "runtime_env", "env_vars")),
        ("application runtime_env", dig(app, "runtime_env", "env_vars")),
    ):
        if isinstance(env, Mapping) and ENGINE_START_TIMEOUT_ENV in env:
            value = _seconds(env[ENGINE_START_TIMEOUT_ENV], ENGINE_START_TIMEOUT_ENV)
            if value is not None:
                return value, f"{ENGINE_START_TIMEOUT_ENV}={value} in the {where}"
    for group in ray_groups(obj):
        container = group.container
        if group.is_head or container is None:
            continue
        value_text = container.literal_env().get(ENGINE_START_TIMEOUT_ENV)
        value = _seconds(value_text, ENGINE_START_TIMEOUT_ENV) if value_text else None
        if value is not None:
            return value, f"{ENGINE_START_TIMEOUT_ENV}={value} in the {group.label} env"
    return ENGINE_START_TIMEOUT_DEFAULT_S, (
        f"{ENGINE_START_TIMEOUT_ENV} unset: Ray Serve LLM's default "
        f"{ENGINE_START_TIMEOUT_DEFAULT_S} s (ray 2.60)"
    )


def _weights_source(source: Any) -> str:
    text = str(source or "")
    if text.startswith(("s3://", "gs://", "abfss://", "azure://")):
        return "s3"
    if text.startswith("/"):
        return "pvc"
    return "huggingface"


def _parallel(site: EngineSite, key: str) -> int:
    """A parallel size as the planner takes it: 1 when unset or not an integer."""
    value = site.int_flag(key)
    return value if isinstance(value, int) and value else 1


def _estimate(obj: K8sObject, site: EngineSite) -> tuple[int | None, str, tuple[float, str] | None]:
    """(estimated startup in seconds, working, optimistic bound and its working) or (None,
    why it is unknown, None)."""
    annotated = dig(obj.raw, "metadata", "annotations", ESTIMATE_ANNOTATION)
    value = _seconds(annotated, ESTIMATE_ANNOTATION) if annotated is not None else None
    if value is not None:
        return value, f"the planner's startup estimate, annotation {ESTIMATE_ANNOTATION}", None
    engine, llm = site.engine, site.llm_config
    source = dig(llm, "model_loading_config", "model_source")
    model = source if isinstance(source, str) and source else engine.model
    if not isinstance(model, str) or not model:
        return None, f"{engine.source} names no model", None
    arch = catalogs.model_architecture(model) or (
        catalogs.model_architecture(engine.model) if engine.model else None
    )
    if arch is None:
        return (
            None,
            f"model {quoted(model)} is not in the model catalogue, so its load time is "
            f"unknown; {catalogs.UNCATALOGUED_FIX}",
            None,
        )
    try:
        from gpustrata.vllm.capacity import startup_estimate, weights_estimate
        from gpustrata_policies.view.capacity import startup_conditions

        env_vars = dig(llm, "runtime_env", "env_vars")
        env = {str(k): str(v) for k, v in env_vars.items()} if isinstance(env_vars, Mapping) else {}
        conditions = startup_conditions(env, engine)

        weights = weights_estimate(
            arch,
            tensor_parallel_size=_parallel(site, "tensor_parallel_size"),
            pipeline_parallel_size=_parallel(site, "pipeline_parallel_size"),
            model_dtype=str(site.flag("dtype") or "auto"),
            quantization=str(site.flag("quantization")) if site.flag("quantization") else None,
        )
        startup = startup_estimate(
            arch,
            weights,
            weights_source=_weights_source(source),
            enforce_eager=site.flag_on("enforce_eager"),
            hf_transfer=conditions.hf_transfer,
            streamer_distributed=conditions.streamer_distributed,
            capture_sizes=conditions.capture_sizes,
        )
    except Exception as exc:  # an estimate the capacity planner refuses is not a violation
        return None, f"the startup of {arch.id} cannot be estimated ({exc})", None
    chain = startup.explanation.split(", x")[0]  # the estimate, before the safety factor
    return (
        math.ceil(startup.total_s),
        f"estimated: {chain}",
        (
            (startup.optimistic_s, startup.optimistic_explanation)
            if startup.optimistic_s is not None
            else None
        ),
    )


def _engines(
    ctx: RuleContext, obj: K8sObject, estimates: list[tuple[int, str]]
) -> Iterator[Verdict]:
    """Each Ray Serve LLM engine's start timeout against its estimated load; *estimates*
    gets every (seconds, working) estimated."""
    cfg = serve_config(obj)  # the applications, for their runtime_env (engines: the sites)
    apps = list(cfg.applications) if cfg else []
    for site in engine_sites(ctx, obj):
        if not site.ray:
            continue
        llm = site.llm_config
        app = next((a for a in apps if isinstance(a.get("args"), Mapping) and llm in _llms(a)), {})
        needed, why, optimistic = _estimate(obj, site)
        timeout, where = _timeout(obj, app, llm)
        model = site.engine.model
        values: dict[str, Value] = {
            "engine": f"engine '{model}'" if model else site.label,
            "estimate": why,
            "timeout_set_in": where,
        }
        if needed is None:
            yield Verdict("not_evaluated", "load-not-estimated", values)
            continue
        estimates.append((needed, why))
        if timeout < needed:
            # Published loads of this source spread widely: where the fastest of them would
            # fit the timeout, a restart is likely, not certain.
            maybe = optimistic is not None and timeout >= optimistic[0]
            values |= {
                "load_s": needed,
                "optimistic_s": optimistic[0] if optimistic else None,
                "optimistic": optimistic[1] if optimistic else None,
                "fits_optimistic": maybe,
            }
            yield Verdict(
                "advisory" if maybe else "violation",
                "engine-start-timeout-short",
                values,
                {"timeout_s": timeout},
                path=("spec", "serveConfigV2"),
            )


def _threshold(
    obj: K8sObject,
    spec: Mapping[str, Any],
    key: str,
    default: int,
    operator: tuple[KubeRayRelease | None, str] | None,
    honoured: bool,
    estimates: list[tuple[int, str]],
) -> Verdict | None:
    """One of KubeRay's unhealthy-second thresholds against the longest estimated load."""
    release = operator[0] if operator else None
    longest = max(estimates) if estimates else None
    values: dict[str, Value] = {"key": key, "api_version": obj.api_version}
    if longest is not None:
        values |= {"load_s": longest[0], "estimate": longest[1]}
    if key not in spec:
        if honoured and longest is not None and default < longest[0]:
            return Verdict(
                "violation", "threshold-unset", values, {"threshold_s": default}, path=("spec",)
            )
        return None
    value = _seconds(spec[key], key)
    values["setting"] = str(spec[key])
    if release is not None and release.unhealthy_thresholds_honoured:
        return None  # KubeRay 1.0 counts only UNHEALTHY/DEPLOY_FAILED time, not a load
    if release is not None:
        values["operator"] = operator[1] if operator else ""
        return Verdict(
            "advisory", "threshold-ignored", values, sources=(KUBERAY_1685,), path=("spec", key)
        )
    if not honoured:
        # ray.io/v1 is served from KubeRay v1.0.0 (apis/ray/v1 first appears at that tag): 1.0
        # counts only UNHEALTHY/DEPLOY_FAILED time (getAndCheckServeStatus) and the dashboard
        # agent's, 1.1 on reads neither field, so no release lets it cut a load short.
        return Verdict(
            "advisory",
            "threshold-not-a-load-bound",
            values,
            sources=(KUBERAY_1685,),
            path=("spec", key),
        )
    if value is not None and longest is not None and value < longest[0]:
        return Verdict(
            "violation", "threshold-short", values, {"threshold_s": value}, path=("spec", key)
        )
    return None


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Ray Serve LLM waits longer than the model takes to load; old thresholds noted."""
    if obj.kind != "RayService":
        return
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    operator = operator_release(ctx)
    release = operator[0] if operator else None
    # Without a catalogued operator release: ray.io/v1alpha1 means KubeRay before 1.0.
    honoured = obj.api_version == "ray.io/v1alpha1" if release is None else False
    estimates: list[tuple[int, str]] = []
    yield from _engines(ctx, obj, estimates)
    for key, default in THRESHOLDS.items():
        found = _threshold(obj, spec, key, default, operator, honoured, estimates)
        if found is not None:
            yield found


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an R005 message quotes beyond its values and thresholds: the hedge when an
    optimistic bandwidth would fit."""
    v = verdict.values
    out: dict[str, str] = {}
    if verdict.reason == "engine-start-timeout-short":
        out["hedge"] = (
            f"; at {v['optimistic']} it would fit, so measure this cluster's download bandwidth"
            if v["fits_optimistic"]
            else ""
        )
    return out


def _llms(app: Mapping[str, Any]) -> list[Any]:
    args = app.get("args")
    configs = args.get("llm_configs") if isinstance(args, Mapping) else None
    if isinstance(configs, list):
        return configs
    single = args.get("llm_config") if isinstance(args, Mapping) else None
    return [single] if single is not None else []


RULE = folder_rule(__name__, worded(judge, fields), facts={"KUBERAY_1685": KUBERAY_1685})
