"""Serving facts: published vLLM runs, startup logs and the fit on them.

The GPU-to-GPU bandwidth the model all-reduces over is the GPU catalogue's
``interconnect_gbs`` and the instance price its ``price`` (``catalog/hardware.py``): one
place each. The data lives next to this module:

* ``data/serving-calibration.yaml``: published vLLM serving results with their full
  conditions, source URL and a verbatim quote;
* ``data/startup-logs.yaml``: published vLLM startup logs (load and init times);
* ``data/serving-fit.yaml``: the constants fitted once on those points by
  ``benchmarks/fit_serving_model.py`` (which writes the file), with the ids they were
  fitted on.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpustrata.catalog.inputs import StorageKind
from gpustrata.catalog.packaged import CatalogError, packaged_document, packaged_model

__all__ = [
    "LOAD_PATHS",
    "STORAGE_KINDS",
    "CalibrationPoint",
    "FittedConstant",
    "HeldOutError",
    "LoadPath",
    "ServingFit",
    "ServingMargin",
    "StartupLog",
    "StorageKind",
    "load_serving_calibration",
    "load_serving_fit",
    "load_serving_margin",
    "load_startup_logs",
]

_PACKAGE = "gpustrata.catalog"
_M = TypeVar("_M", bound=BaseModel)


class CalibrationPoint(BaseModel):
    """One published vLLM serving result with its conditions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    model: str = Field(min_length=1, description="Model catalogue id")
    gpu: str = Field(min_length=1, description="GpuModel.id")
    tensor_parallel_size: int = Field(ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    tp_transport: Literal["device", "host", "network"] = Field(
        default="device",
        description=(
            "The path the TP all-reduces took (gpustrata.vllm.transport): device (GPU peer "
            "access in one Pod, the default), host (one Pod, no peer access: NCCL SHM), "
            "network (the TP group spans Pods: NCCL NET); not device only with "
            "tp_transport_quote"
        ),
    )
    tp_transport_quote: str | None = Field(
        default=None, description="Verbatim from the source or its logs: what says the path"
    )
    gpu_variants: list[str] = Field(
        default_factory=list,
        description=(
            "Every catalogued GPU the source's words fit where it leaves the part open (A100 "
            "SXM or PCIe); ``gpu`` is the one it is scored as, gpu_choice says why"
        ),
    )
    gpu_choice: str | None = Field(
        default=None,
        description="Why ``gpu`` among gpu_variants: what the source's other runs imply, quoted",
    )
    vllm_version: str = Field(min_length=1, description='Release, or "not stated"')
    input_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    request_rate: float | None = Field(default=None, gt=0)
    burst: bool = Field(
        default=False,
        description=(
            "The concurrency requests were all sent at once (vllm bench serve --num-prompts "
            "N at request rate inf without --max-concurrency): a draining queue, not a "
            "steady closed loop"
        ),
    )
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Engine settings the run states (vLLM names)"
    )
    output_tokens_per_second: float | None = Field(default=None, gt=0)
    throughput_kind: Literal["end-to-end", "decode"] = Field(
        default="end-to-end",
        description=(
            "end-to-end: output tokens / benchmark duration (vLLM's 'Output token "
            "throughput'); decode: concurrency / TPOT (tt-inference-server's 'Tput Decode')"
        ),
    )
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    source: str = Field(min_length=1)
    quote: str = Field(min_length=1, description="Verbatim from the source")
    notes: str = ""
    not_fitted: list[Literal["ttft", "tpot", "throughput"]] = Field(
        default_factory=list,
        description="Figures left out of the fit (and the medians), with why in notes",
    )
    session: int | None = Field(
        default=None, ge=1, description="Session that added it under the file's inclusion rule"
    )

    @model_validator(mode="after")
    def _one_load(self) -> CalibrationPoint:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency or request_rate")
        if self.burst and self.concurrency is None:
            raise ValueError("burst: give the requests sent as concurrency")
        if self.tp_transport != "device" and not self.tp_transport_quote:
            raise ValueError(
                f"tp_transport {self.tp_transport}: quote what says so in tp_transport_quote"
            )
        if self.gpu_variants and (self.gpu not in self.gpu_variants or not self.gpu_choice):
            raise ValueError(
                f"gpu_variants {self.gpu_variants}: list gpu {self.gpu!r} among them and say "
                "why it is the one scored in gpu_choice"
            )
        if self.tp_transport != "device" and self.tensor_parallel_size == 1:
            raise ValueError(f"tp_transport {self.tp_transport} with tensor_parallel_size 1")
        return self


LoadPath = Literal[
    "hf-download",
    "hf-download-fast",
    "s3-streamer",
    "s3-download",
    "local-streamer",
    "disk",
    "page-cache",
]
"""How the weights reached the GPU in a logged load, each a condition the user can state or
gpustrata can read from a manifest:

* ``hf-download``: downloaded from the Hugging Face Hub by huggingface_hub's default
  downloader (no ``HF_HUB_ENABLE_HF_TRANSFER``); the measure is the whole download;
* ``hf-download-fast``: the same with hf_transfer (``HF_HUB_ENABLE_HF_TRANSFER=1``) or
  hf_xet (huggingface_hub's Xet transfer, its default from 0.32 for Xet-backed repos);
* ``s3-streamer``: object storage through the Run:ai Model Streamer
  (``--load-format runai_streamer``); each rank streams the whole checkpoint unless the
  loader's ``distributed`` option splits it across the ranks;
* ``s3-download``: object storage copied to a local disk first, then the default loader;
* ``local-streamer``: the Run:ai Model Streamer reading a local disk;
* ``disk``: vLLM's default safetensors loader reading files not (known to be) in the page
  cache: a first start on the node, a volume, or a read right after a download;
* ``page-cache``: the default loader with the files in the node's page cache (the log says
  so, or the pod restarted on the node that had just read them).
"""

LOAD_PATHS: tuple[str, ...] = get_args(LoadPath)
"""The values of :data:`LoadPath`, in its order."""

STORAGE_KINDS: tuple[str, ...] = get_args(StorageKind)
"""The values of :data:`StorageKind`, in its order."""


class StartupLog(BaseModel):
    """One published vLLM startup log: what loaded, from where, and how long each part took."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1, description='GpuModel.id or "not stated ..."')
    tensor_parallel_size: int = Field(default=1, ge=1)
    vllm_version: str = Field(min_length=1)
    engine: Literal["v0", "v1"] = Field(
        default="v1", description="vLLM's engine: V0 captures whole-model CUDA graphs"
    )
    load_path: LoadPath
    storage: StorageKind = Field(
        default="not stated",
        description="What a disk load read from, where the source says so (StorageKind)",
    )
    storage_gbps: float | None = Field(
        default=None,
        gt=0,
        description="The storage's stated read throughput in GB/s (a provisioned volume, a "
        "drive's datasheet): no load from it is predicted faster",
    )
    weights_gib: float | None = Field(
        default=None,
        gt=0,
        description=(
            "GiB the logged phase moved per reader: the whole download for a download, one "
            "rank's share for a per-rank load (vLLM's 'Model loading took X GiB')"
        ),
    )
    load_s: float | None = Field(default=None, gt=0)
    init_s: float | None = Field(default=None, gt=0)
    graph_capture_s: float | None = Field(default=None, gt=0)
    capture_sizes: int | None = Field(
        default=None,
        ge=1,
        description="CUDA graph batch sizes captured; None: the engine's default",
    )
    compile_s: float | None = Field(default=None, ge=0)
    compile_cached: bool = False
    enforce_eager: bool = False
    torch_compile: bool = Field(
        default=True,
        description="False where the engine ran no torch.compile (V0 without -O3)",
    )
    moe_warmup_s: float | None = Field(
        default=None, gt=0, description="Logged MoE kernel (DeepGEMM) warm-up seconds"
    )
    layers: int | None = Field(
        default=None, ge=1, description="Decoder layers, where the model is not in the catalogue"
    )
    source: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    notes: str = ""

    @property
    def load_gbps(self) -> float | None:
        """The logged load rate in GB/s (10^9 bytes/s): weights per reader / load seconds;
        None where the log gives either no size or no time."""
        reader = self.reader_gib
        if not (self.load_s and reader):
            return None
        return reader * (1 << 30) / self.load_s / 1e9

    @property
    def reader_gib(self) -> float | None:
        """GiB one reader moves in the logged phase: ``weights_gib``, except from the page
        cache, where each of the ``tensor_parallel_size`` ranks copies only its shard.

        vLLM's default loader opens each shard with safetensors ``safe_open(...,
        framework="pt")`` and ``get_tensor``, which maps the file without copying ("forces
        the actual read (clone) since get_tensor() is zero-copy on CPU", ROCm/ATOM PR 1137,
        a loader of the same design); the layer's ``weight_loader`` then narrows the tensor
        to the rank's shard and copies that. From the page cache a rank therefore touches
        about ``weights_gib / TP`` (the "Model loading took X GiB" figure). From a cold
        disk the ranks' shards together are the whole checkpoint, read once from the
        device, so ``weights_gib`` stays the measure there."""
        if self.weights_gib is None:
            return None
        if self.load_path == "page-cache":
            return self.weights_gib / self.tensor_parallel_size
        return self.weights_gib


class FittedConstant(BaseModel):
    """A constant fitted on published points: its value and the ids it was fitted on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    fitted_on: list[str] = Field(min_length=1)
    explanation: str = Field(min_length=1)


class ServingFit(BaseModel):
    """The constants ``benchmarks/fit_serving_model.py`` fitted, one mapping per name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str = Field(min_length=1)
    constants: dict[str, FittedConstant]
    startup: dict[str, FittedConstant] = Field(default_factory=dict)
    startup_held_out: list[str] = Field(
        default_factory=list,
        description="Startup logs left out of the startup fit: their errors are out-of-sample",
    )


class HeldOutError(BaseModel):
    """The median |error| of one figure over the points a held-out benchmark predicted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    median: float = Field(ge=0)
    points: int = Field(ge=1, description="How many held-out points measured this figure")


class ServingMargin(BaseModel):
    """The serving model's error held out by publisher, as ``benchmarks/bench_serving_loso.py
    --write-margin`` measured it (``data/serving-margin.yaml``): the SLO margin of ``size``
    and ``plan`` (:func:`gpustrata.vllm.calibration.measured_margin`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    date: str = Field(min_length=1, description="UTC day of the run (YYYY-MM-DD)")
    method: str = Field(min_length=1)
    publishers: list[str] = Field(min_length=2)
    points: list[str] = Field(min_length=1, description="Every point held out and predicted")
    errors: dict[Literal["tpot", "ttft", "throughput"], HeldOutError] = Field(
        description="The simulator's held-out errors (gpustrata.vllm.simulate)"
    )
    closed_form: dict[Literal["tpot", "ttft", "throughput"], HeldOutError] = Field(
        default_factory=dict,
        description=(
            "The closed form's held-out errors with the same folds' constants "
            "(gpustrata.vllm.performance.predict_serving, what size ranks candidates by)"
        ),
    )

    @model_validator(mode="after")
    def _has_tpot_and_ttft(self) -> ServingMargin:
        for name, errors in (("errors", self.errors), ("closed_form", self.closed_form)):
            missing = sorted({"tpot", "ttft"} - set(errors))
            if missing and (errors or name == "errors"):
                raise ValueError(f"{name} lacks {', '.join(missing)}")
        return self


def _read(filename: str) -> Any:
    return packaged_document(filename)


def _entries(filename: str, doc: Any, key: str) -> list[Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise CatalogError(f"{filename}: expected a mapping with a list under {key!r}")
    return list(doc[key])


def _parse(filename: str, key: str, model: type[_M], entries: list[Any]) -> list[_M]:
    out: list[_M] = []
    for i, raw in enumerate(entries):
        try:
            out.append(model.model_validate(raw))
        except ValidationError as exc:
            raise CatalogError(f"{filename}: {key} entry {i} is invalid: {exc}") from exc
    return out


@functools.cache
def load_serving_calibration() -> tuple[CalibrationPoint, ...]:
    """The published serving results of ``data/serving-calibration.yaml`` (cached)."""
    name = "data/serving-calibration.yaml"
    doc = _read(name)
    points = _parse(name, "points", CalibrationPoint, _entries(name, doc, "points"))
    seen: set[str] = set()
    for p in points:
        if p.id in seen:
            raise CatalogError(f"{name}: point id {p.id!r} repeats")
        seen.add(p.id)
    return tuple(points)


@functools.cache
def load_startup_logs() -> tuple[StartupLog, ...]:
    """The published startup logs of ``data/startup-logs.yaml`` (cached)."""
    name = "data/startup-logs.yaml"
    doc = _read(name)
    return tuple(_parse(name, "logs", StartupLog, _entries(name, doc, "logs")))


@functools.cache
def load_serving_fit() -> ServingFit:
    """The fitted constants of ``data/serving-fit.yaml`` (cached)."""
    return packaged_model("data/serving-fit.yaml", ServingFit)


@functools.cache
def load_serving_margin() -> ServingMargin:
    """The held-out-by-publisher errors of ``data/serving-margin.yaml`` (cached); a missing
    or invalid file is a :class:`CatalogError` naming it."""
    return packaged_model("data/serving-margin.yaml", ServingMargin)
