"""The serving model's constants as fitted, and its prediction of a published run.

:func:`default_constants` reads ``catalog/data/serving-fit.yaml`` (written once by
``benchmarks/fit_serving_model.py``); :func:`predict_point` sizes one published run of
``catalog/data/serving-calibration.yaml`` with given constants, the one path the fit and
``benchmarks/bench_sizing_accuracy.py`` share.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.catalog.hardware import GpuModel, load_hardware_catalog
from gpustrata.catalog.serving import (
    CalibrationPoint,
    ServingFit,
    load_serving_calibration,
    load_serving_fit,
    load_serving_margin,
)
from gpustrata.vllm.capacity import CapacityError, CapacityEstimate, estimate_capacity
from gpustrata.vllm.performance import (
    ServingConstants,
    ServingPrediction,
    Workload,
    predict_serving,
)

__all__ = [
    "CONSTANT_NAMES",
    "NO_MARGIN",
    "OPTIONAL_CONSTANT_NAMES",
    "Margin",
    "MarginModel",
    "PointPrediction",
    "constants_from_fit",
    "default_constants",
    "measured_margin",
    "point_release",
    "point_workload",
    "predict_point",
    "sized_point",
]

NOT_STATED = "not stated"
"""``vllm_version`` of a published run that names no release."""

CONSTANT_NAMES = (
    "memory_efficiency",
    "compute_efficiency",
    "compute_efficiency_sm80",
    "compute_efficiency_sm90",
    "step_overhead_s",
    "per_sequence_overhead_s",
    "allreduce_latency_s",
    "moe_layer_overhead_s",
    "moe_tp_layer_floor_s",
    "request_overhead_s",
)
"""The fields of :class:`ServingConstants` the fit sets, in its order."""

OPTIONAL_CONSTANT_NAMES = ("memory_efficiency_sm80", "memory_efficiency_sm90", "layer_floor_s")
"""Fields of :class:`ServingConstants` serving-fit.yaml sets when it has them (the simulator's
fit, since session 20); absent: their defaults (the generation's shared value, no floor)."""


def constants_from_fit(fit: ServingFit) -> ServingConstants:
    """:class:`ServingConstants` from a fit, its source naming the points of each value."""
    values = {}
    why = []
    for name in (*CONSTANT_NAMES, *OPTIONAL_CONSTANT_NAMES):
        c = fit.constants.get(name)
        if c is None:
            if name in OPTIONAL_CONSTANT_NAMES:
                continue
            raise CapacityError(name, f"serving-fit.yaml has no constant {name!r}")
        values[name] = c.value
        why.append(f"{name} {c.value:g} ({c.explanation}; fitted on {len(c.fitted_on)} points)")
    return ServingConstants(
        **values,
        source=f"catalog/data/serving-fit.yaml ({fit.method}): " + "; ".join(why),
    )


@functools.cache
def default_constants() -> ServingConstants:
    """The shipped fit (cached)."""
    return constants_from_fit(load_serving_fit())


@dataclass(frozen=True)
class PointPrediction:
    """A published run and what the model predicts for it."""

    point: CalibrationPoint
    prediction: ServingPrediction

    @property
    def throughput(self) -> float:
        """Predicted throughput as the point measures it (end-to-end or decode)."""
        pred = self.prediction
        if self.point.throughput_kind == "decode":
            return float(pred.running.value) / pred.tpot_seconds.value
        return pred.output_tokens_per_second.value

    def errors(self) -> dict[str, float]:
        """Relative error (predicted / measured - 1) of each measured, fitted figure."""
        p, pred = self.point, self.prediction
        out: dict[str, float] = {}
        if p.tpot_ms and "tpot" not in p.not_fitted:
            out["tpot"] = pred.tpot_seconds.value * 1e3 / p.tpot_ms - 1
        if p.output_tokens_per_second and "throughput" not in p.not_fitted:
            out["throughput"] = self.throughput / p.output_tokens_per_second - 1
        if p.ttft_ms and "ttft" not in p.not_fitted:
            out["ttft"] = pred.ttft_seconds.value * 1e3 / p.ttft_ms - 1
        return out


def point_release(point: CalibrationPoint) -> tuple[str | None, str]:
    """The vLLM release a published run is sized at, and by which rule: the release it
    states, as ``gpustrata size --vllm-version X`` sizes it (:func:`~gpustrata.vllm.capacity.
    estimate_capacity`: that release's default ``gpu_memory_utilization`` and memory terms;
    an unread release between two read ones whose terms differ, as whichever of them or
    the reference release's terms leaves the least KV memory; one outside the read
    releases, and a run that states none, at the reference release's terms)."""
    from gpustrata.catalog.vllm_releases import (
        load_vllm_releases,
        reference_release,
        unread_memory_bracket,
    )

    release = point.vllm_version
    if release == NOT_STATED:
        return None, f"not stated: the reference release {reference_release()}'s terms"
    read = {r.version for r in load_vllm_releases().profile_run}
    bracket = unread_memory_bracket(release)
    if release in read:
        return release, f"{release} (read)"
    if bracket is not None:
        return release, f"{release} (not read; between {bracket[0]} and {bracket[1]})"
    return release, (
        f"{release} (memory terms outside the read releases: the reference "
        f"{reference_release()}'s, the release's own gpu_memory_utilization default)"
    )


@functools.cache
def _sized(
    point_id: str, gpu_id: str | None = None
) -> tuple[ModelArchitecture, GpuModel, CapacityEstimate]:
    point = next(p for p in load_serving_calibration() if p.id == point_id)
    arch = load_model_catalog().get(point.model)
    gpu = load_hardware_catalog().gpu(gpu_id or point.gpu)
    if arch is None or gpu is None:
        raise CapacityError("point", f"{point.id}: model or GPU not in the catalogue")
    settings = {
        "tensor_parallel_size": point.tensor_parallel_size,
        "pipeline_parallel_size": point.pipeline_parallel_size,
        **point.settings,
    }
    settings.setdefault("max_model_len", point.input_tokens + point.output_tokens + 16)
    release, _ = point_release(point)
    # A run that states no release is priced without asynchronous scheduling, not at the
    # reference release's default: every such run in the file is dated in its notes or
    # quote between 2025-04 and 2025-09, before v0.14.0 turned it on
    # (gpustrata.vllm.scheduling; tests/vllm/test_calibration_scheduling.py checks it).
    async_scheduling = False if release is None else None
    return (
        arch,
        gpu,
        estimate_capacity(
            arch,
            gpu,
            vllm_release=release,
            tp_transport=point.tp_transport,
            async_scheduling=async_scheduling,
            **settings,
        ),
    )


def point_publisher(point: CalibrationPoint) -> str:
    """The publisher of ``point``: its id's first part (gpustack, tt-143, vllm-20469, ...).

    A publisher is a harness and a lab, not a page: GPUStack's pages share one, so they are
    one publisher. The serving fit (benchmarks/fit_serving_model.py) and its held-out
    check (benchmarks/bench_serving_loso.py) weigh each publisher equally and hold out
    by it.
    """
    head = point.id.split("-")
    return "-".join(head[:2]) if head[0] in {"tt", "vllm", "kvcached"} else head[0]


def point_workload(point: CalibrationPoint) -> Workload:
    """The workload a published run served."""
    return Workload(
        point.input_tokens,
        point.output_tokens,
        concurrency=point.concurrency,
        request_rate=point.request_rate,
        burst=point.burst,
    )


def sized_point(
    point: CalibrationPoint, gpu: str | None = None
) -> tuple[ModelArchitecture, GpuModel, CapacityEstimate]:
    """The model, GPU and capacity estimate of a published run (cached by id), sized at
    the release it states (:func:`point_release`); ``gpu``: as another of the parts its
    source leaves open (``gpu_variants``) instead of the one it is scored as."""
    if gpu is not None and gpu not in (point.gpu, *point.gpu_variants):
        raise CapacityError("gpu", f"{point.id}: {gpu!r} is not among {point.gpu_variants}")
    return _sized(point.id, None if gpu == point.gpu else gpu)


def predict_point(point: CalibrationPoint, constants: ServingConstants) -> PointPrediction:
    """Size ``point``'s model, GPU and settings and predict its workload.

    ``point`` must be one of :func:`load_serving_calibration` (its sizing is cached by id).
    """
    arch, gpu, est = _sized(point.id)
    pred = predict_serving(arch, gpu, est, point_workload(point), constants)
    return PointPrediction(point, pred)


@dataclass(frozen=True)
class Margin:
    """How far below an SLO target a prediction must stay: the serving model's measured
    out-of-sample error, per figure."""

    tpot: float
    """Fraction added to a predicted TPOT before it is compared with the target."""
    ttft: float
    """Fraction added to a predicted TTFT before it is compared with the target."""
    explanation: str


NO_MARGIN = Margin(0.0, 0.0, "no margin")
"""A prediction compared with the target as it is (``--margin 0``)."""

MarginModel = Literal["simulation", "closed form"]
"""The serving model whose figures an SLO verdict is made on: the event-level simulation
(:mod:`gpustrata.vllm.simulate`, the verdict ``size`` and ``plan`` give) or the closed form
(:func:`~gpustrata.vllm.performance.predict_serving`, ``size``'s first screen)."""


@functools.cache
def measured_margin(model: MarginModel) -> Margin:
    """The default SLO margin of ``model``'s figures: their median |error| of TPOT and of
    TTFT held out by publisher (``data/serving-margin.yaml``, written by
    ``benchmarks/bench_serving_loso.py --write-margin``: each publisher's points predicted
    with constants fitted on the others'), what the model misses by on runs it was not
    fitted to. A file without the closed form's errors gives the simulator's for both (and
    says so). A missing or invalid file is a
    :class:`~gpustrata.catalog.packaged.CatalogError`."""
    m = load_serving_margin()
    if model == "closed form" and m.closed_form:
        errors, name = m.closed_form, "closed form"
    else:
        errors, name = m.errors, "simulator"
    tpot, ttft = errors["tpot"], errors["ttft"]
    return Margin(
        tpot.median,
        ttft.median,
        f"the {name}'s median |error| held out by publisher (serving-margin.yaml, {m.date}: "
        f"{len(m.points)} points of {len(m.publishers)} publishers, each predicted with "
        f"constants fitted on the others'): TPOT {tpot.median:.0%} over {tpot.points} points, "
        f"TTFT {ttft.median:.0%} over {ttft.points}",
    )
