"""K021 stable-endpoint."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
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


def _miss(svc: ServiceView, r: Reach) -> dict[str, Value]:
    """Where a Service port's traffic goes instead of the engine, as verdict values."""
    return {
        "service": svc.label,
        "port": r.port.label,
        "target_name": None if r.target is not None else f"{r.port.effective_target}",
        "target": r.target,
        "engine_ports": r.engine_ports(),
        "engine_port": str(r.engines[0].engine.port) if r.engines else "?",
    }


def _miss_text(v: Mapping[str, Value]) -> str:
    if v["target_name"] is not None:
        return (
            f"{v['service']} {v['port']} targets the container port name '{v['target_name']}', "
            f"which no container of the Pods it selects declares ({v['engine_ports']}); the "
            f"Service gets no endpoints for it. Declare the containerPort {v['engine_port']} "
            f"with that name, or set targetPort {v['engine_port']}"
        )
    return (
        f"{v['service']} {v['port']} sends traffic to port {v['target']}, but "
        f"{v['engine_ports']}; requests get connection refused. Set targetPort {v['engine_port']}"
    )


def _judge_service(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    svc = _find(ctx, obj.namespace, obj.name)
    if svc is None or svc.kuberay:
        return
    per_port = [(p, reach(ctx, svc, p)) for p in svc.ports]
    judged_ports = [(p, rs) for p, rs in per_port if rs]
    if not judged_ports:
        return  # selects no vLLM engine (or nothing in the input)
    for p, rs in judged_ports:
        if isinstance(p.effective_target, str):
            missing = next((r for r in rs if r.target is None), None)
            if missing is not None:
                yield _violation(
                    "port-misses-engine", _miss(svc, missing), ("spec", "ports", p.index)
                )
    if any(not _unreached(rs) for _, rs in judged_ports):
        return  # some port reaches the engines
    numeric = [(p, rs) for p, rs in judged_ports if not isinstance(p.effective_target, str)]
    if numeric:
        p, rs = numeric[0]
        r = _unreached(rs)
        if r is not None:
            yield _violation("port-misses-engine", _miss(svc, r), ("spec", "ports", p.index))


def _violation(reason: str, values: Mapping[str, Value], path: Path) -> Verdict:
    return Verdict("violation", reason, values, path=path)


def _backend(
    ctx: RuleContext, svc: ServiceView, port: Any, path: Path, what: str
) -> Iterator[Verdict]:
    entry = svc.find(port)
    if entry is None:
        values = {"what": what, **_exposed(svc), "asked_port": f"{port}"}
        yield _violation("backend-port-not-exposed", values, path)
        return
    r = _unreached(reach(ctx, svc, entry))
    if r is not None:
        yield _violation("backend-misses-engine", {"what": what, **_miss(svc, r)}, path)


def _exposed(svc: ServiceView) -> dict[str, Value]:
    """The Service's ports, and the one to suggest."""
    return {
        "service": svc.label,
        "service_ports": svc.numbers(),
        "suggest": str(svc.ports[0].port) if svc.ports else "?",
    }


def _judge_ingress(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
        yield from _backend(ctx, svc, port, path, f"Ingress {obj.name}'s backend")


def _judge_route(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
                yield _violation("route-no-port", {"what": what, **_exposed(svc)}, path)
                continue
            yield from _backend(ctx, svc, port, path, what)


def _judge_endpoint(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
    values: dict[str, Value] = {"what": f"ModelEndpoint {obj.name} exports {url}", "scheme": scheme}
    where: Path = ("spec", "url")
    if scheme not in _DEFAULT_PORTS:
        yield _violation("endpoint-scheme", values, where)
        return
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        yield _violation("endpoint-port-not-a-number", values, where)
        return
    host = (parts.hostname or "").split(".")
    if len(host) >= 3 and host[2] == "svc" and (host[0], host[1]) != (svc.name, namespace):
        named = f"{host[1]}/{host[0]}"
        yield _violation(
            "endpoint-host-mismatch", {**values, "host_service": named, "service": svc.label}, where
        )
    entry = svc.find(port)
    if entry is None:
        values = {**values, **_exposed(svc), "url_port": port, "kuberay": svc.kuberay}
        yield Verdict(
            "violation",
            "endpoint-port-not-exposed",
            values,
            sources=(KUBERAY_SERVE_SOURCE,) if svc.kuberay else (),
            path=where,
        )
        return
    yield from _scheme_and_path(ctx, svc, entry, parts.path, values)


def _scheme_and_path(
    ctx: RuleContext, svc: ServiceView, entry: ServicePort, path: str, values: dict[str, Value]
) -> Iterator[Verdict]:
    where: Path = ("spec", "url")
    scheme = values["scheme"]
    if svc.kuberay:
        if scheme == "https":
            yield _violation("endpoint-ray-https", values, where)
        bases = {(p.rstrip("/") + OPENAI_BASE) for p in svc.route_prefixes} or {OPENAI_BASE}
    else:
        reaches = reach(ctx, svc, entry)
        missed = _unreached(reaches)
        if missed is not None:
            yield _violation("endpoint-misses-engine", {**values, **_miss(svc, missed)}, where)
        engines = [e for r in reaches if r.reaches for e in r.engines]
        tls = [e for e in engines if e.engine.get("ssl_certfile")]
        if scheme == "https" and engines and not tls:
            engine = f"{engines[0].label} of {engines[0].obj.resource}"
            yield _violation("endpoint-https-plain", {**values, "engine": engine}, where)
        if scheme == "http" and tls:
            engine = f"{tls[0].label} of {tls[0].obj.resource}"
            yield _violation("endpoint-http-tls", {**values, "engine": engine}, where)
        bases = {OPENAI_BASE}
    stripped = path.rstrip("/")
    if stripped and stripped not in bases:
        values = {**values, "path": path, "bases": tuple(sorted(bases))}
        yield _violation("endpoint-path", values, where)


def _judge_rayservice(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    svc = next(
        (s for s in services(ctx).values() if s.kuberay and s.obj is obj),
        None,
    )
    if svc is None or svc.proxy_port is None:
        return
    for p in svc.ports:
        if p.name == "serve" and p.port is not None and p.port != svc.proxy_port:
            yield Verdict(
                "violation",
                "serve-port-not-proxy",
                values={"service": svc.label, "serve_port": p.port},
                thresholds={"proxy_port": svc.proxy_port},
                path=("spec", "rayClusterConfig", "headGroupSpec"),
            )


_JUDGES = {
    "Service": _judge_service,
    "Ingress": _judge_ingress,
    "HTTPRoute": _judge_route,
    "ModelEndpoint": _judge_endpoint,
    "RayService": _judge_rayservice,
}


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Exported endpoints, routes and Services lead to the port the engine serves on."""
    found = _JUDGES.get(obj.kind)
    if found is not None and (obj.kind != "Service" or is_builtin(obj)):  # not Knative's
        yield from found(ctx, obj)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K021 message quotes beyond its values: where a port's traffic goes instead
    of the engine, the proxy port, KubeRay's convention and the OpenAI API bases."""
    v = verdict.values
    out = {
        "convention": f" (KubeRay's convention, {KUBERAY_SERVE_SOURCE})"
        if v.get("kuberay")
        else "",
        "base_list": ", ".join(cast(tuple[str, ...], v.get("bases", ()))),
    }
    if verdict.reason.endswith("-misses-engine"):
        out["miss"] = _miss_text(v)
    return out


RULE = folder_rule(__name__, worded(judge, fields))
