"""G002 inference-pool-matches-servers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import MANDATORY, fmt, pool_members, vllm_pods_in
from gpustrata_policies.view.engines import EngineSite
from gpustrata_policies.view.gateways import GIE_CRDS, inference_pool
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list


def _listens(site: EngineSite) -> str:
    engine = site.engine
    how = f"--port {engine.port}" if engine.get("port") is not None else "--port unset"
    return f"{engine.port} ({how}: vLLM's default)" if "unset" in how else f"{engine.port} ({how})"


def _labels(labels: Any) -> str:
    if not isinstance(labels, Mapping) or not labels:
        return "{}"
    return ", ".join(f"{k}={fmt(v)}" for k, v in labels.items())


def _sidecar_serves(pod: PodRef, sites: list[EngineSite], ports: tuple[int, ...]) -> bool:
    engines = {id(s.container) for s in sites}
    for c in pod.containers(init=True):
        if id(c) in engines:
            continue
        for entry in as_list(c.raw.get("ports"), f"ports of {c.label}"):
            if isinstance(entry, Mapping) and entry.get("containerPort") in ports:
                return True
    return False


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """An InferencePool selects vLLM Pods and targets the port their engines serve on."""
    pool = inference_pool(obj)
    if pool is None:
        return
    members, others = pool_members(ctx, pool)
    if not members:
        if others:
            return  # it selects Pods of another server (or a simulator): not vLLM's to judge
        candidates = vllm_pods_in(ctx, obj.namespace)
        if not candidates:
            return  # the Pods are not in the input
        pod, _ = candidates[0]
        yield ctx.violation(
            obj,
            f"InferencePool {obj.name} selects {_labels(pool.selector.get('matchLabels'))}, "
            f"which no Pod of namespace {obj.namespace} carries, so it has no endpoints; the "
            f"vLLM Pods here ({pod.obj.resource}, labels {_labels(pod.labels)}) get none of "
            "its traffic. Select the engine Pods' labels",
            ("spec", "selector"),
        )
        return
    if not pool.ports:
        return  # no port written: the API server rejects the pool (its CRD requires one)
    for pod, sites in members:
        if _sidecar_serves(pod, sites, pool.ports):
            continue  # a proxy in the Pod (llm-d's routing sidecar) listens on the port
        for site in sites:
            if site.engine.port in pool.ports:
                continue
            ports = ", ".join(str(p) for p in pool.ports)
            yield ctx.violation(
                obj,
                f"InferencePool {obj.name} sends requests to port {ports}, but {site.label} of "
                f"{pod.obj.resource} (selected by it) listens on {_listens(site)}; the gateway "
                f"gets connection refused from every endpoint. Target port {site.engine.port}",
                pool.ports_path,
            )
            return


RULE = Rule(
    RuleMeta(
        id="G002",
        name="inference-pool-matches-servers",
        title="InferencePools select the vLLM Pods and target the port they serve on",
        layer="routing",
        severity="high",
        default_enforcement=MANDATORY,
        scope="stack",
        rationale=(
            "A Gateway API Inference Extension InferencePool is the backend an HTTPRoute "
            "sends model traffic to: the endpoint picker chooses one of the Pods its selector "
            "matches and the gateway connects to that Pod on the pool's target port. A "
            "selector that matches no Pod leaves the route without endpoints (503s), and a "
            "target port other than the one vLLM listens on (--port, 8000 by default) gives "
            "connection refused from every Pod while all of them are Ready. Read here: the "
            "pool's selector (v1 selector.matchLabels; v1alpha2 a label map) against the "
            "labels of the Pods of its namespace that run vLLM, and its target ports (v1 "
            "targetPorts[].number; v1alpha2 targetPortNumber) against each selected engine's "
            f"port ({GIE_CRDS}). Silent when the namespace's Pods are not in the input, when "
            "the selector picks Pods of another server, and when another container of the "
            "Pod declares the target port (a proxy in front of vLLM, as llm-d's routing "
            "sidecar)."
        ),
        fix=(
            "Copy the engine Deployment's pod template labels into the pool's selector, and "
            "set the pool's target port to the engine's --port (8000 when unset)."
        ),
        references=(
            "https://gateway-api-inference-extension.sigs.k8s.io/api-types/inferencepool/",
            "https://github.com/kubernetes-sigs/gateway-api-inference-extension/blob/v1.0.0/"
            "config/crd/bases/inference.networking.k8s.io_inferencepools.yaml",
        ),
    ),
    check,
)
