"""Plan -> the inference gateway's objects and chart values (pure; no Pulumi).

A model with ``routing.mode: inference-gateway`` is reached through the Gateway API
Inference Extension at the catalogued release (:mod:`gpustrata.catalog.gateway`):

1. the Gateway API (standard channel) and GAIE CustomResourceDefinitions, applied from the
   copied upstream files;
2. the gateway implementation: Istio's ``base`` chart (its CRDs) and ``istiod`` with its
   inference-extension switch on, the controller on the system pool;
3. per namespace, a ``Gateway`` of Istio's class (istiod deploys its proxy);
4. per model, GAIE's ``inferencepool`` chart: the InferencePool selecting the model's
   vLLM Pods on their port, and the endpoint picker with the typed scorers; then an
   ``HTTPRoute`` from the Gateway to the pool, its timeout derived from the model's longest
   generation (:mod:`gpustrata.planning.routing`).

The InferencePool is rendered here, and the chart's values are read off it through the
catalogued values paths, so what the rules check (G001, G002) and what the chart creates
come from one object. Values keys come from ``charts.yaml``; none is spelled here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gpustrata.catalog.charts import ChartRelease, chart_release, values_at
from gpustrata.catalog.gateway import GatewayRelease, gateway_crds, gateway_release
from gpustrata.core.helmmerge import merge_helm_values
from gpustrata.core.quantity import format_bytes, parse_quantity
from gpustrata.planning.plan_types import ModelPlan, StackPlan
from gpustrata.render.foundation import system_pool_placement, system_values
from gpustrata.render.from_plan import helm_release_object
from gpustrata.render.workloads import APP_LABEL, MANAGED_BY, ROLE_LABEL, VLLM_PORT
from gpustrata.spec.routing import ModelRoutingSpec

__all__ = [
    "GATEWAY_API",
    "PLUGINS_FILE",
    "controller_values",
    "crd_objects",
    "gateway_endpoint",
    "gateway_models",
    "gateway_namespaces",
    "gateway_object",
    "gateway_objects",
    "gateway_options_object",
    "http_route_object",
    "inference_pool_object",
    "plugins_config",
    "pool_name",
    "pool_values",
    "release",
    "routing_objects",
]

GATEWAY_API = "gateway.networking.k8s.io/v1"
_GROUP = GATEWAY_API.split("/", 1)[0]
PLUGINS_FILE = "gpustrata-plugins.yaml"
"""The EndpointPickerConfig file the stack adds to the picker's ConfigMap."""
_SCORER_PLUGINS = {
    "queue": "queue-scorer",
    "kv-cache-utilization": "kv-cache-utilization-scorer",
    "prefix-cache": "prefix-cache-scorer",
}
"""Scorer name in the spec -> plugin type of GAIE's EPP at the pinned release
(config/charts/epplib/templates/_config.yaml)."""


def _release() -> GatewayRelease:
    return gateway_release()


def release() -> GatewayRelease:
    """The catalogued inference gateway release the objects are rendered for."""
    return gateway_release()


def _chart(name: str, version: str) -> ChartRelease:
    found = chart_release(name, version)
    if found is None:  # the catalogue pins them together; a test keeps them so
        raise LookupError(f"chart {name} {version} is not in the chart catalogue")
    return found


def _pool_chart() -> ChartRelease:
    return _chart(_release().chart, _release().extension_version)


def _controller_chart() -> ChartRelease:
    release = _release()
    return _chart(release.controller_chart, release.implementation_version)


def gateway_models(plan: StackPlan) -> list[ModelPlan]:
    """The models routed through the inference gateway, in stack order."""
    return [m for m in plan.models.values() if m.spec.routing.mode == "inference-gateway"]


def gateway_namespaces(plan: StackPlan) -> list[str]:
    """Namespaces that get a Gateway (each one with such a model), in stack order."""
    return list(dict.fromkeys(m.spec.namespace for m in gateway_models(plan)))


def crd_objects() -> list[dict[str, Any]]:
    """The CustomResourceDefinitions the stack applies (Gateway API standard channel, then
    GAIE), unchanged from the pinned tags."""
    return [dict(crd) for crd in gateway_crds()]


def controller_values(plan: StackPlan) -> dict[str, Any]:
    """istiod values: the inference extension on (the catalogued env switch), the
    controller on the system pool (create mode)."""
    chart = _controller_chart()
    env = str(chart.facts["inference_extension_env"])
    values: dict[str, Any] = {"env": {env: "true"}}
    if system_pool_placement(plan.spec) is None:
        return values
    return system_values(chart.chart, chart.version, values)


def pool_name(mp: ModelPlan) -> str:
    """Name of the model's InferencePool (and of its inferencepool release)."""
    return f"{mp.name}-pool"


def _picker_name(mp: ModelPlan) -> str:
    return f"{pool_name(mp)}{_pool_chart().facts['picker_suffix']}"


def _serving_labels(mp: ModelPlan) -> dict[str, str]:
    """The labels of the Pods that answer HTTP, as the model's Service selects them: every
    engine Pod, or only the leaders of a multi-node LeaderWorkerSet (workers join the
    leader's engine and listen on no HTTP port)."""
    labels = {APP_LABEL: mp.name}
    if mp.multi_node is not None:
        labels[ROLE_LABEL] = "leader"
    return labels


def inference_pool_object(mp: ModelPlan) -> dict[str, Any]:
    """The InferencePool the inferencepool chart renders for *mp*: the Deployment's own
    selector (the vLLM Pods), the port ``vllm serve`` listens on, the picker the chart
    deploys beside it."""
    chart = _pool_chart()
    return {
        "apiVersion": _release().pool_api_version,
        "kind": "InferencePool",
        "metadata": {"name": pool_name(mp), "namespace": mp.spec.namespace},
        "spec": {
            "targetPorts": [{"number": VLLM_PORT}],
            "appProtocol": "http",
            "selector": {"matchLabels": _serving_labels(mp)},
            "endpointPickerRef": {
                "name": _picker_name(mp),
                "port": {"number": int(chart.facts["picker_port"])},
                "failureMode": mp.spec.routing.failure_mode,
            },
        },
    }


def plugins_config(routing: ModelRoutingSpec) -> str:
    """The endpoint picker's EndpointPickerConfig: the chart's default plugins with only
    the chosen scorers, at their weights, in the default scheduling profile."""
    chosen = [(_SCORER_PLUGINS[s.name], s.weight) for s in routing.scorers]
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [
            *({"type": plugin} for plugin, _ in chosen),
            {"type": "metrics-data-source"},
            {"type": "core-metrics-extractor"},
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [{"pluginRef": plugin, "weight": w} for plugin, w in chosen],
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def pool_values(mp: ModelPlan, plan: StackPlan) -> dict[str, Any]:
    """inferencepool chart values, read off :func:`inference_pool_object` through the
    catalogued values paths, with the picker's scorers, size and placement."""
    chart = _pool_chart()
    paths: Mapping[str, Any] = chart.facts["pool_values"]
    pool = inference_pool_object(mp)
    spec = pool["spec"]
    routing = mp.spec.routing
    memory = routing.picker_memory
    values = values_at(
        {
            paths["selector"]: dict(spec["selector"]["matchLabels"]),
            paths["target_ports"]: [dict(p) for p in spec["targetPorts"]],
            paths["provider"]: _release().provider,
            paths["picker_port"]: spec["endpointPickerRef"]["port"]["number"],
            paths["failure_mode"]: spec["endpointPickerRef"]["failureMode"],
            paths["plugins_file"]: PLUGINS_FILE,
            paths["plugins_custom"]: {PLUGINS_FILE: plugins_config(routing)},
            paths["resources"]: {
                "requests": {"cpu": routing.picker_cpu, "memory": memory},
                "limits": {"memory": _twice(memory)},
            },
            paths["route"]: False,  # the stack renders the HTTPRoute (its timeout)
        }
    )
    pod = chart.pods[0]
    if pod.values_replicas:
        values = merge_helm_values(
            values, values_at({pod.values_replicas: routing.picker_replicas})
        )
    if system_pool_placement(plan.spec) is None:
        return values
    return system_values(chart.chart, chart.version, values)


def _twice(quantity: str) -> str:
    amount = parse_quantity(quantity)
    if amount is None:  # the spec's Quantity pattern made it parseable
        raise ValueError(f"picker_memory {quantity!r} is not a quantity")
    return format_bytes(amount * 2)


def gateway_options_name(gateway: str) -> str:
    """Name of the ConfigMap that overlays a Gateway's proxy Deployment."""
    return f"{gateway}-options"


def gateway_options_object(
    gateway: str, namespace: str, node_selector: Mapping[str, str]
) -> dict[str, Any]:
    """The ConfigMap the Gateway's ``parametersRef`` names: an overlay of the proxy
    Deployment istiod renders that puts its Pods on *node_selector*'s nodes."""
    overlay = _controller_chart().facts["overlay"]
    patch = {"spec": {"template": {"spec": {"nodeSelector": dict(node_selector)}}}}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": gateway_options_name(gateway),
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
        },
        "data": {str(overlay["deployment_key"]): yaml.safe_dump(patch, sort_keys=False)},
    }


def gateway_object(
    name: str, namespace: str, service_type: str = "ClusterIP", *, options: bool = False
) -> dict[str, Any]:
    """A Gateway of the implementation's class with one HTTP listener on port 80 (GAIE's
    guide, config/manifests/gateway/istio/gateway.yaml); routes of its namespace attach.
    Its proxy Service gets *service_type* through the implementation's annotation; with
    *options*, its proxy Deployment takes :func:`gateway_options_object`'s overlay."""
    facts = _controller_chart().facts
    gateway_class = str(facts["gateway_class"])
    annotations = {str(facts["service_type_annotation"]): service_type}
    infrastructure: dict[str, Any] = {}
    if options:
        kind = str(facts["overlay"]["parameters_kind"])
        ref = {"group": "", "kind": kind, "name": gateway_options_name(name)}
        infrastructure = {"infrastructure": {"parametersRef": ref}}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "annotations": annotations,
        },
        "spec": {
            "gatewayClassName": gateway_class,
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            **infrastructure,
        },
    }


def gateway_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """Per namespace with an inference-gateway model: the proxy overlay ConfigMap (create
    mode: the proxy on the system pool) and the Gateway, in creation order."""
    spec = plan.spec.inference_gateway
    placement = system_pool_placement(plan.spec)
    out: list[dict[str, Any]] = []
    for ns in gateway_namespaces(plan):
        if placement is not None:
            out.append(gateway_options_object(spec.gateway_name, ns, placement))
        gateway = gateway_object(
            spec.gateway_name, ns, spec.service_type, options=placement is not None
        )
        out.append(gateway)
    return out


def http_route_object(mp: ModelPlan, gateway: str) -> dict[str, Any]:
    """The HTTPRoute from the namespace's Gateway to the model's InferencePool, with the
    planner's request timeout (G001)."""
    pool = inference_pool_object(mp)
    group = pool["apiVersion"].split("/", 1)[0]
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
        "backendRefs": [{"group": group, "kind": "InferencePool", "name": pool_name(mp)}],
    }
    if mp.route_timeout is not None:
        rule["timeouts"] = {"request": mp.route_timeout}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": {"name": mp.name, "namespace": mp.spec.namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "parentRefs": [
                {"group": GATEWAY_API.split("/")[0], "kind": "Gateway", "name": gateway}
            ],
            "rules": [rule],
        },
    }


def gateway_endpoint(gateway: str, namespace: str) -> str:
    """In-cluster OpenAI base URL of the Gateway's proxy Service (istiod names it
    ``<gateway>-<class>``, port 80)."""
    suffix = str(_controller_chart().facts["gateway_service_suffix"])
    return f"http://{gateway}{suffix}.{namespace}.svc.cluster.local:80/v1"


def routing_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """What the stack deploys for its inference-gateway models, in creation order, as
    `render` prints it: CRDs, the controller charts, Gateways, per model the inferencepool
    release, its InferencePool and its HTTPRoute."""
    models = gateway_models(plan)
    if not models:
        return []
    release, spec = _release(), plan.spec.inference_gateway
    out: list[dict[str, Any]] = []
    if spec.install:
        out += crd_objects()
        repo, version = release.implementation_repository, release.implementation_version
        out.append(helm_release_object(release.crd_chart, version, repo, spec.namespace, {}))
        out.append(
            helm_release_object(
                release.controller_chart, version, repo, spec.namespace, controller_values(plan)
            )
        )
    out += gateway_objects(plan)
    for mp in models:
        out.append(
            helm_release_object(
                release.chart,
                release.extension_version,
                release.repository,
                mp.spec.namespace,
                pool_values(mp, plan),
            )
        )
        out.append(inference_pool_object(mp))
        out.append(http_route_object(mp, spec.gateway_name))
    return out
