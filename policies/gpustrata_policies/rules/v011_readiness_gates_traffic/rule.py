"""V011 readiness-gates-traffic."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.engines import engine_sites
from gpustrata_policies.view.launchers import KSERVE_PRESET_SOURCE
from gpustrata_policies.view.objects import ContainerRef, K8sObject, as_list, as_map

READY_PATHS = ("/health", "/v1/models", "/ping")
KAITO_READINESS = "multi-node-health-check.py readiness"
"""KAITO's multi-node readiness probe: its script GETs the leader's vLLM ``/health``
(kaito-project/kaito@v0.12.0:presets/workspace/inference/vllm/multi-node-health-check.py
``readiness``)."""


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


def probe_case(c: ContainerRef, serving_port: int | None) -> tuple[str, Value] | None:
    """Why the readiness probe does not gate traffic on the engine, as (case, what the probe
    states), or ``None``."""
    probe = c.raw.get("readinessProbe")
    if probe is UNKNOWN:  # a controller's default that is not known: never "no probe"
        raise UnknownInput(f"readinessProbe of {c.label}")
    if not isinstance(probe, Mapping):
        return "no-probe", None
    http = as_map(probe.get("httpGet"), "httpGet")
    if http:
        path = str(http.get("path") or "/")
        if path.rstrip("/") in READY_PATHS:
            return None
        return "http-path", path
    tcp = as_map(probe.get("tcpSocket"), "tcpSocket")
    if tcp:
        # vLLM binds its port early but listens only once the engine is up
        # (vllm/entrypoints/openai/api_server.py setup_server), so a TCP probe on the
        # serving port does wait for the model.
        port = _port_number(c, tcp.get("port"))
        if serving_port is not None and port == serving_port:
            return None
        return "tcp-port", str(tcp.get("port"))
    command = as_list(as_map(probe.get("exec"), "exec").get("command"), "exec.command")
    if any(p in str(part) for part in command for p in (*READY_PATHS, KAITO_READINESS)):
        return None
    return "other-probe", None


# Batch workloads: no Service routes to them by readiness. A Job gets none; a JobSet's
# headless Service publishes not-ready Pods by default (network.publishNotReadyAddresses
# "Defaults to True", kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go), and the
# client that sends the batch requests has to wait for /health itself.
BATCH_KINDS = frozenset({"Job", "CronJob", "JobSet"})
PROBE_HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
            yield Verdict(
                "not_evaluated",
                "preset-probe-unread",
                values={"container": c.label},
                sources=(KSERVE_PRESET_SOURCE,),
            )
            continue
        found = probe_case(c, engine.port)
        if found:
            case, stated = found
            yield Verdict(
                "violation",
                case,
                values={"container": c.label, "probe": stated},
                thresholds={"port": engine.port, "paths": READY_PATHS},
                path=(*c.path, "readinessProbe"),
            )


RULE = folder_rule(__name__, worded(judge), facts={"KSERVE_PRESET_SOURCE": KSERVE_PRESET_SOURCE})
