"""G001 and G002 beyond their fixtures: duration spellings, Envoy Gateway policies on a
Gateway, Ray Serve's request timeout, sidecars in front of vLLM, unknown preview values,
and the real Gateway API Inference Extension guide (rule folder G001's SOURCES.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import rule_dir

from gpustrata.core.unknown import UNKNOWN
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.gateways import parse_duration, vllm_exports

GIE_GUIDE = rule_dir("G001") / "bad-gie-guide-istio-route.yaml"
G001_BAD = rule_dir("G001") / "bad-timeouts-cut-long-answers.yaml"
G001_GOOD = rule_dir("G001") / "good-timeouts-outlast-answers.yaml"


def _docs(path: Any) -> list[dict[str, Any]]:
    return [copy.deepcopy(dict(o.raw)) for o in load_paths([str(path)])]


def _of(report: Any, rule: str) -> list[tuple[str, str, str]]:
    return [(f.resource, f.enforcement, f.message) for f in report.findings if f.rule == rule]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300s", 300),
        ("5m", 300),
        ("1h30m", 5400),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("120", 120),
        (60, 60),
        ("0s", 0),
    ],
)
def test_durations_in_every_spelling(text: Any, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5 m", "1x", "s", "-3s", True, None, "1h-5m"])
def test_what_is_no_duration_is_not_read_as_one(text: Any) -> None:
    assert parse_duration(text) is None


def test_the_real_guide_route_cuts_answers_and_its_pool_matches() -> None:
    report = evaluate(load_paths([str(GIE_GUIDE)]))
    (found,) = _of(report, "G001")
    assert found[0] == "HTTPRoute/default/llm-route" and found[1] == "mandatory"
    assert "131,071 tokens" in found[2] and "fastest catalogued GPU" in found[2]
    assert _of(report, "G002") == []  # selector app=vllm-llama3-8b-instruct, port 8000


def _with_route_timeout(docs: list[dict[str, Any]], value: Any) -> list[dict[str, Any]]:
    out = copy.deepcopy(docs)
    for d in out:
        if d["kind"] == "HTTPRoute":
            d["spec"]["rules"][0]["timeouts"] = {"request": value}
    return out


def test_a_longer_or_disabled_route_timeout_passes_and_one_second_less_fails() -> None:
    docs = _docs(GIE_GUIDE)
    (found,) = _of(evaluate(docs), "G001")
    needed = int(found[2].split("Raise it above ")[1].split(" s")[0])
    assert _of(evaluate(_with_route_timeout(docs, f"{needed + 1}s")), "G001") == []
    assert _of(evaluate(_with_route_timeout(docs, "0s")), "G001") == []
    assert len(_of(evaluate(_with_route_timeout(docs, f"{needed - 2}s")), "G001")) == 1


def test_a_timeout_unknown_in_preview_is_no_violation() -> None:
    report = evaluate(_with_route_timeout(_docs(GIE_GUIDE), UNKNOWN))
    assert _of(report, "G001") == []
    assert any(n.rule == "G001" and "timeouts.request" in n.reason for n in report.not_evaluated)


def test_envoy_gateway_policy_on_the_gateway_reaches_the_routes_engines() -> None:
    docs = _docs(G001_GOOD)
    docs.append(
        {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "BackendTrafficPolicy",
            "metadata": {"name": "eg", "namespace": "llm"},
            "spec": {
                "targetRefs": [
                    {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "eg"}
                ],
                "timeout": {"http": {"requestTimeout": "20s", "connectionIdleTimeout": "10s"}},
            },
        }
    )
    found = _of(evaluate(docs), "G001")
    assert [(r, e) for r, e, _ in found] == [
        ("BackendTrafficPolicy/llm/eg", "mandatory"),
        ("BackendTrafficPolicy/llm/eg", "advisory"),
    ]
    assert "timeout.http.requestTimeout 20s (20 s)" in found[0][2]


def test_ray_serve_request_timeout_is_a_hop() -> None:
    (ray,) = [
        d
        for d in _docs(rule_dir("K021") / "good-endpoint-reaches-engine.yaml")
        if d["kind"] == "RayService"
    ]
    ray["metadata"]["namespace"] = "llm"
    ray["spec"]["serveConfigV2"] = (
        "http_options: {request_timeout_s: 30}\n" + ray["spec"]["serveConfigV2"]
    )
    found = _of(evaluate([ray]), "G001")
    assert [(r, e) for r, e, _ in found] == [("RayService/llm/llm", "mandatory")]
    assert "request_timeout_s 30 (30 s)" in found[0][2]


def test_a_proxy_sidecar_on_the_pool_port_is_not_a_wrong_port() -> None:
    # llm-d's layout: a routing sidecar listens on the pool's port and forwards to vLLM.
    docs = _docs(rule_dir("G002") / "bad-pool-misses-engines.yaml")
    docs = [d for d in docs if d["metadata"]["name"] in ("mistral-7b", "wrong-port")]
    pod = docs[0]["spec"]["template"]["spec"]
    assert len(_of(evaluate(docs), "G002")) == 1
    pod["containers"].append(
        {
            "name": "routing-proxy",
            "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
            "ports": [{"containerPort": 8080}],
        }
    )
    assert _of(evaluate(docs), "G002") == []


def test_a_pool_whose_pods_are_elsewhere_is_silent() -> None:
    docs = [
        d
        for d in _docs(rule_dir("G002") / "bad-pool-misses-engines.yaml")
        if d["kind"] == "InferencePool"
    ]
    assert _of(evaluate(docs), "G002") == []


def test_a_route_to_the_other_api_groups_pool_reaches_no_engine() -> None:
    docs = _docs(GIE_GUIDE)
    for d in docs:
        if d["kind"] == "HTTPRoute":
            d["spec"]["rules"][0]["backendRefs"][0]["group"] = "inference.networking.x-k8s.io"
    assert _of(evaluate(docs), "G001") == []


@pytest.mark.parametrize(
    ("metric", "version", "hidden", "exported"),
    [
        ("vllm:gpu_cache_usage_perc", (0, 8, 5), False, True),
        ("vllm:kv_cache_usage_perc", (0, 8, 5), False, False),
        ("vllm:kv_cache_usage_perc", (0, 9, 2), False, None),  # 0.8.5 and 0.10.1.1 disagree
        ("vllm:gpu_cache_usage_perc", (0, 9, 2), False, True),
        ("vllm:gpu_cache_usage_perc", (0, 11, 0), False, False),
        ("vllm:gpu_cache_usage_perc", (0, 11, 0), True, True),  # hidden metrics shown
        ("vllm:gpu_cache_usage_perc", (0, 20, 2), False, False),
        ("vllm:kv_cache_usage_perc", (0, 40, 0), False, None),  # newer than any read
        ("vllm:kv_cache_usage_perc", (0, 6, 0), False, None),  # older than any read
    ],
)
def test_vllm_kv_gauges_per_release(
    metric: str, version: tuple[int, int, int], hidden: bool, exported: bool | None
) -> None:
    assert vllm_exports(metric, version, hidden) is exported


def test_an_explicit_picker_flag_wins_over_its_default() -> None:
    docs = _docs(rule_dir("G002") / "bad-picker-reads-a-dropped-metric.yaml")
    for d in docs:
        if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-epp"):
            container = d["spec"]["template"]["spec"]["containers"][0]
            container["args"] += ["--kv-cache-usage-percentage-metric", "vllm:kv_cache_usage_perc"]
    assert _of(evaluate(docs), "G002") == []


@pytest.mark.parametrize(
    ("written", "number"),
    [(8000, 8000), ("8000", 8000), ("http", None), (True, None), ("-1", None), (None, None)],
)
def test_port_number_reads_a_number_or_its_digits_only(written: object, number: int | None) -> None:
    """Service ports, container ports and an InferencePool's target ports are one reading
    (view.endpoints.port_number): a number or its digits; a name or a boolean is none."""
    from gpustrata_policies.view.endpoints import port_number

    assert port_number(written) == number
