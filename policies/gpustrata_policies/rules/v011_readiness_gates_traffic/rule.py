"""V011 readiness-gates-traffic."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.engines import engine_sites
from gpustrata_policies.view.launchers import KSERVE_PRESET_SOURCE
from gpustrata_policies.view.objects import ContainerRef, K8sObject, as_list, as_map

READY_PATHS = ("/health", "/v1/models", "/ping")


def _port_number(c: ContainerRef, port: object) -> int | None:
    if isinstance(port, int) and not isinstance(port, bool):
        return port
    for p in as_list(c.raw.get("ports"), "ports"):
        if isinstance(p, Mapping) and p.get("name") == port:
            value = p.get("containerPort")
            return value if isinstance(value, int) else None
    try:
        return int(str(port))
    except ValueError:
        return None


def problem(c: ContainerRef, serving_port: int | None) -> str | None:
    """Why the readiness probe does not gate traffic on the engine, or ``None``."""
    probe = c.raw.get("readinessProbe")
    if not isinstance(probe, Mapping):
        return (
            "has no readinessProbe, so the pod is Ready (and gets traffic) while the engine loads"
        )
    http = as_map(probe.get("httpGet"), "httpGet")
    if http:
        path = str(http.get("path") or "/")
        if path.rstrip("/") in READY_PATHS:
            return None
        return f"has a readinessProbe on {path}, which is not /health or /v1/models"
    tcp = as_map(probe.get("tcpSocket"), "tcpSocket")
    if tcp:
        # vLLM binds its port early but listens only once the engine is up
        # (vllm/entrypoints/openai/api_server.py setup_server), so a TCP probe on the
        # serving port does wait for the model.
        port = _port_number(c, tcp.get("port"))
        if serving_port is not None and port == serving_port:
            return None
        return (
            f"has a tcpSocket readinessProbe on port {tcp.get('port')}, "
            f"not vLLM's port {serving_port}"
        )
    command = as_list(as_map(probe.get("exec"), "exec").get("command"), "exec.command")
    if any(p in str(part) for part in command for p in READY_PATHS):
        return None
    return "has a readinessProbe that does not query /health or /v1/models"


# Batch workloads: no Service routes to them by readiness. A Job gets none; a JobSet's
# headless Service publishes not-ready Pods by default (network.publishNotReadyAddresses
# "Defaults to True", kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go), and the
# client that sends the batch requests has to wait for /health itself.
BATCH_KINDS = frozenset({"Job", "CronJob", "JobSet"})
PROBE_HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Containers that serve vLLM have a readiness probe on /health or /v1/models."""
    if obj.kind in BATCH_KINDS:
        return
    if obj.kind == "RayService":
        return  # Ray Serve routes only to healthy replicas; KubeRay sets pod probes
    for site in engine_sites(ctx, obj):  # containers in Ray pods are not included: as above
        c, engine = site.container, site.engine
        if c is None or site.flag("headless") is True:
            continue
        probe = c.raw.get("readinessProbe")
        if (
            obj.kind == "LLMInferenceService"
            and isinstance(probe, Mapping)
            and not any(k in probe for k in PROBE_HANDLERS)
        ):
            yield ctx.not_evaluated(
                obj,
                f"{c.label}'s readinessProbe states no handler: it overrides part of the "
                f"probe of KServe's preset under it ({KSERVE_PRESET_SOURCE}), not read here",
            )
            continue
        why = problem(c, engine.port)
        if why:
            yield ctx.violation(
                obj, f"{c.label} serves vLLM but {why}", (*c.path, "readinessProbe")
            )


RULE = folder_rule(__name__, check)
