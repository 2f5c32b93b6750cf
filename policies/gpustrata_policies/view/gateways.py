"""What sits in front of vLLM engines: route timeouts, proxies and InferencePools (G001, G002).

Timeouts are read where each product writes them, at the spelling its documentation gives:

* ingress-nginx annotations ``nginx.ingress.kubernetes.io/proxy-read-timeout`` and
  ``proxy-send-timeout`` (seconds between two successive reads/writes: an *idle* timeout);
* the AWS Load Balancer Controller's ``alb.ingress.kubernetes.io/load-balancer-attributes``
  ``idle_timeout.timeout_seconds`` on an Ingress, and the in-tree/AWS controller's
  ``service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout`` on a Service
  (idle timeouts);
* Gateway API HTTPRoute ``spec.rules[].timeouts.request`` / ``backendRequest`` (GEP-1742:
  the time to the end of the response, so a streamed answer is cut too: *total*);
* Istio VirtualService ``spec.http[].timeout`` (total, Envoy's route timeout);
* Envoy Gateway BackendTrafficPolicy ``spec.timeout.http.requestTimeout`` (total) and
  ``connectionIdleTimeout`` (idle), and ClientTrafficPolicy ``spec.timeout.http.idleTimeout``
  (idle), on the HTTPRoutes or Gateways they target;
* Ray Serve ``http_options.request_timeout_s`` in a RayService's ``serveConfigV2`` (total).

An idle timeout resets with every byte: a streamed answer (``"stream": true``, one chunk
per token) outlives it, a non-streamed one does not. A total timeout cuts both.

InferencePools are read in both API versions: ``inference.networking.k8s.io/v1``
(``selector.matchLabels``, ``targetPorts[].number``, ``endpointPickerRef``) and
``inference.networking.x-k8s.io/v1alpha2`` (``selector`` as a label map,
``targetPortNumber``, ``extensionRef``): kubernetes-sigs/gateway-api-inference-extension
@v1.0.0:config/crd/bases/.

The longest generation an engine admits is ``max_model_len - 1`` output tokens (a prompt
has at least one token). Its lower bound is that many decode steps of one sequence alone
(batch 1, at the mean context ``max_model_len / 2``) in the serving model
(:func:`gpustrata.vllm.performance.decode_step`, constants fitted to published runs):
any batching makes each step slower, so a hop that cuts even this bound cuts real answers.
Where the input names no GPU, the bound is taken over every catalogued GPU (the fastest
one's), which assumes no GPU.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import capacity, catalogs
from gpustrata_policies.view.endpoints import port_number
from gpustrata_policies.view.engines import EngineSite, site_gpus
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig

__all__ = [
    "GIE_CRDS",
    "INFERENCE_POOL_GROUPS",
    "KV_USAGE_FLAG",
    "Generation",
    "PoolView",
    "epp_default_metric",
    "inference_pool",
    "longest_generation",
    "parse_duration",
    "pool_objects",
    "vllm_exports",
]

INFERENCE_POOL_GROUPS = ("inference.networking.k8s.io", "inference.networking.x-k8s.io")
"""The API groups of InferencePool: v1 and the older v1alpha2."""
GIE_CRDS = "kubernetes-sigs/gateway-api-inference-extension@v1.0.0:config/crd/bases/"

_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")


def parse_duration(value: Any) -> float | None:
    """Seconds of a Gateway API / Istio / Envoy duration (``300s``, ``1h30m``, ``1.5s``,
    ``500ms``), or of a bare number of seconds; ``None`` when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    total, at = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != at:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        at = match.end()
    return total if at == len(text) and at > 0 else None


# --------------------------------------------------------------------------- pools


@dataclass(frozen=True, slots=True)
class PoolView:
    """One InferencePool as its API version writes it."""

    obj: K8sObject
    selector: Mapping[str, Any]
    """As a Kubernetes LabelSelector (``{"matchLabels": ...}``)."""
    ports: tuple[int, ...]
    ports_path: tuple[str, ...]
    picker: str | None
    """The endpoint picker Service's name (``endpointPickerRef`` / ``extensionRef``)."""


def inference_pool(obj: K8sObject) -> PoolView | None:
    """The pool *obj* describes, or ``None`` when it is no InferencePool of a known group."""
    if obj.kind != "InferencePool":
        return None
    group = obj.api_version.split("/", 1)[0]
    if "/" in obj.api_version and group not in INFERENCE_POOL_GROUPS:
        return None
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    if spec.get("selector") is UNKNOWN:
        raise UnknownInput(f"spec.selector of {obj.resource}")
    selector = as_map(spec.get("selector"), "spec.selector")
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}  # v1alpha2: a plain label map
    ports: list[int] = []
    path: tuple[str, ...] = ("spec", "targetPorts")
    if "targetPortNumber" in spec:
        path = ("spec", "targetPortNumber")
        raw = spec.get("targetPortNumber")
        if raw is UNKNOWN:
            raise UnknownInput(f"spec.targetPortNumber of {obj.resource}")
        found = port_number(raw)
        ports = [found] if found is not None else []
    for entry in as_list(spec.get("targetPorts"), "spec.targetPorts"):
        number = entry.get("number") if isinstance(entry, Mapping) else None
        if number is UNKNOWN:
            raise UnknownInput(f"spec.targetPorts of {obj.resource}")
        found = port_number(number)
        if found is not None:
            ports.append(found)
    ref = spec.get("endpointPickerRef", spec.get("extensionRef"))
    name = dig(ref, "name") if isinstance(ref, Mapping) else None
    return PoolView(obj, selector, tuple(ports), path, name if isinstance(name, str) else None)


# --------------------------------------------------------------------------- generation


@dataclass(frozen=True, slots=True)
class Generation:
    """The lower bound of an engine's longest generation, with its working."""

    seconds: float
    tokens: int
    step_seconds: float
    gpu: str
    """The GPU the bound is for (``H100-SXM (pool gpu)``, or the fastest catalogued)."""
    notes: str
    """How max_model_len was resolved (``; max_model_len unset: ...``)."""

    def text(self) -> str:
        """``131,071 tokens (max_model_len 131072 - 1) x 4.92 ms per token ... = 645 s``."""
        return (
            f"{self.tokens:,} tokens (max_model_len {self.tokens + 1} - 1) x "
            f"{self.step_seconds * 1e3:.2f} ms per token (one sequence alone on {self.gpu}, "
            f"gpustrata's serving model) = {math.ceil(self.seconds):,} s{self.notes}"
        )


def _bound(est: Any, arch: Any, gpu: Any) -> tuple[float, int, float] | None:
    from gpustrata.vllm.calibration import default_constants
    from gpustrata.vllm.performance import decode_step
    from gpustrata.vllm.terms import CapacityError

    tokens = int(est.max_model_len) - 1
    if tokens < 1:
        return None
    try:
        step = decode_step(
            arch, gpu, est, batch=1, context=est.max_model_len / 2, constants=default_constants()
        )
    except CapacityError:
        return None
    return tokens * step.seconds.value, tokens, step.seconds.value


def longest_generation(ctx: RuleContext, site: EngineSite) -> Generation | str:
    """The lower bound of the longest answer *site* admits, or why it cannot be made."""
    found: Generation | str = ctx.memo(("longest-generation", id(site)), lambda: _gen(ctx, site))
    return found


def _gen(ctx: RuleContext, site: EngineSite) -> Generation | str:
    model = capacity.resolve_model(site)
    if isinstance(model, str):
        return capacity.not_evaluated_reason(site, model)
    gpus = site_gpus(ctx, site)
    if isinstance(gpus, str):
        # No GPU named: the fastest catalogued GPU's bound holds on whatever it runs on.
        candidates = [(g, f"{g.name}, the fastest catalogued GPU for it") for g in _all_gpus()]
    else:
        candidates = [(ref.gpu, f"{ref.gpu.name} ({ref.where})") for ref in gpus]
    version = capacity.engine_version(site)
    settings = capacity.engine_settings(site, model.arch, version.v0, version.version)
    if isinstance(settings, str):
        return capacity.not_evaluated_reason(site, settings)
    from gpustrata.vllm.terms import CapacityError

    best: Generation | None = None
    for gpu, label in candidates:
        release, sampler = settings.release, settings.flashinfer_sampler
        try:
            est = capacity.estimate(model.arch, gpu, settings.engine, release, sampler)
            fitted = est.kv.largest_max_model_len
            if settings.auto_fit and 0 < fitted < est.max_model_len:
                fit = settings.engine.replace(max_model_len=fitted)
                est = capacity.estimate(model.arch, gpu, fit, release, sampler)
        except CapacityError:
            continue
        bound = _bound(est, model.arch, gpu)
        if bound is None:
            continue
        seconds, tokens, step = bound
        if best is None or seconds < best.seconds:
            notes = "".join(
                f"; {settings.defaults[k]}" for k in ("max_model_len",) if k in settings.defaults
            )
            best = Generation(seconds, tokens, step, label, notes)
    if best is None:
        return capacity.not_evaluated_reason(
            site, "no GPU it may run on gives a decode estimate for its model and settings"
        )
    return best


def _all_gpus() -> list[Any]:
    return list(catalogs.hardware().gpus.values())


def pool_objects(ctx: RuleContext) -> Iterator[PoolView]:
    """Every InferencePool of the input."""
    for obj in ctx.objects:
        pool = inference_pool(obj)
        if pool is not None:
            yield pool


# --------------------------------------------------------------------------- metrics

KV_USAGE_FLAG = "kv-cache-usage-percentage-metric"
QUEUE_FLAG = "total-queued-requests-metric"
EPP_DEFAULTS: tuple[tuple[tuple[int, int], tuple[int, int], str, str], ...] = (
    (
        (1, 0),
        (1, 2),
        "vllm:gpu_cache_usage_perc",
        "gateway-api-inference-extension@v1.0.0 and @v1.2.0:pkg/epp/server/runserver.go "
        "DefaultKvCacheUsagePercentageMetric",
    ),
    (
        (1, 3),
        (1, 5),
        "vllm:kv_cache_usage_perc",
        "gateway-api-inference-extension@v1.3.0, @v1.4.0 and @v1.5.0:pkg/epp/server/options.go",
    ),
)
"""The endpoint picker's KV-cache metric when ``--kv-cache-usage-percentage-metric`` is
unset, per GIE minor range (inclusive); the queue metric is ``vllm:num_requests_waiting``
in all of them. Other releases are not catalogued."""


def _kv_metrics() -> list[tuple[tuple[int, ...], frozenset[str], str]]:
    """(release as a tuple, KV-cache usage gauges it exports, source), oldest first: the
    vLLM release catalogue's ``kv_usage_metrics`` (read in each release's wheel)."""
    out = []
    for version, metrics, source in catalogs.vllm_releases().kv_usage_metrics:
        numbers = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
        out.append((numbers, metrics, source))
    return out


def epp_default_metric(version: tuple[int, ...]) -> tuple[str, str] | None:
    """(metric, source) the endpoint picker release reads KV usage from by default."""
    for low, high, metric, source in EPP_DEFAULTS:
        if low <= version[:2] <= high:
            return metric, source
    return None


def vllm_exports(metric: str, version: tuple[int, ...], hidden: bool) -> bool | None:
    """Does vLLM *version* export *metric* (None: the read releases around it disagree,
    or it is outside them)? *hidden*: ``--show-hidden-metrics-for-version`` is set."""

    def has(entry: tuple[tuple[int, ...], frozenset[str], str]) -> bool:
        shown = hidden and entry[0][:2] == (0, 11)
        return metric in entry[1] or (shown and metric == "vllm:gpu_cache_usage_perc")

    read = _kv_metrics()
    below = [e for e in read if e[0] <= version]
    above = [e for e in read if e[0] >= version]
    if not below or not above:
        return None
    low, high = below[-1], above[0]
    return has(low) if has(low) == has(high) else None
