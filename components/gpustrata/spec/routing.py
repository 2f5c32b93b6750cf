"""The routing side of the stack spec (issue 36): how clients reach a model's replicas
(a Service or the inference gateway with its endpoint picker)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gpustrata.spec.fields import Name, Quantity, SpecModel

RoutingMode = Literal["service", "inference-gateway"]
EppScorer = Literal["queue", "kv-cache-utilization", "prefix-cache"]
FailureMode = Literal["FailOpen", "FailClose"]
GatewayServiceType = Literal["ClusterIP", "LoadBalancer"]


class ScorerSpec(SpecModel):
    """One scorer of the endpoint picker's scheduling profile, with its weight."""

    name: EppScorer = Field(
        description="'prefix-cache': prefer the replica that already holds the prompt's "
        "prefix in its KV cache (prefix-cache-scorer); 'kv-cache-utilization': prefer the "
        "replica with the most free KV cache (kv-cache-utilization-scorer, from vLLM's "
        "vllm:kv_cache_usage_perc); 'queue': prefer the shortest waiting queue "
        "(queue-scorer, vllm:num_requests_waiting)."
    )
    weight: int = Field(default=1, ge=1, le=100, description="Weight in the profile's sum.")


def _default_scorers() -> list[ScorerSpec]:
    # The inferencepool chart's own default profile at GAIE v1.5.0
    # (config/charts/epplib/templates/_config.yaml): queue 2, kv-cache-utilization 2,
    # prefix-cache 3.
    return [
        ScorerSpec(name="queue", weight=2),
        ScorerSpec(name="kv-cache-utilization", weight=2),
        ScorerSpec(name="prefix-cache", weight=3),
    ]


class ModelRoutingSpec(SpecModel):
    """How clients reach one model's replicas."""

    mode: RoutingMode = Field(
        default="service",
        description="'service': the model's Kubernetes Service balances connections "
        "(kube-proxy, no knowledge of the engines); 'inference-gateway': a Gateway API "
        "Gateway and HTTPRoute to an InferencePool whose endpoint picker chooses the replica "
        "per request from the engines' metrics (Gateway API Inference Extension; deployment "
        "runtime only).",
    )
    scorers: list[ScorerSpec] = Field(
        default_factory=_default_scorers,
        min_length=1,
        max_length=3,
        description="The endpoint picker's scorers and weights (inference-gateway). Default: "
        "the inferencepool chart's profile (queue 2, kv-cache-utilization 2, prefix-cache 3).",
    )
    failure_mode: FailureMode = Field(
        default="FailOpen",
        description="InferencePool endpointPickerRef.failureMode: 'FailOpen' sends requests "
        "on when the picker is down, 'FailClose' refuses them.",
    )
    picker_replicas: int = Field(
        default=1,
        ge=1,
        le=10,
        description="Endpoint picker replicas (more than one uses leader election; the "
        "prefix-cache index lives in the leader).",
    )
    picker_cpu: Quantity = Field(
        default="1",
        description="CPU request of the endpoint picker. The chart's default (4) does not fit "
        "a 4-vCPU system node; raise it with the system pool for high request rates.",
    )
    picker_memory: Quantity = Field(
        default="2Gi",
        description="Memory request of the endpoint picker (the limit is twice it).",
    )
    request_timeout: str | None = Field(
        default=None,
        pattern=r"^([0-9]{1,5}(h|m|s|ms)){1,4}$",  # GEP-2257, as the HTTPRoute CRD
        examples=["1h", "0s"],
        description="HTTPRoute timeouts.request. Empty: derived from the model's longest "
        "generation (max_model_len - 1 tokens at the planner's decode step with every "
        "sequence slot busy), so rule G001 holds; '0s' disables it.",
    )

    @field_validator("scorers")
    @classmethod
    def _distinct(cls, value: list[ScorerSpec]) -> list[ScorerSpec]:
        names = [s.name for s in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"scorer {', '.join(twice)} is listed twice; give each scorer once with its weight"
            )
        return value


class InferenceGatewaySpec(SpecModel):
    """The inference gateway installed for models with routing mode inference-gateway:
    Gateway API and Inference Extension CRDs, and the gateway implementation, at the
    catalogued releases (``catalog/data/gateway.yaml``)."""

    namespace: Name = Field(
        default="istio-system", description="Namespace of the gateway controller (istiod)."
    )
    gateway_name: Name = Field(
        default="inference-gateway",
        description="Name of the Gateway created in each namespace that has such a model "
        "(its proxy Service is '<name>-istio', port 80).",
    )
    install: bool = Field(
        default=True,
        description="Install the CRDs and the gateway controller. False: the cluster already "
        "runs them (existing clusters); the Gateways, routes and pools are still created.",
    )
    service_type: GatewayServiceType = Field(
        default="ClusterIP",
        description="Type of the Service istiod creates for each Gateway's proxy. "
        "'ClusterIP' (default): reached inside the cluster only (the stack's endpoints "
        "output); 'LoadBalancer': Istio's own default, which on EKS provisions a cloud load "
        "balancer for it.",
    )
