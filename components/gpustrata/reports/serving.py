"""The serving layer side by side in `gpustrata plan`: each number as the registered
objects carry it next to what the plan derived, so a layer that disagrees stands out.

Pure (reads recorded resource inputs); used by :mod:`gpustrata.reports.text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION
from gpustrata.planning.plan_types import ModelPlan, StackPlan

__all__ = ["Row", "serving_rows", "serving_text"]

ENGINE_START_ENV = "RAYLLM_ENGINE_START_TIMEOUT_S"


@dataclass(frozen=True)
class Row:
    """One number of one model: rendered value, planned value, whether they agree."""

    model: str
    item: str
    rendered: str
    planned: str
    agree: bool


def _objects(resources: Iterable[Any], kind: str) -> dict[str, Mapping[str, Any]]:
    """Registered inputs of one Kubernetes kind, by metadata.name."""
    out: dict[str, Mapping[str, Any]] = {}
    for r in resources:
        if str(getattr(r, "type", "")).endswith(f":{kind}"):
            inputs = r.inputs
            name = (inputs.get("metadata") or {}).get("name")
            if isinstance(name, str):
                out[name] = inputs
    return out


def _tolerations(items: Any) -> str:
    parts = []
    for t in items or []:
        value = f"={t['value']}" if t.get("value") else ""
        parts.append(f"{t.get('key', '*')}{value}:{t.get('effect', '*')}")
    return ", ".join(parts) or "none"


def _taints(mp: ModelPlan) -> str:
    """The pool's taints, which the engine Pods must tolerate exactly."""
    taints = mp.pool.spec.taints
    return (
        ", ".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in taints) or "none"
    )


def _shm(pod: Mapping[str, Any]) -> str:
    for volume in pod.get("volumes") or []:
        empty = volume.get("emptyDir") or {}
        if volume.get("name") == "dshm":
            return f"{empty.get('medium', 'disk')} {empty.get('sizeLimit', 'unbounded')}"
    return "none"


def _gpus(
    pod: Mapping[str, Any], container: Mapping[str, Any], claims: Mapping[str, Any]
) -> tuple[str, Any]:
    """Where a container's GPUs are written and how many: its ``nvidia.com/gpu`` limit, or
    (DRA) the device count of the ResourceClaimTemplate its claim names."""
    resources = container.get("resources") or {}
    if not resources.get("claims"):
        return "nvidia.com/gpu limit", (resources.get("limits") or {}).get("nvidia.com/gpu")
    names = [c.get("resourceClaimTemplateName") for c in pod.get("resourceClaims") or []]
    total = 0
    for name in names:
        for req in (
            (claims.get(name) or {})
            .get("spec", {})
            .get("spec", {})
            .get("devices", {})
            .get("requests", [])
        ):
            total += int((req.get("exactly") or {}).get("count", 1))
    return "ResourceClaimTemplate count", total


def _pod_rows(mp: ModelPlan, pod: Mapping[str, Any], tolerations: str) -> list[Row]:
    """The engine Pod's /dev/shm and tolerations (the row *tolerations*) against the plan."""
    return [
        _row(mp.name, "/dev/shm", _shm(pod), f"Memory {mp.spec.shm_size}"),
        _row(mp.name, tolerations, _tolerations(pod.get("tolerations")), _taints(mp)),
    ]


def _row(model: str, item: str, rendered: Any, planned: Any) -> Row:
    r, p = str(rendered), str(planned)
    return Row(model, item, r, p, r == p)


def _ray_rows(mp: ModelPlan, obj: Mapping[str, Any], claims: Mapping[str, Any]) -> list[Row]:
    ray = mp.ray
    assert ray is not None
    name, engine = mp.name, mp.spec.engine
    spec = obj["spec"]
    serve = yaml.safe_load(spec["serveConfigV2"])
    llm = serve["applications"][0]["args"]["llm_configs"][0]
    kwargs = llm.get("engine_kwargs", {})
    tp, pp = kwargs.get("tensor_parallel_size", 1), kwargs.get("pipeline_parallel_size", 1)
    pg = llm.get("placement_group_config", {})
    bundles = pg.get("bundles", [])
    (group,) = spec["rayClusterConfig"]["workerGroupSpecs"]
    pod = group["template"]["spec"]
    where, gpus = _gpus(pod, pod["containers"][0], claims)
    head = spec["rayClusterConfig"]["headGroupSpec"]["rayStartParams"]
    auto = llm["deployment_config"]["autoscaling_config"]
    deployment = llm["deployment_config"]
    timeout = llm.get("runtime_env", {}).get("env_vars", {}).get(ENGINE_START_ENV)
    estimate = (obj["metadata"].get("annotations") or {}).get(STARTUP_ESTIMATE_ANNOTATION)
    p = mp.probes
    return [
        _row(
            name,
            "TP x PP (engine_kwargs)",
            f"{tp} x {pp} = {tp * pp}",
            f"{engine.tensor_parallel_size} x {engine.pipeline_parallel_size} = "
            f"{mp.gpus_per_replica}",
        ),
        _row(
            name,
            "placement bundles",
            f"{len(bundles)} x {{GPU: {bundles[0].get('GPU') if bundles else '-'}}} "
            f"{pg.get('strategy')}",
            f"{mp.gpus_per_replica} x {{GPU: 1.0}} {ray.placement_strategy}",
        ),
        _row(name, f"worker {where}", gpus, ray.gpus_per_worker),
        _row(
            name,
            "worker rayStartParams num-gpus",
            group["rayStartParams"].get("num-gpus"),
            ray.gpus_per_worker,
        ),
        _row(name, "head num-gpus", head.get("num-gpus"), 0),
        _row(
            name,
            "worker Pods min..max",
            f"{group['minReplicas']}..{group['maxReplicas']}",
            f"{ray.min_workers}..{ray.max_workers}",
        ),
        _row(
            name,
            "Serve replicas min..max",
            f"{auto['min_replicas']}..{auto['max_replicas']}",
            f"{mp.min_replicas}..{mp.max_replicas}",
        ),
        *_pod_rows(mp, pod, "worker tolerations"),
        _row(name, f"{ENGINE_START_ENV} s", timeout, p.startup_window_s),
        _row(name, "startup estimate s (annotation)", estimate, _estimate(mp)),
        _row(
            name,
            "Serve health check period/timeout s",
            f"{deployment.get('health_check_period_s')}/{deployment.get('health_check_timeout_s')}",
            f"{p.liveness_period_s}/{p.timeout_s}",
        ),
        _row(
            name, "accelerator_type", llm.get("accelerator_type", "-"), ray.accelerator_type or "-"
        ),
        _row(
            name,
            "upgradeStrategy",
            (spec.get("upgradeStrategy") or {}).get("type"),
            ray.upgrade_strategy,
        ),
    ]


def _estimate(mp: ModelPlan) -> str:
    import math

    return str(math.ceil(mp.capacity.startup.total_s)) if mp.capacity else "None"


def _deployment_rows(mp: ModelPlan, dep: Mapping[str, Any], claims: Mapping[str, Any]) -> list[Row]:
    name, engine, p = mp.name, mp.spec.engine, mp.probes
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    where, gpus = _gpus(pod, container, claims)
    startup = container.get("startupProbe", {})
    window = startup.get("periodSeconds", 0) * startup.get("failureThreshold", 0)
    strategy = dep["spec"].get("strategy", {})
    rollout = strategy.get("type")
    if rollout == "RollingUpdate":
        rollout += f" maxSurge {strategy.get('rollingUpdate', {}).get('maxSurge')}"
    planned_rollout = "Recreate" if mp.max_replicas <= 1 else "RollingUpdate maxSurge 0"
    live = container.get("livenessProbe", {})
    return [
        _row(name, f"TP x PP = {where}", gpus, f"{engine.gpus_per_engine}"),
        _row(name, "startup window s", window, p.startup_window_s),
        _row(
            name,
            "liveness period x failures s",
            f"{live.get('periodSeconds')} x {live.get('failureThreshold')}",
            f"{p.liveness_period_s} x {p.liveness_failure_threshold}",
        ),
        *_pod_rows(mp, pod, "tolerations"),
        _row(name, "rollout", rollout, planned_rollout),
        _row(name, "replicas", dep["spec"].get("replicas"), mp.min_replicas),
    ]


def serving_rows(plan: StackPlan, resources: Iterable[Any]) -> list[Row]:
    """Every serving number of every model: rendered (registered inputs) and planned."""
    items = list(resources)
    services = _objects(items, "RayService")
    deployments = _objects(items, "Deployment")
    claims = _objects(items, "ResourceClaimTemplate")
    rows: list[Row] = []
    for mp in plan.models.values():
        if mp.ray is not None and mp.name in services:
            rows += _ray_rows(mp, services[mp.name], claims)
        elif mp.ray is None and mp.name in deployments:
            rows += _deployment_rows(mp, deployments[mp.name], claims)
    return rows


def serving_text(plan: StackPlan, resources: Iterable[Any]) -> list[str]:
    """The side-by-side table for the text report."""
    rows = serving_rows(plan, resources)
    if not rows:
        return []
    header = Row("model", "value", "rendered", "planned", True)
    widths = [
        max(len(getattr(r, f)) for r in [header, *rows])
        for f in ("model", "item", "rendered", "planned")
    ]
    out = []
    for r in [header, *rows]:
        mark = "" if r is header else ("ok" if r.agree else "MISMATCH")
        out.append(
            f"  {r.model:<{widths[0]}}  {r.item:<{widths[1]}}  {r.rendered:<{widths[2]}}  "
            f"{r.planned:<{widths[3]}}  {mark}".rstrip()
        )
    return out
