"""K021 stable-endpoint."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.endpoints import (
    KUBERAY_SERVE_SOURCE,
    Reach,
    ServicePort,
    ServiceView,
    reach,
    services,
)
from gpustrata_policies.view.kinds import is_builtin
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig

Path = tuple[str | int, ...]
_DEFAULT_PORTS = {"http": 80, "https": 443}
OPENAI_BASE = "/v1"
"""vLLM's OpenAI-compatible routes (``/v1/chat/completions``, ...) and Ray Serve LLM's
``build_openai_app`` under its route prefix."""


def _known(value: Any, what: str) -> Any:
    if value is UNKNOWN:
        raise UnknownInput(what)
    return value


def _find(ctx: RuleContext, namespace: str, name: Any) -> ServiceView | None:
    if not isinstance(name, str):
        return None
    return services(ctx).get((namespace, name))


def _unreached(reaches: list[Reach]) -> Reach | None:
    """The first Pod whose engine this port's traffic misses (None: all reached, or it
    goes to a port a sidecar declares)."""
    for r in reaches:
        if not r.reaches and not r.sidecar:
            return r
    return None


def _miss(svc: ServiceView, r: Reach) -> str:
    port = r.port
    if r.target is None:
        return (
            f"{svc.label} {port.label} targets the container port name "
            f"'{port.effective_target}', which no container of the Pods it selects declares "
            f"({r.engine_ports()}); the Service gets no endpoints for it. Declare the "
            f"containerPort {_engine_port(r)} with that name, or set targetPort {_engine_port(r)}"
        )
    return (
        f"{svc.label} {port.label} sends traffic to port {r.target}, but {r.engine_ports()}; "
        f"requests get connection refused. Set targetPort {_engine_port(r)}"
    )


def _engine_port(r: Reach) -> str:
    return str(r.engines[0].engine.port) if r.engines else "?"


def _check_service(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    svc = _find(ctx, obj.namespace, obj.name)
    if svc is None or svc.kuberay:
        return
    per_port = [(p, reach(ctx, svc, p)) for p in svc.ports]
    judged = [(p, rs) for p, rs in per_port if rs]
    if not judged:
        return  # selects no vLLM engine (or nothing in the input)
    for p, rs in judged:
        if isinstance(p.effective_target, str):
            missing = next((r for r in rs if r.target is None), None)
            if missing is not None:
                yield ctx.violation(obj, _miss(svc, missing), ("spec", "ports", p.index))
    if any(not _unreached(rs) for _, rs in judged):
        return  # some port reaches the engines
    numeric = [(p, rs) for p, rs in judged if not isinstance(p.effective_target, str)]
    if numeric:
        p, rs = numeric[0]
        r = _unreached(rs)
        if r is not None:
            yield ctx.violation(obj, _miss(svc, r), ("spec", "ports", p.index))


def _backend(
    ctx: RuleContext,
    obj: K8sObject,
    svc: ServiceView,
    port: Any,
    path: Path,
    what: str,
) -> Iterator[Outcome]:
    entry = svc.find(port)
    if entry is None:
        yield ctx.violation(
            obj,
            f"{what} sends traffic to {svc.label} port {port}, which it does not expose (its "
            f"ports: {svc.numbers()}); requests fail with 503 or are refused. Use port "
            f"{_suggest(svc)}",
            path,
        )
        return
    r = _unreached(reach(ctx, svc, entry))
    if r is not None:
        yield ctx.violation(obj, f"{what} uses {_miss(svc, r)}", path)


def _check_ingress(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    spec = as_map(_known(obj.raw.get("spec"), f"spec of {obj.resource}"), "spec")
    found: list[tuple[Mapping[str, Any], Path]] = []
    default = spec.get("defaultBackend", spec.get("backend"))
    if isinstance(default, Mapping):
        found.append((default, ("spec", "defaultBackend")))
    for i, rule in enumerate(as_list(spec.get("rules"), "spec.rules")):
        paths = dig(rule, "http", "paths") if isinstance(rule, Mapping) else None
        for j, entry in enumerate(as_list(paths, "http.paths")):
            backend = entry.get("backend") if isinstance(entry, Mapping) else None
            if isinstance(backend, Mapping):
                found.append((backend, ("spec", "rules", i, "http", "paths", j, "backend")))
    for backend, path in found:
        service = backend.get("service")
        if isinstance(service, Mapping):  # networking.k8s.io/v1
            name = _known(service.get("name"), f"backend service name of {obj.resource}")
            port_spec = as_map(_known(service.get("port"), "backend port"), "backend port")
            port = port_spec.get("number", port_spec.get("name"))
        else:  # extensions/v1beta1
            name, port = backend.get("serviceName"), backend.get("servicePort")
        _known(port, f"backend port of {obj.resource}")
        svc = _find(ctx, obj.namespace, name)
        if svc is None or port is None:
            continue
        yield from _backend(ctx, obj, svc, port, path, f"Ingress {obj.name}'s backend")


def _check_route(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    rules = as_list(dig(obj.raw, "spec", "rules"), f"spec.rules of {obj.resource}")
    for i, rule in enumerate(rules):
        refs = rule.get("backendRefs") if isinstance(rule, Mapping) else None
        for j, ref in enumerate(as_list(refs, "backendRefs")):
            if not isinstance(ref, Mapping):
                continue
            if ref.get("kind", "Service") != "Service" or ref.get("group", "") not in ("", None):
                continue
            namespace = ref.get("namespace") or obj.namespace
            name = _known(ref.get("name"), f"backendRef name of {obj.resource}")
            port = _known(ref.get("port"), f"backendRef port of {obj.resource}")
            svc = _find(ctx, str(namespace), name)
            if svc is None:
                continue
            path: Path = ("spec", "rules", i, "backendRefs", j)
            what = f"HTTPRoute {obj.name}'s backendRef"
            if port is None:
                yield ctx.violation(
                    obj,
                    f"{what} to {svc.label} names no port; Gateway API requires one for a "
                    f"Service backend (its ports: {svc.numbers()}), and the route is not "
                    "accepted (ResolvedRefs false)",
                    path,
                )
                continue
            yield from _backend(ctx, obj, svc, port, path, what)


def _check_endpoint(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    spec = as_map(_known(obj.raw.get("spec"), f"spec of {obj.resource}"), "spec")
    url = _known(spec.get("url"), f"spec.url of {obj.resource}")
    name = _known(spec.get("service"), f"spec.service of {obj.resource}")
    namespace = _known(spec.get("namespace"), f"spec.namespace of {obj.resource}")
    namespace = namespace if isinstance(namespace, str) and namespace else obj.namespace
    svc = _find(ctx, namespace, name)
    if svc is None or not isinstance(url, str):
        return
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    what = f"ModelEndpoint {obj.name} exports {url}"
    where: Path = ("spec", "url")
    if scheme not in _DEFAULT_PORTS:
        yield ctx.violation(obj, f"{what}: scheme '{scheme}' is not http or https", where)
        return
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        yield ctx.violation(obj, f"{what}: its port is not a number", where)
        return
    host = (parts.hostname or "").split(".")
    if len(host) >= 3 and host[2] == "svc" and (host[0], host[1]) != (svc.name, namespace):
        yield ctx.violation(
            obj,
            f"{what}, whose host names Service {host[1]}/{host[0]}, but it describes {svc.label}",
            where,
        )
    entry = svc.find(port)
    if entry is None:
        source = f" (KubeRay's convention, {KUBERAY_SERVE_SOURCE})" if svc.kuberay else ""
        yield ctx.violation(
            obj,
            f"{what} (port {port}), but {svc.label} exposes {svc.numbers()}{source}; clients "
            f"of the exported URL are refused. Export port {_suggest(svc)} instead",
            where,
        )
        return
    yield from _scheme_and_path(ctx, obj, svc, entry, scheme, parts.path, what, where)


def _suggest(svc: ServiceView) -> str:
    return str(svc.ports[0].port) if svc.ports else "?"


def _scheme_and_path(
    ctx: RuleContext,
    obj: K8sObject,
    svc: ServiceView,
    entry: ServicePort,
    scheme: str,
    path: str,
    what: str,
    where: Path,
) -> Iterator[Outcome]:
    if svc.kuberay:
        if scheme == "https":
            yield ctx.violation(obj, f"{what}, but Ray Serve's HTTP proxy serves plain http", where)
        bases = {(p.rstrip("/") + OPENAI_BASE) for p in svc.route_prefixes} or {OPENAI_BASE}
    else:
        reaches = reach(ctx, svc, entry)
        missed = _unreached(reaches)
        if missed is not None:
            yield ctx.violation(obj, f"{what}, but {_miss(svc, missed)}", where)
        engines = [e for r in reaches if r.reaches for e in r.engines]
        tls = [e for e in engines if e.engine.get("ssl_certfile")]
        if scheme == "https" and engines and not tls:
            yield ctx.violation(
                obj,
                f"{what}, but {engines[0].label} of {engines[0].obj.resource} serves plain "
                "http (no --ssl-certfile / --ssl-keyfile)",
                where,
            )
        if scheme == "http" and tls:
            yield ctx.violation(
                obj,
                f"{what}, but {tls[0].label} of {tls[0].obj.resource} serves https "
                "(--ssl-certfile is set)",
                where,
            )
        bases = {OPENAI_BASE}
    stripped = path.rstrip("/")
    if stripped and stripped not in bases:
        yield ctx.violation(
            obj,
            f"{what}: path '{path}' is not the OpenAI API base the server answers on "
            f"({', '.join(sorted(bases))}); clients appending /chat/completions get 404",
            where,
        )


def _check_rayservice(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    svc = next(
        (s for s in services(ctx).values() if s.kuberay and s.obj is obj),
        None,
    )
    if svc is None or svc.proxy_port is None:
        return
    for p in svc.ports:
        if p.name == "serve" and p.port is not None and p.port != svc.proxy_port:
            yield ctx.violation(
                obj,
                f"the head container's port 'serve' is {p.port}, so {svc.label} serves on "
                f"{p.port}, but Ray Serve's HTTP proxy listens on {svc.proxy_port} "
                "(serveConfigV2 http_options.port, 8000 when unset); set containerPort "
                f"{svc.proxy_port} or http_options.port {p.port}",
                ("spec", "rayClusterConfig", "headGroupSpec"),
            )


_CHECKS = {
    "Service": _check_service,
    "Ingress": _check_ingress,
    "HTTPRoute": _check_route,
    "ModelEndpoint": _check_endpoint,
    "RayService": _check_rayservice,
}


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Exported endpoints, routes and Services lead to the port the engine serves on."""
    found = _CHECKS.get(obj.kind)
    if found is not None and (obj.kind != "Service" or is_builtin(obj)):  # not Knative's
        yield from found(ctx, obj)


RULE = folder_rule(__name__, check)
