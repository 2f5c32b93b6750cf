"""G001 gateway-outlasts-generation."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import fmt, object_index, pool_members
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.endpoints import reach, services
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.gateways import (
    INFERENCE_POOL_GROUPS,
    inference_pool,
    longest_generation,
    parse_duration,
)
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig
from gpustrata_policies.view.vllm_args import serve_config_data

Path = tuple[str | int, ...]

NGINX_READ = "nginx.ingress.kubernetes.io/proxy-read-timeout"
ALB_ATTRIBUTES = "alb.ingress.kubernetes.io/load-balancer-attributes"
ALB_IDLE = "idle_timeout.timeout_seconds"
ELB_IDLE = "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout"


@dataclass(frozen=True, slots=True)
class Hop:
    """One timeout in front of engines."""

    what: str
    """``HTTPRoute llm-route rules[0].timeouts.request 300s``."""
    seconds: float
    idle: bool
    """Reset by every byte (a streamed answer outlives it)."""
    path: Path
    engines: tuple[EngineSite, ...]


# --------------------------------------------------------------------------- backends


def _service_engines(
    ctx: RuleContext, namespace: str, name: Any, port: Any = None
) -> list[EngineSite]:
    svc = services(ctx).get((namespace, name)) if isinstance(name, str) else None
    if svc is None:
        return []
    if svc.kuberay:
        return [s for s in engine_sites(ctx, svc.obj) if s.ray]
    entries = [svc.find(port)] if port is not None else list(svc.ports)
    out: list[EngineSite] = []
    for entry in entries:
        if entry is None:
            continue
        for r in reach(ctx, svc, entry):
            if r.reaches:
                out.extend(e for e in r.engines if e.engine.port == r.target)
    return out


def _pools_by_name(ctx: RuleContext) -> dict[tuple[str, Any], list[K8sObject]]:
    """The InferencePools by (namespace, name), each list in input order (built once: a
    lookup per route rule, not a scan of every pool)."""

    def build() -> dict[tuple[str, Any], list[K8sObject]]:
        found: dict[tuple[str, Any], list[K8sObject]] = {}
        for candidate in ctx.index.objects_of("InferencePool"):
            found.setdefault((candidate.namespace, candidate.name), []).append(candidate)
        return found

    pools: dict[tuple[str, Any], list[K8sObject]] = ctx.memo("g001_pools_by_name", build)
    return pools


def _pool_engines(ctx: RuleContext, namespace: str, name: Any, group: str) -> list[EngineSite]:
    if not isinstance(name, Hashable):
        return []
    for candidate in _pools_by_name(ctx).get((namespace, name), ()):
        if candidate.api_version.split("/", 1)[0] != group:
            continue  # the route names the other API group's InferencePool
        pool = inference_pool(candidate)
        if pool is not None:
            members, _ = pool_members(ctx, pool)
            return [s for _, sites in members for s in sites]
    return []


def _ref_engines(ctx: RuleContext, obj: K8sObject, ref: Mapping[str, Any]) -> list[EngineSite]:
    namespace = str(ref.get("namespace") or obj.namespace)
    name = known(ref.get("name"), f"backendRef name of {obj.resource}")
    kind, group = ref.get("kind", "Service"), ref.get("group") or ""
    if kind == "InferencePool" and group in INFERENCE_POOL_GROUPS:
        return _pool_engines(ctx, namespace, name, str(group))
    if kind == "Service" and group == "":
        return _service_engines(ctx, namespace, name, known(ref.get("port"), "backendRef port"))
    return []


def _route_rules(ctx: RuleContext, obj: K8sObject) -> Iterator[tuple[int, Any, list[EngineSite]]]:
    rules = as_list(known(dig(obj.raw, "spec", "rules"), f"spec.rules of {obj.resource}"), "")
    for i, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            continue
        engines = [
            e
            for ref in as_list(rule.get("backendRefs"), "backendRefs")
            if isinstance(ref, Mapping)
            for e in _ref_engines(ctx, obj, ref)
        ]
        yield i, rule, engines


# --------------------------------------------------------------------------- hops


def _duration(value: Any, what: str) -> float | None:
    return parse_duration(known(value, what))


def _ingress_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    notes = as_map(dig(obj.raw, "metadata", "annotations"), "annotations")
    spec = as_map(known(obj.raw.get("spec"), f"spec of {obj.resource}"), "spec")
    engines: list[EngineSite] = []
    backends: list[Mapping[str, Any]] = []
    default = spec.get("defaultBackend", spec.get("backend"))
    if isinstance(default, Mapping):
        backends.append(default)
    for rule in as_list(spec.get("rules"), "spec.rules"):
        paths = dig(rule, "http", "paths") if isinstance(rule, Mapping) else None
        for entry in as_list(paths, "http.paths"):
            backend = entry.get("backend") if isinstance(entry, Mapping) else None
            if isinstance(backend, Mapping):
                backends.append(backend)
    for backend in backends:
        service = backend.get("service")
        if isinstance(service, Mapping):
            port_spec = as_map(service.get("port"), "port")
            number = port_spec.get("number", port_spec.get("name"))
            engines += _service_engines(ctx, obj.namespace, service.get("name"), number)
        else:
            name, legacy = backend.get("serviceName"), backend.get("servicePort")
            engines += _service_engines(ctx, obj.namespace, name, legacy)
    if not engines:
        return
    where: Path = ("metadata", "annotations")
    read = _duration(notes.get(NGINX_READ), f"{NGINX_READ} of {obj.resource}")
    if read is not None and NGINX_READ in notes:
        text = f"Ingress {obj.name}'s {NGINX_READ} {fmt(notes[NGINX_READ])}"
        yield Hop(text, read, True, where, tuple(engines))
    attributes = known(notes.get(ALB_ATTRIBUTES), f"{ALB_ATTRIBUTES} of {obj.resource}")
    if isinstance(attributes, str):
        for item in attributes.split(","):
            key, _, value = item.strip().partition("=")
            seconds = parse_duration(value) if key.strip() == ALB_IDLE else None
            if seconds is not None:
                text = f"Ingress {obj.name}'s ALB {ALB_IDLE}={value.strip()}"
                yield Hop(text, seconds, True, where, tuple(engines))


def _service_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    notes = as_map(dig(obj.raw, "metadata", "annotations"), "annotations")
    if ELB_IDLE not in notes:
        return
    seconds = _duration(notes.get(ELB_IDLE), f"{ELB_IDLE} of {obj.resource}")
    engines = _service_engines(ctx, obj.namespace, obj.name)
    if seconds is not None and engines:
        text = f"Service {obj.name}'s {ELB_IDLE} {fmt(notes[ELB_IDLE])}"
        yield Hop(text, seconds, True, ("metadata", "annotations"), tuple(engines))


def _httproute_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    for i, rule, engines in _route_rules(ctx, obj):
        timeouts = as_map(known(rule.get("timeouts"), f"timeouts of {obj.resource}"), "timeouts")
        for key in ("request", "backendRequest"):
            seconds = _duration(timeouts.get(key), f"timeouts.{key} of {obj.resource}")
            if seconds is not None and engines:
                text = f"HTTPRoute {obj.name} rules[{i}].timeouts.{key} {fmt(timeouts[key])}"
                path: Path = ("spec", "rules", i, "timeouts", key)
                yield Hop(text, seconds, False, path, tuple(engines))


def _mesh_host(host: str, namespace: str) -> tuple[str, str]:
    parts = host.split(".")
    return (parts[0], parts[1] if len(parts) > 1 else namespace)


def _virtualservice_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    routes = as_list(known(dig(obj.raw, "spec", "http"), f"spec.http of {obj.resource}"), "")
    for i, route in enumerate(routes):
        if not isinstance(route, Mapping) or "timeout" not in route:
            continue
        seconds = _duration(route.get("timeout"), f"spec.http[{i}].timeout of {obj.resource}")
        engines: list[EngineSite] = []
        for dest in as_list(route.get("route"), "route"):
            target = dig(dest, "destination") if isinstance(dest, Mapping) else None
            host = known(dig(target, "host"), "destination.host") if target else None
            if not isinstance(host, str):
                continue
            name, namespace = _mesh_host(host, obj.namespace)
            port = dig(target, "port", "number")
            engines += _service_engines(ctx, namespace, name, port)
        if seconds is not None and engines:
            text = f"VirtualService {obj.name} http[{i}].timeout {fmt(route['timeout'])}"
            yield Hop(text, seconds, False, ("spec", "http", i, "timeout"), tuple(engines))


def _targets(ctx: RuleContext, obj: K8sObject) -> list[EngineSite]:
    spec = as_map(known(obj.raw.get("spec"), f"spec of {obj.resource}"), "spec")
    refs = [*as_list(spec.get("targetRefs"), "targetRefs")]
    if isinstance(spec.get("targetRef"), Mapping):
        refs.append(spec["targetRef"])
    routes: list[K8sObject] = []
    index = object_index(ctx)
    for ref in refs:
        if not isinstance(ref, Mapping):
            continue
        name = known(ref.get("name"), f"targetRef name of {obj.resource}")
        if ref.get("kind") == "HTTPRoute":
            found = index.get(("HTTPRoute", obj.namespace, str(name)))
            routes += [found] if found is not None else []
        elif ref.get("kind") == "Gateway":
            routes += [
                o
                for o in ctx.index.objects_of("HTTPRoute")
                if _attached(o, obj.namespace, str(name))
            ]
    return [e for route in routes for _, _, engines in _route_rules(ctx, route) for e in engines]


def _attached(route: K8sObject, namespace: str, gateway: str) -> bool:
    for parent in as_list(dig(route.raw, "spec", "parentRefs"), "parentRefs"):
        if not isinstance(parent, Mapping) or parent.get("kind", "Gateway") != "Gateway":
            continue
        if parent.get("name") == gateway and (parent.get("namespace") or route.namespace) == (
            namespace
        ):
            return True
    return False


_ENVOY_KEYS = {
    "BackendTrafficPolicy": (("requestTimeout", False), ("connectionIdleTimeout", True)),
    "ClientTrafficPolicy": (("idleTimeout", True),),
}


def _envoy_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    if not obj.api_version.startswith("gateway.envoyproxy.io/"):
        return
    http = as_map(known(dig(obj.raw, "spec", "timeout", "http"), "timeout.http"), "http")
    found = [(k, idle) for k, idle in _ENVOY_KEYS[obj.kind] if k in http]
    if not found:
        return
    engines = _targets(ctx, obj)
    for key, idle in found:
        seconds = _duration(http.get(key), f"timeout.http.{key} of {obj.resource}")
        if seconds is not None and engines:
            text = f"{obj.kind} {obj.name} timeout.http.{key} {fmt(http[key])}"
            yield Hop(text, seconds, idle, ("spec", "timeout", "http", key), tuple(engines))


def _rayservice_hops(ctx: RuleContext, obj: K8sObject) -> Iterator[Hop]:
    text = known(dig(obj.raw, "spec", "serveConfigV2"), f"serveConfigV2 of {obj.resource}")
    if not isinstance(text, str):
        return
    try:
        data = serve_config_data(text)
    except Exception:  # an unreadable string: other rules report it
        return
    options = as_map(data.get("http_options"), "") if isinstance(data, Mapping) else {}
    if "request_timeout_s" not in options:
        return
    seconds = parse_duration(options.get("request_timeout_s"))
    engines = [s for s in engine_sites(ctx, obj) if s.ray]
    if seconds is not None and engines:
        what = (
            f"RayService {obj.name}'s http_options.request_timeout_s {options['request_timeout_s']}"
        )
        yield Hop(what, seconds, False, ("spec", "serveConfigV2"), tuple(engines))


_HOPS = {
    "Ingress": _ingress_hops,
    "Service": _service_hops,
    "HTTPRoute": _httproute_hops,
    "VirtualService": _virtualservice_hops,
    "BackendTrafficPolicy": _envoy_hops,
    "ClientTrafficPolicy": _envoy_hops,
    "RayService": _rayservice_hops,
}


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Every timeout in front of an engine outlasts the longest answer it admits."""
    hops = _HOPS.get(obj.kind)
    if hops is None:
        return
    for hop in hops(ctx, obj):
        if hop.seconds <= 0:
            continue  # 0 disables the timeout in Gateway API, Istio and Envoy
        worst: tuple[EngineSite, float, str] | None = None
        for site in {id(e): e for e in hop.engines}.values():
            gen = longest_generation(ctx, site)
            if isinstance(gen, str):
                yield Verdict("not_evaluated", "generation-unknown", {"why": gen})
                continue
            if gen.seconds > hop.seconds and (worst is None or gen.seconds > worst[1]):
                worst = (site, gen.seconds, gen.text())
        if worst is not None:
            site, seconds, working = worst
            yield Verdict(
                "advisory" if hop.idle else "violation",
                "idle-timeout-cuts-answer" if hop.idle else "timeout-cuts-answer",
                values={
                    "hop": hop.what,
                    "engine": f"{site.label} of {site.obj.resource}",
                    "generation_seconds": seconds,
                    "working": working,
                },
                thresholds={"timeout_seconds": hop.seconds},
                path=hop.path,
            )


def fields(verdict: Verdict) -> dict[str, object]:
    """The number a G001 message quotes beyond its values and thresholds: the whole seconds
    the hop's timeout must exceed."""
    seconds = verdict.values.get("generation_seconds")
    return {} if seconds is None else {"needed": math.ceil(cast(float, seconds))}


RULE = folder_rule(__name__, worded(judge, fields))
