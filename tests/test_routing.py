"""Routing as code (issue 36 item 1): a model behind the Gateway API Inference Extension.

The example stack (stacks/examples/inference-gateway/Pulumi.staging.yaml) runs under Pulumi's
mocks: CRDs before the controller, the controller before the Gateway and the pool, the
pool after the engines; the rendered Gateway, HTTPRoute and InferencePool validate against
the CRD schemas the stack applies (copied from the pinned tags), with unknown fields
rejected; the deploy rehearsal passes and fails where it should; G001 and G002 read what
the stack registers (a mutation of the timeout or the selector is found).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from _schemas import schema_errors, validators_of
from _stacks import ROOT, closure

from gpustrata.catalog.charts import chart_release, pod_placement
from gpustrata.catalog.gateway import gateway_crds, gateway_release
from gpustrata.planning.build import plan_spec
from gpustrata.render import routing
from gpustrata.render.foundation import SYSTEM_SELECTOR
from gpustrata.render.from_plan import workload_objects
from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata.spec.loader import validate_stack
from gpustrata_policies import evaluate, objects_from_pulumi
from gpustrata_policies.rehearsal import rehearse

EXAMPLE = ROOT / "stacks" / "examples" / "inference-gateway" / "Pulumi.staging.yaml"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["config"][
        "gpustrata:stack"
    ]
    return doc


@cache
def _registered() -> tuple[Registered, ...]:
    return tuple(run_program(_doc(), stack="staging", program=ROOT / "__main__.py"))


def _by_type(token: str) -> list[Registered]:
    return [r for r in _registered() if r.type == token]


def _plan(doc: dict[str, Any] | None = None) -> Any:
    return plan_spec(validate_stack(doc or _doc(), file=str(EXAMPLE)))


# ----------------------------------------------------------------------------- spec


def test_service_routing_stays_the_default() -> None:
    doc = _doc()
    del doc["models"][0]["routing"]
    plan = _plan(doc)
    assert plan.models["llama-8b"].spec.routing.mode == "service"
    assert plan.models["llama-8b"].route_timeout is None
    assert routing.routing_objects(plan) == []
    resources = run_program(doc, stack="staging", program=ROOT / "__main__.py")
    routed = {"gpustrata:index:InferenceGateway", "gpustrata:index:InferenceRoute"}
    assert not [r for r in resources if r.type in routed or "gateway" in r.type]


@pytest.mark.parametrize(
    ("change", "where", "says"),
    [
        (
            lambda d: d["models"][0]["routing"]["scorers"].append({"name": "prefix-cache"}),
            "models[0].routing.scorers",
            "scorer prefix-cache is listed twice",
        ),
        (
            lambda d: d["models"][0]["routing"].update(scorers=[{"name": "lora"}]),
            "models[0].routing.scorers[0].name",
            "'queue', 'kv-cache-utilization' or 'prefix-cache'",
        ),
        (
            lambda d: d.update(inference_gateway={"install": False}),
            "inference_gateway.install",
            "nothing else installs the Gateway API",
        ),
        (
            lambda d: d["models"][0]["routing"].update(request_timeout="5 minutes"),
            "models[0].routing.request_timeout",
            "5 minutes",
        ),
    ],
    ids=["scorer-twice", "unknown-scorer", "no-install-on-create", "bad-timeout"],
)
def test_bad_routing_is_refused_with_path_and_fix(change: Any, where: str, says: str) -> None:
    from gpustrata.core.errors import StackError

    doc = _doc()
    change(doc)
    with pytest.raises(StackError) as err:
        validate_stack(doc, file=str(EXAMPLE))
    text = str(err.value)
    assert where in text and says in text, text


def test_ray_models_cannot_take_the_gateway() -> None:
    from gpustrata.core.errors import StackError

    doc = _doc()
    doc["kuberay"] = {"enabled": True}
    doc["models"][0]["runtime"] = "rayservice"
    with pytest.raises(StackError) as err:
        validate_stack(doc, file=str(EXAMPLE))
    assert "needs runtime deployment (got rayservice)" in str(err.value)


# ----------------------------------------------------------------------------- plan


def test_route_timeout_comes_from_the_longest_generation() -> None:
    plan = _plan()
    mp = plan.models["llama-8b"]
    derived = next(d for d in plan.derived if d.key == "models.llama-8b.routeTimeout")
    assert derived.source == "formula" and derived.value == mp.route_timeout
    assert "8,191 tokens (max_model_len 8192 - 1)" in derived.why
    assert "8 sequences" in derived.why  # max_num_seqs of the example
    seconds = int(derived.why.split(" = ")[1].split(" s")[0].replace(",", ""))
    minutes = int(str(mp.route_timeout).removesuffix("m"))
    assert (minutes - 1) * 60 < seconds <= minutes * 60
    doc = _doc()
    doc["models"][0]["engine"]["max_model_len"] = 4096  # half the answer: a shorter route
    shorter = _plan(doc).models["llama-8b"].route_timeout
    assert int(str(shorter).removesuffix("m")) < minutes
    doc["models"][0]["routing"]["request_timeout"] = "0s"
    assert _plan(doc).models["llama-8b"].route_timeout == "0s"


# ----------------------------------------------------------------------------- render


def test_pool_selects_the_engines_and_values_are_read_off_it() -> None:
    plan = _plan()
    mp = plan.models["llama-8b"]
    objects = routing.routing_objects(plan)
    deployment = next(o for o in workload_objects(plan) if o["kind"] == "Deployment")
    pool = next(o for o in objects if o["kind"] == "InferencePool")
    assert pool["spec"]["selector"] == deployment["spec"]["selector"]
    port = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert pool["spec"]["targetPorts"] == [{"number": int(port[port.index("--port") + 1])}]
    values = routing.pool_values(mp, plan)
    assert (
        values["inferencePool"]["modelServers"]["matchLabels"]
        == (pool["spec"]["selector"]["matchLabels"])
    )
    assert values["inferencePool"]["targetPorts"] == pool["spec"]["targetPorts"]
    assert values["provider"]["name"] == "istio"
    assert values["experimentalHttpRoute"]["enabled"] is False
    # Sized for a 4-vCPU system node, not the chart's 4 CPU / 8 GiB request.
    assert values["inferenceExtension"]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"memory": "4Gi"},
    }
    config = yaml.safe_load(
        values["inferenceExtension"]["pluginsCustomConfig"][routing.PLUGINS_FILE]
    )
    assert values["inferenceExtension"]["pluginsConfigFile"] == routing.PLUGINS_FILE
    profile = config["schedulingProfiles"][0]["plugins"]
    assert profile == [
        {"pluginRef": "prefix-cache-scorer", "weight": 3},
        {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
    ]
    assert "queue-scorer" not in {p["type"] for p in config["plugins"]}
    route = next(o for o in objects if o["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["timeouts"] == {"request": mp.route_timeout}
    gateway = next(o for o in objects if o["kind"] == "Gateway")
    # In-cluster by default: no cloud load balancer unless asked for.
    assert gateway["metadata"]["annotations"] == {"networking.istio.io/service-type": "ClusterIP"}
    assert gateway["spec"]["gatewayClassName"] == "istio"
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == pool["metadata"]["name"]


def test_controllers_land_on_the_system_pool() -> None:
    plan = _plan()
    release = gateway_release()
    istiod = chart_release(release.controller_chart, release.implementation_version)
    picker = chart_release(release.chart, release.extension_version)
    assert istiod is not None and picker is not None
    placed = pod_placement(istiod.pods[0], routing.controller_values(plan))
    assert SYSTEM_SELECTOR.items() <= dict(placed.node_selector).items()
    # The Gateway's proxy, which istiod deploys, takes an overlay onto the system pool.
    options, gateway = routing.gateway_objects(plan)
    assert gateway["spec"]["infrastructure"]["parametersRef"] == {
        "group": "",
        "kind": "ConfigMap",
        "name": options["metadata"]["name"],
    }
    overlay = yaml.safe_load(options["data"]["deployment"])
    assert overlay["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM_SELECTOR
    kubernetes_validate.validate(options, "1.34", strict=True)
    assert routing.controller_values(plan)["env"] == {
        "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"
    }
    epp = pod_placement(picker.pods[0], routing.pool_values(plan.models["llama-8b"], plan))
    exprs = [e for t in epp.required_affinity for e in t["matchExpressions"]]
    assert exprs == [{"key": "gpustrata.io/pool", "operator": "In", "values": ["system"]}]
    assert epp.replicas == 1


def _validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    return validators_of(gateway_crds())


def _errors(validators: Any, obj: dict[str, Any]) -> list[str]:
    return schema_errors(validators[(obj["apiVersion"], obj["kind"])], obj)


def test_rendered_and_registered_objects_validate_against_the_pinned_crds() -> None:
    validators = _validators()
    rendered = [
        o
        for o in routing.routing_objects(_plan())
        if "gateway.networking" in o["apiVersion"] or o["kind"] == "InferencePool"
    ]
    registered = [
        o
        for o in objects_from_pulumi((r.type, r.name, r.inputs) for r in _registered())
        if o["kind"] in {"Gateway", "HTTPRoute", "InferencePool"}
    ]
    for objects in (rendered, registered):
        assert sorted(o["kind"] for o in objects) == ["Gateway", "HTTPRoute", "InferencePool"]
        for obj in objects:
            assert not _errors(validators, obj), (obj["kind"], _errors(validators, obj))
    # The schema rejects what the API server would: a pool without a port, an unknown field.
    pool = copy.deepcopy(next(o for o in rendered if o["kind"] == "InferencePool"))
    pool["spec"]["targetPorts"] = []
    pool["spec"]["selectorLabels"] = {"app": "x"}
    problems = _errors(validators, pool)
    assert any("targetPorts" in p for p in problems) and any(
        "selectorLabels" in p for p in problems
    )
    route = copy.deepcopy(next(o for o in rendered if o["kind"] == "HTTPRoute"))
    route["spec"]["rules"][0]["timeouts"]["request"] = "5 minutes"
    assert any("timeouts.request" in p for p in _errors(validators, route))
    # The CRDs themselves are valid Kubernetes objects at the stack's version.
    for crd in gateway_crds():
        kubernetes_validate.validate(dict(crd), "1.34", strict=True)


# ----------------------------------------------------------------------------- Pulumi mocks


def test_install_order_crds_controller_gateway_pool_route() -> None:
    res = {r.name: r for r in _registered()}
    crds = {r.name for r in _by_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")}
    assert len(crds) == len(gateway_crds()) == 10
    istiod = "gpustrata-inference-gateway-istiod"
    base = "gpustrata-inference-gateway-base"
    assert crds <= closure(res, istiod) and base in closure(res, istiod)
    gateway = _by_type("kubernetes:gateway.networking.k8s.io/v1:Gateway")[0].name
    options = _by_type("kubernetes:core/v1:ConfigMap")
    assert [o.name for o in options] == ["gpustrata-gateway-inference-configmap"]
    assert {istiod, options[0].name, *crds} <= closure(res, gateway)
    route = "gpustrata-llama-8b-route"
    pool_release = "gpustrata-llama-8b-route-release"
    # The pool after the gateway, its CRDs, and the engines (the Deployment's component).
    engines = "gpustrata-llama-8b-deployment"
    assert {gateway, istiod, engines, *crds} <= closure(res, pool_release)
    assert pool_release in closure(res, "gpustrata-llama-8b-route-httproute")
    assert res[route].inputs["description"]["kind"] == "InferencePool"
    order = [r.name for r in _registered()]
    assert max(order.index(c) for c in crds) < order.index(istiod) < order.index(pool_release)
    chart = res[pool_release].inputs
    assert chart["chart"] == f"{gateway_release().repository}/inferencepool"
    assert chart["version"] == gateway_release().extension_version


def test_rehearsal_passes_and_needs_the_crds_first() -> None:
    records = list(_registered())
    rehearsal = rehearse(records)
    assert rehearsal.blockers == []
    steps = {s.resource: s for s in rehearsal.steps}
    assert steps["gpustrata-inference-gateway-istiod"].status == "ok"
    assert steps["gpustrata-llama-8b-route-release"].message == "1 Pod(s) have a node"
    # Without the CRD step (as a stack that forgot them), the Gateway is refused.
    bare = [
        r
        for r in records
        if r.type != "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    ]
    broken = rehearse(bare)
    first = broken.first_blocker
    assert first is not None and first.status == "would-fail"
    assert first.resource == "gpustrata-gateway-inference"
    assert "no matches for kind Gateway" in first.message


def _report(objects: list[dict[str, Any]]) -> Any:
    return evaluate(objects, environment="staging", rules=None)


def test_g001_and_g002_read_what_the_stack_registers() -> None:
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in _registered())
    report = _report(objects)
    ours = [f for f in report.findings if f.rule in {"G001", "G002", "K017", "K018"}]
    assert ours == []
    assert not [n for n in report.not_evaluated if n.rule in {"G001", "G002", "K018"}]
    # A route cut shorter than the answers: G001 says so.
    cut = copy.deepcopy(objects)
    route = next(o for o in cut if o["kind"] == "HTTPRoute")
    route["spec"]["rules"][0]["timeouts"]["request"] = "60s"
    g001 = [f for f in _report(cut).findings if f.rule == "G001"]
    assert len(g001) == 1 and "60s" in g001[0].message
    # A pool that selects no engine: G002 says so.
    miss = copy.deepcopy(objects)
    pool = next(o for o in miss if o["kind"] == "InferencePool")
    pool["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "llama-70b"}
    assert [f.rule for f in _report(miss).findings if f.rule == "G002"] == ["G002"]


def test_gateway_pins_are_catalogued_together_and_cited() -> None:
    import re

    release = gateway_release()
    cite = re.compile(r"^[\w.-]+/[\w.-]+@[\w.-]+:\S+$")
    assert release.sources and all(cite.match(s) for s in release.sources), release.sources
    # The copied CRDs are those of the pinned tags (folder names carry the version).
    assert release.crd_dirs == (
        f"crds/gateway-api-{release.gateway_api_version}",
        f"crds/gateway-api-inference-extension-{release.extension_version}",
    )
    assert any(release.gateway_api_version in s for s in release.sources)
    # Every chart the stack installs has its Pods and keys in the chart catalogue.
    for chart, version in (
        (release.crd_chart, release.implementation_version),
        (release.controller_chart, release.implementation_version),
        (release.chart, release.extension_version),
    ):
        assert chart_release(chart, version) is not None, (chart, version)
    # The pool's API version is one the copied CRDs serve.
    served = {
        f"{c['spec']['group']}/{v['name']}"
        for c in gateway_crds()
        if c["spec"]["names"]["kind"] == "InferencePool"
        for v in c["spec"]["versions"]
        if v["served"]
    }
    assert release.pool_api_version in served


def test_one_gateway_per_namespace_and_an_existing_cluster_keeps_its_own() -> None:
    doc = _doc()
    second = copy.deepcopy(doc["models"][0])
    second.update(name="llama-8b-b", namespace="team-b")
    third = copy.deepcopy(doc["models"][0])
    third.update(name="llama-8b-c")  # same namespace as the first: same Gateway
    doc["models"] += [second, third]
    doc["node_pools"][0].update(min_size=4, max_size=6)
    plan = _plan(doc)
    objects = routing.routing_objects(plan)
    gateways = [
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
        if o["kind"] == "Gateway"
    ]
    assert gateways == [("inference", "inference-gateway"), ("team-b", "inference-gateway")]
    pools = [o["metadata"]["name"] for o in objects if o["kind"] == "InferencePool"]
    assert pools == ["llama-8b-pool", "llama-8b-b-pool", "llama-8b-c-pool"]
    assert sum(o["kind"] == "CustomResourceDefinition" for o in objects) == 10  # once
    # An existing cluster that runs the gateway already: nothing installed, no placement.
    doc = _doc()
    doc["cluster"] = {"name": "shared", "mode": "existing", "kubernetes_version": "1.34"}
    doc["inference_gateway"] = {"install": False, "service_type": "LoadBalancer"}
    plan = _plan(doc)
    objects = routing.routing_objects(plan)
    assert sorted({o["kind"] for o in objects}) == [
        "Gateway",
        "HTTPRoute",
        "HelmRelease",
        "InferencePool",
    ]
    gateway = next(o for o in objects if o["kind"] == "Gateway")
    assert gateway["metadata"]["annotations"]["networking.istio.io/service-type"] == "LoadBalancer"
    values = routing.pool_values(plan.models["llama-8b"], plan)
    assert "affinity" not in values["inferenceExtension"]  # the cluster's nodes, not ours
    resources = run_program(doc, stack="staging", program=ROOT / "__main__.py")
    types = {r.type for r in resources}
    assert "gpustrata:index:InferenceGateway" not in types
    assert "gpustrata:index:InferenceRoute" in types


def test_a_multi_node_engine_is_reached_through_its_leaders() -> None:
    """A model spread over a LeaderWorkerSet (stacks/examples/Pulumi.multinode.yaml): only
    the leaders serve HTTP, so the pool selects them as the model's Service does, and G002
    finds the vLLM engine on the pool's port."""
    path = ROOT / "stacks" / "examples" / "Pulumi.multinode.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))["config"]["gpustrata:stack"]
    doc["models"] = doc["models"][:1]
    doc["models"][0]["routing"] = {"mode": "inference-gateway"}
    plan = plan_spec(validate_stack(doc, file=str(path)))
    mp = plan.models[doc["models"][0]["name"]]
    assert mp.multi_node is not None
    objects = [*workload_objects(plan), *routing.routing_objects(plan)]
    service = next(o for o in objects if o["kind"] == "Service")
    pool = next(o for o in objects if o["kind"] == "InferencePool")
    assert pool["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert pool["spec"]["selector"]["matchLabels"]["role"] == "leader"
    report = evaluate(objects, environment="prod")
    assert not [f for f in report.findings if f.rule in {"G001", "G002"}]
    assert not [n for n in report.not_evaluated if n.rule == "G002"]
    # A pool that misses the leaders (no Pod has the role) is reported.
    pool["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": mp.name, "role": "head"}
    assert [f.rule for f in evaluate(objects, environment="prod").findings if f.rule == "G002"]
