"""Services, the ports they expose and whether those ports reach a vLLM engine (K021).

A Service's ports come from the Service object; the Service KubeRay creates for a
RayService (``<name>-serve-svc``) is built as KubeRay v1.7.0 builds it
(``ray-operator/controllers/ray/common/service.go`` ``BuildServeService``: one port per
head-container port named ``serve`` or ``serve-*``, the port number being the container
port; with no ports on the head container, ``getDefaultPorts``' ``serve: 8000``
(``utils/constant.go`` ``DefaultServingPort``); the name from ``utils/util.go``
``GenerateServeServiceName``, or ``spec.serveService.metadata.name``). Ray Serve's HTTP
proxy listens on ``http_options.port`` of ``serveConfigV2``, 8000 when unset
(``ray.serve.config.HTTPOptions``).

What a vLLM engine listens on comes from the one engine reader
(:func:`gpustrata_policies.view.engines.engine_sites`: ``--port``, vLLM's default 8000).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.kinds import is_builtin
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig
from gpustrata_policies.view.vllm_args import serve_config_data

__all__ = [
    "KUBERAY_SERVE_SOURCE",
    "RAY_SERVE_DEFAULT_PORT",
    "Reach",
    "ServicePort",
    "ServiceView",
    "port_number",
    "reach",
    "serve_http_options",
    "services",
]

KUBERAY_SERVE_SOURCE = (
    "ray-project/kuberay@v1.7.0:ray-operator/controllers/ray/common/service.go (BuildServeService)"
)
RAY_SERVE_DEFAULT_PORT = 8000
"""KubeRay's ``DefaultServingPort`` and Ray Serve's default ``http_options.port``."""


@dataclass(frozen=True, slots=True)
class ServicePort:
    """One entry of a Service's ``spec.ports``."""

    name: str | None
    port: int | None
    target: int | str | None
    """``targetPort`` as written (``None``: the same as ``port``)."""
    index: int

    @property
    def effective_target(self) -> int | str | None:
        """``targetPort``, defaulting to ``port``."""
        return self.target if self.target is not None else self.port

    @property
    def label(self) -> str:
        """``port 80 ('http')``."""
        named = f" ('{self.name}')" if self.name else ""
        return f"port {self.port}{named}"


@dataclass(frozen=True, slots=True)
class ServiceView:
    """A Service as the input states it, or as KubeRay would create it."""

    obj: K8sObject
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]
    selector: Mapping[str, Any] | None
    kuberay: bool = False
    """Built from a RayService (KubeRay's serve Service), not a Service object."""
    proxy_port: int | None = None
    """Ray Serve's HTTP proxy port (KubeRay serve Services only)."""
    route_prefixes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``Service llm/vllm`` / ``Service llm/x-serve-svc (KubeRay's, for RayService x)``."""
        text = f"Service {self.namespace}/{self.name}"
        if self.kuberay:
            text += f" (created by KubeRay for RayService {self.obj.name})"
        return text

    def find(self, port: Any) -> ServicePort | None:
        """The entry a backend's port (a number or a port name) names."""
        for p in self.ports:
            if isinstance(port, str) and not port.isdigit():
                if p.name == port:
                    return p
            elif p.port is not None and str(p.port) == str(port):
                return p
        return None

    def numbers(self) -> str:
        """``80 ('http'), 9090 ('metrics')`` for messages."""
        return (
            ", ".join(f"{p.port}" + (f" ('{p.name}')" if p.name else "") for p in self.ports)
            or "none"
        )


def port_number(value: Any) -> int | None:
    """A port as a manifest writes its number (``8000`` or ``"8000"``); None for anything
    else (a name, a boolean, a template)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _service(obj: K8sObject) -> ServiceView:
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    ports = []
    for index, raw in enumerate(as_list(spec.get("ports"), f"spec.ports of {obj.resource}")):
        if raw is UNKNOWN:
            raise UnknownInput(f"spec.ports of {obj.resource}")
        if not isinstance(raw, Mapping):
            continue
        if raw.get("port") is UNKNOWN or raw.get("targetPort") is UNKNOWN:
            raise UnknownInput(f"spec.ports[{index}] of {obj.resource}")
        target = raw.get("targetPort")
        number = port_number(target)
        name = raw.get("name")
        ports.append(
            ServicePort(
                name if isinstance(name, str) else None,
                port_number(raw.get("port")),
                number if number is not None else (target if isinstance(target, str) else None),
                index,
            )
        )
    selector = spec.get("selector")
    if selector is UNKNOWN:
        raise UnknownInput(f"spec.selector of {obj.resource}")
    return ServiceView(
        obj,
        obj.namespace,
        obj.name,
        tuple(ports),
        selector if isinstance(selector, Mapping) else None,
    )


def serve_http_options(obj: K8sObject) -> tuple[int | None, tuple[str, ...]]:
    """(Ray Serve's proxy port, the applications' route prefixes) of a RayService's
    ``serveConfigV2``; the port is ``None`` when the string cannot be read."""
    text = dig(obj.raw, "spec", "serveConfigV2")
    if text is UNKNOWN:
        raise UnknownInput(f"spec.serveConfigV2 of {obj.resource}")
    if not isinstance(text, str):
        return RAY_SERVE_DEFAULT_PORT, ()
    return _http_options(text)


@lru_cache(maxsize=256)
def _http_options(text: str) -> tuple[int | None, tuple[str, ...]]:
    """:func:`serve_http_options` of one ``serveConfigV2`` string, parsed once per distinct
    string (as :func:`~.vllm_args.serve_config` parses it): K021 read each RayService's
    again (5% of the evaluation of the 5,000-object corpus in a profile, issue 35)."""
    try:
        data = serve_config_data(text)
    except Exception:  # an unreadable string: other rules report it
        return None, ()
    data = data if isinstance(data, Mapping) else {}
    options = as_map(data.get("http_options"), "http_options")
    port = options.get("port", RAY_SERVE_DEFAULT_PORT)
    prefixes = []
    for app in as_list(data.get("applications"), "applications"):
        if isinstance(app, Mapping):
            prefix = app.get("route_prefix", "/")
            prefixes.append(prefix if isinstance(prefix, str) else "/")
    return port_number(port), tuple(prefixes)


def _kuberay_serve(obj: K8sObject) -> ServiceView | None:
    head = dig(obj.raw, "spec", "rayClusterConfig", "headGroupSpec", "template", "spec")
    containers = as_list(dig(head, "containers"), "head containers") if head else []
    if not containers or not isinstance(containers[0], Mapping):
        return None
    raw_ports = containers[0].get("ports")
    if raw_ports is UNKNOWN:
        raise UnknownInput(f"ports of the head container of {obj.resource}")
    ports: list[ServicePort] = []
    declared = as_list(raw_ports, "head container ports")
    if not declared:
        ports.append(ServicePort("serve", RAY_SERVE_DEFAULT_PORT, None, 0))
    for index, entry in enumerate(declared):
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("name")
        if isinstance(name, str) and (name == "serve" or name.startswith("serve-")):
            ports.append(ServicePort(name, port_number(entry.get("containerPort")), None, index))
    custom = as_map(dig(obj.raw, "spec", "serveService"), "spec.serveService")
    if not ports and not custom:
        return None  # KubeRay creates no serve Service (it logs an error)
    name = dig(custom, "metadata", "name")
    proxy, prefixes = serve_http_options(obj)
    return ServiceView(
        obj,
        obj.namespace,
        name if isinstance(name, str) and name else f"{obj.name}-serve-svc",
        tuple(ports),
        None,
        kuberay=True,
        proxy_port=proxy,
        route_prefixes=prefixes,
    )


def services(ctx: RuleContext) -> dict[tuple[str, str], ServiceView]:
    """Services by (namespace, name), once per evaluation: Service objects, and the serve
    Service KubeRay creates for each RayService (a Service object of the same name wins)."""

    def build() -> dict[tuple[str, str], ServiceView]:
        index: dict[tuple[str, str], ServiceView] = {}
        for obj in ctx.objects:
            if obj.kind == "RayService":
                found = _kuberay_serve(obj)
                if found is not None:
                    index.setdefault((found.namespace, found.name), found)
        for obj in ctx.objects:
            if is_builtin(obj, "Service"):  # not a Knative Service
                index[(obj.namespace, obj.name)] = _service(obj)
        return index

    found: dict[tuple[str, str], ServiceView] = ctx.memo("k021-services", build)
    return found


@dataclass(frozen=True, slots=True)
class Reach:
    """Where one Service port leads in the Pods it selects that run vLLM."""

    port: ServicePort
    target: int | None
    """The container port the traffic goes to (None: a name no container declares)."""
    engines: tuple[EngineSite, ...]
    """The engines of the selected Pods (with a known port)."""
    sidecar: bool
    """The target is a port another container of the Pod declares."""

    @property
    def reaches(self) -> bool:
        """Does the traffic reach an engine?"""
        return self.target is not None and any(e.engine.port == self.target for e in self.engines)

    def engine_ports(self) -> str:
        """``container 'vllm' of Deployment llm/x listens on 8000 (--port unset: vLLM's
        default)``."""
        parts = []
        for e in self.engines:
            how = (
                f"--port {e.engine.port}"
                if e.engine.get("port") is not None
                else "--port unset: vLLM's default"
            )
            parts.append(f"{e.label} of {e.obj.resource} listens on {e.engine.port} ({how})")
        return "; ".join(parts)


def by_namespace(ctx: RuleContext) -> dict[str, list[K8sObject]]:
    """Every object of the evaluation by namespace, in input order, once per evaluation:
    rules that look for an object's neighbours scanned every object for each (G001/G002's
    InferencePools: 5.6 of 6.5 s on 5,000 objects, issue 35)."""

    def build() -> dict[str, list[K8sObject]]:
        index: dict[str, list[K8sObject]] = {}
        for obj in ctx.objects:
            index.setdefault(obj.namespace, []).append(obj)
        return index

    found: dict[str, list[K8sObject]] = ctx.memo("by-namespace", build)
    return found


def _by_namespace(ctx: RuleContext) -> dict[str, list[K8sObject]]:
    """The objects a Service may select (not core Services, not RayServices), by namespace,
    once per evaluation: each Service walked every object (K021: 2.3 of 4.9 s on 5,000
    objects, issue 35)."""

    def build() -> dict[str, list[K8sObject]]:
        return {
            namespace: [o for o in objs if o.kind != "RayService" and not is_builtin(o, "Service")]
            for namespace, objs in by_namespace(ctx).items()
        }

    found: dict[str, list[K8sObject]] = ctx.memo("k021-by-namespace", build)
    return found


def _selected(ctx: RuleContext, svc: ServiceView) -> Iterator[tuple[PodRef, list[EngineSite]]]:
    selector = svc.selector
    if not selector:
        return
    for obj in _by_namespace(ctx).get(svc.namespace, ()):
        sites = [s for s in engine_sites(ctx, obj) if not s.ray and s.engine.port is not None]
        if not sites:
            continue
        for pod in obj.pods():
            if pod.is_ray:
                continue
            labels = pod.labels
            if all(str(labels.get(k)) == str(v) for k, v in selector.items()):
                mine = [s for s in sites if s.gpu_pod is pod]
                if mine:
                    yield pod, mine


def _container_ports(pod: PodRef) -> list[tuple[Any, Mapping[str, Any]]]:
    out = []
    for c in pod.containers(init=False):
        for entry in as_list(c.raw.get("ports"), f"ports of {c.label}"):
            if isinstance(entry, Mapping):
                out.append((c, entry))
    return out


def reach(ctx: RuleContext, svc: ServiceView, port: ServicePort) -> list[Reach]:
    """Where *port* of *svc* leads, per selected Pod that runs a vLLM engine (empty for a
    KubeRay serve Service, a Service without selector, or one selecting no engine)."""
    out = []
    for pod, sites in _selected(ctx, svc):
        target = port.effective_target
        declared = _container_ports(pod)
        engine_containers = {id(s.container) for s in sites}
        number: int | None
        if isinstance(target, str):
            match = [e for _, e in declared if e.get("name") == target]
            number = port_number(match[0].get("containerPort")) if match else None
        else:
            number = target
        sidecar = any(
            id(c) not in engine_containers and port_number(e.get("containerPort")) == number
            for c, e in declared
        )
        out.append(Reach(port, number, tuple(sites), sidecar))
    return out
