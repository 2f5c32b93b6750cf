"""G002 inference-pool-matches-servers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import (
    fmt,
    object_index,
    pool_members,
    vllm_pods_in,
)
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.endpoints import by_namespace
from gpustrata_policies.view.engines import EngineSite, release_version
from gpustrata_policies.view.gateways import (
    GIE_CRDS,
    KV_USAGE_FLAG,
    PoolView,
    epp_default_metric,
    inference_pool,
    vllm_exports,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, dig
from gpustrata_policies.view.vllm_args import split_image


def _listens(v: Mapping[str, Value]) -> str:
    port = v["engine_port"]
    if v["port_stated"]:
        return f"{port} (--port {port})"
    return f"{port} (--port unset: vLLM's default)"


EPP_IMAGE = "gateway-api-inference-extension/epp"


def _picker(ctx: RuleContext, pool: PoolView) -> tuple[str, str] | None:
    """(KV-usage metric the pool's endpoint picker reads, why) from its Deployment's image
    and flags; ``None`` when the picker is not in the input or its release not catalogued."""
    if pool.picker is None:
        return None
    ns = pool.obj.namespace
    svc = object_index(ctx).get(("Service", ns, pool.picker))
    selector = dig(svc.raw, "spec", "selector") if svc is not None else None
    if not isinstance(selector, Mapping) or not selector:
        return None
    for obj in by_namespace(ctx).get(ns, ()):
        for pod in obj.pods():
            if not all(str(pod.labels.get(k)) == str(v) for k, v in selector.items()):
                continue
            for c in pod.containers(init=False):
                image = known(c.image, f"image of {c.label}")
                if not isinstance(image, str) or EPP_IMAGE not in image:
                    continue
                args = [str(a) for a in as_list(known(c.raw.get("args"), "args"), "args")]
                for i, arg in enumerate(args):
                    if arg.lstrip("-").startswith(KV_USAGE_FLAG):
                        value = (
                            arg.split("=", 1)[1] if "=" in arg else (args[i + 1 : i + 2] or [""])[0]
                        )
                        return value, f"--{KV_USAGE_FLAG} of {obj.resource}"
                version = release_version(split_image(image)[1])
                found = epp_default_metric(version) if version else None
                if found is None:
                    return None
                return found[0], f"the default of {image} ({found[1]})"
    return None


def _metrics(
    ctx: RuleContext,
    obj: K8sObject,
    pool: PoolView,
    members: list[tuple[PodRef, list[EngineSite]]],
) -> Iterator[Verdict]:
    picked = _picker(ctx, pool)
    if picked is None:
        return
    metric, why = picked
    for _, sites in members:
        for site in sites:
            release = site.release()
            version, where = release.version, release.where
            key = release_version(version)
            if key is None:
                continue
            hidden = site.engine.get("show_hidden_metrics_for_version") is not None
            if vllm_exports(metric, key, hidden) is False:
                ref = "endpointPickerRef" if "endpointPickerRef" in _spec(obj) else "extensionRef"
                yield Verdict(
                    "advisory",
                    "picker-metric-not-exported",
                    values={
                        "pool": obj.name,
                        "metric": metric,
                        "metric_source": why,
                        "vllm": version,
                        "vllm_source": where,
                        "engine": f"{site.label} of {site.obj.resource}",
                        "hidden_metrics": hidden,
                    },
                    path=("spec", ref),
                )
                return


def _spec(obj: K8sObject) -> Mapping[str, Any]:
    spec = obj.raw.get("spec")
    return spec if isinstance(spec, Mapping) else {}


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


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
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
        yield Verdict(
            "violation",
            "selects-no-pod",
            values={
                "pool": obj.name,
                "selector": _labels(pool.selector.get("matchLabels")),
                "namespace": obj.namespace,
                "vllm_pod": pod.obj.resource,
                "vllm_labels": _labels(pod.labels),
            },
            path=("spec", "selector"),
        )
        return
    yield from _metrics(ctx, obj, pool, members)
    if not pool.ports:
        return  # no port written: the API server rejects the pool (its CRD requires one)
    for pod, sites in members:
        if _sidecar_serves(pod, sites, pool.ports):
            continue  # a proxy in the Pod (llm-d's routing sidecar) listens on the port
        for site in sites:
            if site.engine.port in pool.ports:
                continue
            yield Verdict(
                "violation",
                "port-not-served",
                values={
                    "pool": obj.name,
                    "engine": f"{site.label} of {pod.obj.resource}",
                    "engine_port": site.engine.port,
                    "port_stated": site.engine.get("port") is not None,
                },
                thresholds={"pool_ports": tuple(pool.ports)},
                path=pool.ports_path,
            )
            return


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a G002 message derives: the pool's ports, where the engine listens and why."""
    v = verdict.values
    ports = cast(tuple[int, ...], verdict.thresholds.get("pool_ports", ()))
    listens = "" if "engine_port" not in v else _listens(v)
    return {"ports": ", ".join(str(p) for p in ports), "listens": listens}


RULE = folder_rule(
    __name__,
    worded(judge, fields),
    facts={"GIE_CRDS": GIE_CRDS, "KV_USAGE_FLAG": KV_USAGE_FLAG},
)
