"""K011 scale-on-inference-metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import autoscaler_target, object_index, runs_vllm
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig

INFERENCE_METRIC = re.compile(
    r"num_requests_waiting|num_requests_running|kv_cache_usage|gpu_cache_usage|queue|"
    r"time_to_first_token|ttft",
    re.IGNORECASE,
)


def metrics_of(obj: K8sObject) -> list[str]:
    """Human-readable names of what an HPA / ScaledObject scales on."""
    out: list[str] = []
    if obj.kind == "HorizontalPodAutoscaler":
        metrics = as_list(dig(obj.raw, "spec", "metrics"), "spec.metrics")
        if not metrics:  # autoscaling/v2 default: 80% average CPU utilisation
            return ["cpu (default)"]
        for m in metrics:
            if not isinstance(m, Mapping):
                continue
            kind = str(m.get("type", ""))
            body = as_map(m.get(kind[:1].lower() + kind[1:]), kind)
            name = body.get("name") or dig(body, "metric", "name")
            out.append(str(name) if name else kind)
    else:
        for trig in as_list(dig(obj.raw, "spec", "triggers"), "spec.triggers"):
            if not isinstance(trig, Mapping):
                continue
            meta = as_map(trig.get("metadata"), "metadata")
            detail = meta.get("query") or meta.get("metricName") or ""
            out.append(f"{trig.get('type')}: {detail}" if detail else str(trig.get("type")))
    return out


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Autoscalers of vLLM workloads use a queue or KV-cache metric."""
    key = autoscaler_target(obj)
    if key is None:
        return
    name = f"{key[0]}/{key[2]}"
    target = object_index(ctx).get(key)
    if target is None:
        yield Verdict("not_evaluated", "target-missing", values={"target": name})
        return
    if not runs_vllm(ctx, target):
        return
    metrics = tuple(metrics_of(obj))
    if any(INFERENCE_METRIC.search(m) for m in metrics):
        return
    yield Verdict(
        "violation",
        "no-inference-metric",
        values={"autoscaler": f"{obj.kind} {obj.name}", "target": name, "metrics": metrics},
        thresholds={"inference_metric": INFERENCE_METRIC.pattern},
        path=("spec", "metrics" if obj.kind == "HorizontalPodAutoscaler" else "triggers"),
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K011 message quotes beyond its values: the metrics it scales on."""
    metrics = ", ".join(cast(tuple[str, ...], verdict.values.get("metrics", ())))
    return {"metric_list": metrics or "nothing"}


RULE = folder_rule(__name__, worded(judge, fields))
