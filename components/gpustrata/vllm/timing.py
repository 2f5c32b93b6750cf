"""Time estimates: engine startup (weights load + init) and the longest engine step."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.catalog.inputs import WeightSource
from gpustrata.catalog.serving import (
    STORAGE_KINDS,
    FittedConstant,
    StartupLog,
    load_serving_fit,
    load_startup_logs,
)
from gpustrata.vllm.terms import GB, CapacityError, gb
from gpustrata.vllm.weights import WeightsEstimate

__all__ = [
    "CUDAGRAPH_GC_FROZEN_FROM",
    "DEFAULT_CAPTURE_SIZES",
    "DEFAULT_EFFICIENCY",
    "LOAD_GBPS_DEFAULTS",
    "MIN_FITTED_LOGS",
    "MIN_KIND_LOGS",
    "MULTI_RANK_PAGE_CACHE",
    "PROCESS_START_S",
    "STARTUP_SAFETY_FACTOR",
    "STREAMER_TERMS",
    "LoggedStartupPrediction",
    "StartupEstimate",
    "StepEstimate",
    "WeightSourceName",
    "capture_gc_frozen",
    "disk_bandwidth",
    "fastest_logged_load",
    "fitted_engine_init",
    "forward_flops",
    "load_bandwidth",
    "load_path_bandwidth",
    "load_path_fixed_s",
    "logged_startup_prediction",
    "planner_load_paths",
    "startup_estimate",
    "step_estimate",
    "streamer_bandwidth",
]


STARTUP_SAFETY_FACTOR = 1.5
"""Startup probe budget = estimated startup x this factor (gpustrata default)."""

DEFAULT_EFFICIENCY = 0.4
"""Fraction of dense BF16 peak a large prefill step reaches (gpustrata default: model
FLOP utilisation of 30-60 % is typical for long prefills; 0.4 errs towards a longer
step, i.e. a safer liveness budget)."""

WeightSourceName = WeightSource
"""The weight sources the estimate knows (:data:`gpustrata.catalog.inputs.WeightSource`)."""

LOAD_GBPS_DEFAULTS: Mapping[str, tuple[float, str]] = {
    "huggingface": (
        0.25,
        "gpustrata default: half the ~500 MB/s that plain Python downloads top out at "
        "(huggingface/hf_transfer README), for shared Hub bandwidth plus the read back "
        "from the download cache",
    ),
    "s3": (
        1.0,
        "gpustrata default: Run:ai Model Streamer (vLLM --load-format runai_streamer) "
        "read 15 GB in 14.3 s (~1.05 GB/s) at concurrency 16 in NVIDIA's benchmark "
        "(developer.nvidia.com/blog/reducing-cold-start-latency-for-llm-inference-with-"
        "nvidia-runai-model-streamer); S3 matches or beats that with enough concurrency",
    ),
    "pvc": (
        0.3,
        "gpustrata default: vLLM's safetensors loader read 15 GB from an EBS gp3 volume "
        "in 48 s (~0.31 GB/s) in NVIDIA's Run:ai Model Streamer benchmark; gp3's baseline "
        "is 125 MiB/s unless more throughput is provisioned",
    ),
    "local-nvme": (
        2.0,
        "gpustrata default: the Run:ai Model Streamer read 15 GB from an io2 SSD in 7.5 s "
        "(~2 GB/s) in NVIDIA's benchmark; instance-store NVMe is at least that fast",
    ),
}
"""Cited weight load bandwidth in GB/s (10^9 bytes/s) per ``weights.source``: what the
planner used before the fit, and still uses for a source no published log was fitted on
(``pvc``: no published log reads from a network volume)."""

MIN_FITTED_LOGS = 2
"""A load path's fitted bandwidth replaces the cited default only when fitted on this many
logs (a single log is its own fit)."""

MIN_KIND_LOGS = 1
"""A stated storage kind's own disk rate replaces the pooled one from this many logs. The
default loader reads in one thread, shard after shard and tensor after tensor
(``vllm@v0.10.0:vllm/model_executor/model_loader/weight_utils.py``
``safetensors_weights_iterator``: one ``safe_open`` per shard, one ``get_tensor`` after
another, read in the PyPI wheel), so its rate is set by the storage's latency, not by the
throughput provisioned: the Run:ai whitepaper's gp3 volume at 1,000 MiB/s and io2 volume at
4,000 MiB/s both read at 0.34 GB/s. One log of a kind therefore predicts another of that
kind better than the pooled rate of other kinds (held out by log, each of those two was
x0.5 at the pooled rate and is within 2 % of the other's rate); such a kind keeps a range
to the pooled rate (:func:`disk_bandwidth`) and its ``fitted_on`` says how many logs stand
behind it."""

DEFAULT_CAPTURE_SIZES: Mapping[str, int] = {"v0": 35, "v1": 67}
"""CUDA graph batch sizes vLLM captures by default: V0's ``_BATCH_SIZES_TO_CAPTURE``
(1, 2, 4, then 8 to 256 in steps of 8: 35) and V1's ``cudagraph_capture_sizes`` before 0.11
(1, 2, 4, then 8 to 512 in steps of 8: 67; vllm-project/vllm issue 20098: "By default,
vLLM captures 67 graphs"). Later releases capture 51 (to 256 in steps of 8, then 16); the
planner keeps 67, the longer capture."""

CUDAGRAPH_GC_FROZEN_FROM: tuple[int, int, int] = (0, 10, 0)
"""The first vLLM release whose V1 engine captures CUDA graphs with Python's garbage
collector frozen: vllm-project/vllm PR 21146 ("[Core] Freeze gc during cuda graph capture
to speed up init", merged 2025-07-22), first released in 0.10.0: that release's
``GPUModelRunner.capture_model`` wraps the capture in ``freeze_gc()`` and reads
``VLLM_ENABLE_CUDAGRAPH_GC`` (``vllm@v0.10.0:vllm/v1/worker/gpu_model_runner.py``,
``vllm@v0.10.0:vllm/envs.py``, read in the PyPI wheel
vllm-0.10.0-cp38-abi3-manylinux1_x86_64). Before it every captured piece could run a
``gc.collect()``; PR 24128
measured the difference on the same engine: "Capturing CUDA graphs ... 67/67 [00:06" with
the freeze, "67/67 [00:39" with ``VLLM_ENABLE_CUDAGRAPH_GC=1`` (the old behaviour). The
startup fit therefore gives capture its own per-layer-per-size rate on each side of this
release."""

_RELEASE = re.compile(r"^(?:vLLM )?(\d+)\.(\d+)(?:\.(\d+))?(?![\dA-Za-z])")


def capture_gc_frozen(vllm_release: str | None, engine: Literal["v0", "v1"] = "v1") -> bool:
    """Whether an engine of *vllm_release* captures CUDA graphs with the garbage collector
    frozen (:data:`CUDAGRAPH_GC_FROZEN_FROM`, V1 only). None: the reference release
    (:func:`gpustrata.catalog.vllm_releases.reference_release`). A release that cannot be
    read (``"not stated"``, ``"0.2x"``) counts as before the freeze: the longer capture."""
    if engine == "v0":
        return False
    if vllm_release is None:
        from gpustrata.catalog.vllm_releases import reference_release

        vllm_release = reference_release()
    m = _RELEASE.match(vllm_release.strip())
    if m is None:
        return False
    release = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return release >= CUDAGRAPH_GC_FROZEN_FROM


PROCESS_START_S = 20.0
"""Seconds from container start to the engine's model load that no vLLM log line times
(imports, config resolution, process spawn, API server start): "A vLLM cold start (all
caches cleared) can take up to 19s before initializing the device" (vllm-project/vllm
issue 15225) and "even though the init engine shows 30.93s, the reponse is received after
59s in total. There's a loss of ~30s, which isn't logged" (issue 20264: 59 - 34.11 s init
- 0.90 s load = 24 s). gpustrata takes 20 s; the published logs time load and init only,
so this term is cited, not fitted."""


def planner_load_paths(
    weights_source: str, *, hf_transfer: bool = False, streamer_distributed: bool = False
) -> tuple[tuple[str, bool], ...]:
    """The logged load paths (``StartupLog.load_path``) a first start from ``weights_source``
    goes through, each with whether each reader moves the whole checkpoint (True) or one
    GPU's share (False).

    huggingface: one download of the whole checkpoint (hf_transfer's when
    ``HF_HUB_ENABLE_HF_TRANSFER`` is set), then the read from the disk it was written to;
    local-nvme: that read alone. vLLM's default loader has every rank read every tensor of
    every shard and keep its slice (``vllm/model_executor/model_loader/weight_utils.py``
    ``safetensors_weights_iterator``), so a read moves the whole checkpoint whatever the TP.
    s3: the Run:ai Model Streamer, likewise the whole checkpoint per rank unless its
    ``distributed`` option splits it across the ranks. pvc has no published log: the cited
    default bandwidth over the whole checkpoint.
    """
    if weights_source == "huggingface":
        return (("hf-download-fast" if hf_transfer else "hf-download", True), ("disk", True))
    if weights_source == "s3":
        return (("s3-streamer", not streamer_distributed),)
    if weights_source == "local-nvme":
        return (("disk", True),)
    return ()


# --------------------------------------------------------------------------- time


@dataclass(frozen=True)
class StartupEstimate:
    """Time from container start to a ready engine: load + init, and the probe budget."""

    load_gbps: float
    """The bandwidth of the load's longest part (the download for a Hub start)."""
    load_source: str
    """Where the bandwidth comes from (spec override, the fit, or the default's citation)."""
    load_s: float
    init_s: float
    init_source: str
    total_s: float
    safety_factor: float
    budget_s: float
    """``total_s x safety_factor``: what probes and thresholds must allow."""
    explanation: str
    """The chain, e.g. ``141.1 GB / 1.0 GB/s + 20 s start + 89 s init = 250 s, x1.5``."""
    optimistic_s: float | None = None
    """Load at the fastest published log of the fitted path + the same start and init, no
    safety factor; None where the bandwidth is the stack's or a cited default. Rules treat
    a window between this and ``budget_s`` as a judgement call (advisory), not a certain
    restart."""
    optimistic_explanation: str = ""
    process_s: float = 0.0
    """Container start to model load, untimed by vLLM's logs (:data:`PROCESS_START_S`);
    0 where the stack states its own init time."""
    fast_s: float = 0.0
    """The startup with every read of unstated storage at the fastest fitted storage kind
    (= ``total_s`` where the storage is known or nothing is read from a disk)."""
    slow_s: float = 0.0
    """The same at the slowest fitted storage kind: with ``fast_s``, the range the startup
    is known to where the storage is not stated."""
    storage: str = "not stated"
    """The storage kind the default loader reads (:data:`gpustrata.catalog.serving.StorageKind`)."""


def startup_estimate(
    arch: ModelArchitecture,
    weights: WeightsEstimate,
    *,
    weights_source: str = "huggingface",
    load_gbps: float | None = None,
    load_gbps_source: str | None = None,
    engine_init_s: float | None = None,
    enforce_eager: bool = False,
    safety_factor: float = STARTUP_SAFETY_FACTOR,
    hf_transfer: bool = False,
    streamer_distributed: bool = False,
    capture_sizes: int | None = None,
    storage: str | None = None,
    storage_gbps: float | None = None,
    vllm_release: str | None = None,
) -> StartupEstimate:
    """Startup = process start + weight load + engine init, times a safety factor.

    Load: each part of :func:`planner_load_paths` (a Hub start downloads the whole
    checkpoint once, then each rank reads its share) at the bandwidth fitted on the
    published startup logs of that path (:func:`load_path_bandwidth`); ``load_gbps`` set in
    the stack replaces it (whole checkpoint / that bandwidth; *load_gbps_source* says where
    it was set when not in the stack, e.g. a cluster profile). Engine init (profiling, KV
    allocation, torch.compile, CUDA graph capture, MoE warm-up): :func:`fitted_engine_init`.
    Both come from the ``startup:`` section of ``catalog/data/serving-fit.yaml``; process
    start is :data:`PROCESS_START_S`, left out where the stack states its init time.
    ``hf_transfer``, ``streamer_distributed`` and ``capture_sizes`` are the conditions a
    manifest states (``HF_HUB_ENABLE_HF_TRANSFER``, the streamer's ``distributed`` option,
    ``--compilation-config`` capture sizes); ``vllm_release`` the engine's release (None:
    the reference release), which sets the CUDA graph capture rate
    (:data:`CUDAGRAPH_GC_FROZEN_FROM`).

    Storage: a default-loader read (the read-back of a Hub start, local-nvme, a pvc whose
    storage is stated) runs at the rate fitted for *storage*
    (:data:`gpustrata.catalog.serving.StorageKind`; local-nvme is ``local-disk``), capped by
    *storage_gbps* (a volume's provisioned throughput, e.g. gp3's 125 MiB/s baseline).
    Where the storage is not stated the point is the rate fitted on the disk logs that state
    none (``load_gbps_disk``; pvc: the cited
    default) and :attr:`StartupEstimate.fast_s` / :attr:`StartupEstimate.slow_s` span the
    fastest and slowest fitted storage kinds.
    """
    if load_gbps is None and weights_source not in LOAD_GBPS_DEFAULTS:
        known = ", ".join(LOAD_GBPS_DEFAULTS)
        raise CapacityError(
            "weights.source", f"weights source {weights_source!r} is not one of {known}"
        )
    if load_gbps is not None and load_gbps <= 0:
        raise CapacityError(
            "weights.load_gbps", f"load bandwidth {load_gbps} GB/s must be positive"
        )
    paths = planner_load_paths(
        weights_source, hf_transfer=hf_transfer, streamer_distributed=streamer_distributed
    )
    kind = storage or ("local-disk" if weights_source == "local-nvme" else "not stated")
    if weights_source == "pvc" and kind != "not stated":
        paths = (("disk", True),)
    parts: list[tuple[int, float, str, float]] = []  # (bytes, GB/s, label, fixed s)
    # (bytes, fast GB/s, slow GB/s) of each part whose storage is not stated
    spans: list[tuple[int, float, float, float]] = []
    fastest: tuple[float, str] | None = None

    def capped(rate: float, why: str) -> tuple[float, str]:
        if storage_gbps is not None and storage_gbps < rate:
            return storage_gbps, f"{why}; capped at the volume's {storage_gbps:g} GB/s"
        return rate, why

    if load_gbps is not None:
        gbps = load_gbps
        source = load_gbps_source or f"weights.load_gbps {load_gbps} set in the stack"
        parts.append((weights.total_bytes, gbps, weights_source, 0.0))
    elif not paths:
        gbps, source = capped(*LOAD_GBPS_DEFAULTS[weights_source])
        parts.append((weights.total_bytes, gbps, weights_source, 0.0))
        _, low, high, _ = disk_bandwidth()
        spans.append((weights.total_bytes, gbps, max(high, gbps), min(low, gbps)))
    else:
        sources = []
        for i, (path, whole) in enumerate(paths):
            if path == "disk" and kind != "not stated":
                point, _, _, why = disk_bandwidth(kind)
                rate, why = capped(point, f"fitted for {why}")
            elif path == "disk":
                rate, why = capped(*load_path_bandwidth(path))
                _, low, high, _ = disk_bandwidth()
            else:
                rate, why = load_path_bandwidth(path)
            size = weights.total_bytes if whole else weights.bytes_per_gpu
            if path == "disk" and kind == "not stated":
                spans.append((size, rate, max(high, rate), min(low, rate)))
            parts.append(
                (size, rate, path if whole else f"{path}, per GPU", load_path_fixed_s(path))
            )
            sources.append(f"{path}: {why}")
            if i == 0:
                stated = path == "disk" and kind != "not stated"
                fastest = fastest_logged_load(path, kind if stated else None)
                if fastest is not None and path == "disk" and storage_gbps is not None:
                    fastest = (min(fastest[0], storage_gbps), fastest[1])
        gbps, source = parts[0][1], "; ".join(sources)
    load_s = sum(fixed + size / (rate * GB) for size, rate, _, fixed in parts)
    faster = sum(size / (point * GB) - size / (fast * GB) for size, point, fast, _ in spans)
    slower = sum(size / (slow * GB) - size / (point * GB) for size, point, _, slow in spans)
    if engine_init_s is not None:
        init_s, init_source = float(engine_init_s), "startup_init_s set in the stack"
        process_s = 0.0
    else:
        init_s, init_source = fitted_engine_init(
            arch.num_hidden_layers,
            enforce_eager=enforce_eager,
            is_moe=arch.is_moe,
            capture_sizes=capture_sizes,
            vllm_release=vllm_release,
        )
        process_s = PROCESS_START_S
    total = process_s + load_s + init_s
    budget = total * safety_factor
    loads = " + ".join(
        f"{gb(size)} / {_rate(rate)} GB/s{f' + {fixed:g} s' if fixed else ''} ({label})"
        for size, rate, label, fixed in parts
    )
    start = f" + {process_s:.0f} s start" if process_s else ""
    why = (
        f"{loads}{start} + {init_s:.0f} s init = {total:.0f} s, x{safety_factor:g} = {budget:.0f} s"
    )
    optimistic, optimistic_why = None, ""
    if fastest is not None and fastest[0] > parts[0][1]:
        size0 = parts[0][0]
        rest = sum(fixed + size / (rate * GB) for size, rate, _, fixed in parts[1:])
        optimistic = size0 / (fastest[0] * GB) + rest + process_s + init_s
        optimistic_why = (
            f"{gb(size0)} at {fastest[0]:.2f} GB/s ({fastest[1]}) + the rest = {optimistic:.0f} s"
        )
    return StartupEstimate(
        fast_s=total - faster,
        slow_s=total + slower,
        storage=kind,
        optimistic_s=optimistic,
        optimistic_explanation=optimistic_why,
        load_gbps=gbps,
        load_source=source,
        load_s=load_s,
        init_s=init_s,
        init_source=init_source,
        total_s=total,
        safety_factor=safety_factor,
        budget_s=budget,
        explanation=why,
        process_s=process_s,
    )


def load_path_bandwidth(path: str) -> tuple[float, str]:
    """GB/s of a logged load path and why: its fitted constant where fitted on at least
    :data:`MIN_FITTED_LOGS` published logs, else the cited default of the planner source
    that path stands for."""
    fit = load_serving_fit().startup
    key = "load_gbps_" + path.replace("-", "_")
    if key in fit and len(fit[key].fitted_on) >= MIN_FITTED_LOGS:
        c = fit[key]
        return c.value, (
            f"fitted on {len(c.fitted_on)} published {path} startup logs, "
            f"catalog/data/serving-fit.yaml: {c.explanation}"
        )
    fallback = {"hf-download": "huggingface", "s3-streamer": "s3", "disk": "local-nvme"}
    return LOAD_GBPS_DEFAULTS[fallback.get(path, "huggingface")]


_NEAREST_PATH: Mapping[str, str] = {
    "s3-download": "s3-streamer",
    "hf-download-fast": "hf-download",
}
"""A path with no fitted log of its own reads at the nearest fitted path: a copy from
object storage makes the same parallel ranged GETs as the Run:ai streamer from it (the
copy's write to local disk aside); hf_transfer/hf_xet is at least the plain downloader."""

MULTI_RANK_PAGE_CACHE = "page-cache-multi-rank"
"""The fitted rate (``load_gbps_page_cache_multi_rank``) of each rank's copy from the page
cache when several tensor-parallel ranks of one host load at once. vLLM starts every rank's
worker together and each runs the same loader over the same shards at the same time
(``vllm@v0.10.0:vllm/model_executor/model_loader/default_loader.py`` ``load_weights`` in
every worker, ``weight_utils.py`` ``safetensors_weights_iterator``), so the ranks share the
host's memory bandwidth and its page cache: the published multi-rank page-cache loads ran
at 0.9-4.8 GB/s per rank (TP 2 and TP 8), the single-rank ones at 4.8-8.3 GB/s. Without a
multi-rank log (a held-out fold) the single-rank rate stands in for it."""


STREAMER_TERMS = ("local_streamer_efficiency", "load_gbps_local_streamer_ceiling")
"""The fitted terms of the Run:ai Model Streamer reading storage of stated throughput: rate =
min(efficiency x the storage's GB/s, ceiling). The streamer reads with a pool of concurrent threads
(``RUNAI_STREAMER_CONCURRENCY``; NVIDIA's benchmark ran 16, developer.nvidia.com/blog/
reducing-cold-start-latency-for-llm-inference-with-nvidia-runai-model-streamer), so unlike
the default loader (one reader, :data:`MIN_KIND_LOGS`) it approaches what the storage can
deliver, up to its own ceiling (the CPU buffer and the copy to the GPU): InstantTensor's
benchmark read 6.57 GB/s from a "50GB/s storage" and 6.50 GB/s from tmpfs on the same H200
host (scitix/InstantTensor@48b6353:docs/benchmark.md)."""


def streamer_bandwidth(storage_gbps: float, constants: Constants | None = None) -> float | None:
    """GB/s of the Run:ai streamer reading storage of *storage_gbps* stated throughput
    (:data:`STREAMER_TERMS`); None where the fit has no such terms."""
    fit = _constants(constants)
    if not all(k in fit for k in STREAMER_TERMS):
        return None
    eff, ceiling = (fit[k].value for k in STREAMER_TERMS)
    return min(eff * storage_gbps, ceiling)


def _page_cache_path(tensor_parallel_size: int, fit: Mapping[str, FittedConstant]) -> str:
    """The load path whose rate a page-cache read of *tensor_parallel_size* ranks runs at."""
    multi = "load_gbps_" + MULTI_RANK_PAGE_CACHE.replace("-", "_")
    return MULTI_RANK_PAGE_CACHE if tensor_parallel_size > 1 and multi in fit else "page-cache"


Constants = Mapping[str, FittedConstant]
"""The ``startup:`` constants by name: the catalogue's, or a refit's (the held-out bench)."""


def _constants(constants: Constants | None) -> Constants:
    return load_serving_fit().startup if constants is None else constants


def load_path_fixed_s(path: str, constants: Constants | None = None) -> float:
    """The fixed seconds of every load along a logged path (requests, connection ramp-up,
    file opens), fitted with its bandwidth where the path has enough logs; else 0."""
    c = _constants(constants).get("load_fixed_s_" + path.replace("-", "_"))
    return c.value if c is not None else 0.0


def disk_bandwidth(
    storage: str = "not stated", constants: Constants | None = None
) -> tuple[float, float, float, str]:
    """(point, low, high GB/s, why) of vLLM's default loader reading files from *storage*
    (:data:`gpustrata.catalog.serving.StorageKind`).

    A stated kind fitted on at least :data:`MIN_FITTED_LOGS` logs of its own
    (``load_gbps_disk_<kind>``) is a point (low = high); on one log (:data:`MIN_KIND_LOGS`)
    its point, with a range to the pooled rate, so thin evidence says so. Otherwise the
    point is the rate fitted on the disk logs that state no storage (``load_gbps_disk``:
    what unnamed storage ran at) and the range spans the slowest to the fastest fitted kind:
    where the storage is unknown, the load is known only that well.
    """
    fit = _constants(constants)
    kinds = {
        kind: fit[key]
        for kind in STORAGE_KINDS
        if (key := "load_gbps_disk_" + kind.replace("-", "_")) in fit
        and len(fit[key].fitted_on) >= MIN_KIND_LOGS
    }
    pooled = fit.get("load_gbps_disk")
    point = pooled.value if pooled is not None else LOAD_GBPS_DEFAULTS["local-nvme"][0]
    if storage in kinds:
        c = kinds[storage]
        n = len(c.fitted_on)
        if n >= MIN_FITTED_LOGS:
            return c.value, c.value, c.value, f"{storage}: fitted on {n} published disk loads"
        # one log of the kind: its point, and a range to the pooled rate it borrows
        return (
            c.value,
            min(c.value, point),
            max(c.value, point),
            f"{storage}: fitted on 1 published disk load; range to the pooled {point:g} GB/s",
        )
    if not kinds:
        return point, point, point, "storage not stated; no storage kind fitted"
    rates = sorted((c.value, kind) for kind, c in kinds.items())
    low, high = min(rates[0][0], point), max(rates[-1][0], point)
    return (
        point,
        low,
        high,
        (
            f"storage {storage}: {point:g} GB/s fitted on unstated-storage disk loads, range "
            f"{low:g} ({rates[0][1]}) to {high:g} ({rates[-1][1]}) GB/s"
        ),
    )


def load_bandwidth(weights_source: str) -> tuple[float, str]:
    """GB/s of the longest load part of ``weights_source`` (the download for a Hub start)
    and why: see :func:`load_path_bandwidth`; a source with no logged path (pvc) has its
    cited default of :data:`LOAD_GBPS_DEFAULTS`."""
    paths = planner_load_paths(weights_source)
    if not paths:
        return LOAD_GBPS_DEFAULTS[weights_source]
    return load_path_bandwidth(paths[0][0])


def fastest_logged_load(path: str, storage: str | None = None) -> tuple[float, str] | None:
    """The fastest published load of a logged load path (of disk loads from *storage*, when
    given), in GB/s, and which log it is; None where fewer than :data:`MIN_FITTED_LOGS`
    logs qualify. Each log's rate is its weights per reader / load seconds
    (:attr:`StartupLog.load_gbps`).
    """
    rows = [
        (log.load_gbps, log.id)
        for log in load_startup_logs()
        if log.load_path == path
        and log.load_gbps is not None
        and (storage is None or log.storage == storage)
    ]
    if len(rows) < MIN_FITTED_LOGS:
        return None
    rate, log_id = max(rows)
    return rate, f"the fastest of {len(rows)} published {path} logs, {log_id}"


def fitted_engine_init(
    layers: int,
    *,
    enforce_eager: bool,
    is_moe: bool = False,
    torch_compile: bool = True,
    compile_cached: bool = False,
    engine: Literal["v0", "v1"] = "v1",
    capture_sizes: int | None = None,
    vllm_release: str | None = None,
    constants: Constants | None = None,
) -> tuple[float, str]:
    """Engine init seconds and their working, with the constants fitted on published logs
    (the ``startup:`` section of ``catalog/data/serving-fit.yaml``, or *constants*): base
    (profiling, KV cache, warm-up) + torch.compile (cold, or from the compile cache) + CUDA
    graph capture (per decoder layer per captured batch size, at the rate of
    *vllm_release*'s side of :data:`CUDAGRAPH_GC_FROZEN_FROM`; neither compile nor capture
    with enforce_eager) + MoE kernel warm-up for MoE models.

    On V1 the base and a cached compile are per decoder layer: vLLM splits the model's
    graph at every attention op and compiles, stores and loads each piece on its own ("we
    can see lots of submodules, each submodule is a piece of graph after splitting ...
    Every submodule can be identified by its index, and will be processed individually";
    from the cache "Directly load the 0-th graph ...", one line per piece:
    ``vllm@08b8d6a:docs/source/design/v1/torch_compile.md``; in the 0.10.0 wheel
    ``vllm/compilation/backends.py`` ``CompilerManager.compile`` calls ``self.load`` once per
    ``graph_index``), and the profiling and warm-up runs go through every piece. The upb-cn
    sweeps show it: with the compile cached, init less compile and capture is 0.20-0.23 s
    per layer on the L40S host for 24 to 48 layers, 0.28-0.38 on the A100 host. V0 has no
    pieces: a fixed base.
    """
    fit = _constants(constants)
    if engine == "v0" and "init_base_v0_s" in fit:
        base = fit["init_base_v0_s"]
        total = base.value
        parts = [f"{base.value:g} s base (profiling, KV cache; {len(base.fitted_on)} V0 logs)"]
    else:
        base = fit["init_base_s_per_layer"]
        total = base.value * layers
        parts = [
            f"{base.value:g} s x {layers} layers base (profiling, KV cache, warm-up; "
            f"{len(base.fitted_on)} logs)"
        ]
    if not enforce_eager:
        if torch_compile and compile_cached:
            c = fit["compile_cached_s_per_layer"]
            total += c.value * layers
            parts.append(f"{c.value:g} s x {layers} layers torch.compile from its cache")
        elif torch_compile:
            c = fit["compile_s_per_layer"]
            total += c.value * layers
            parts.append(f"{c.value:g} s x {layers} layers torch.compile ({len(c.fitted_on)} logs)")
        frozen = capture_gc_frozen(vllm_release, engine)
        key = "graph_capture_gc_frozen_s_per_layer_size"
        g = fit[key] if frozen and key in fit else fit["graph_capture_s_per_layer_size"]
        sizes = capture_sizes or DEFAULT_CAPTURE_SIZES[engine]
        total += g.value * layers * sizes
        regime = "gc frozen" if frozen and key in fit else "gc not frozen"
        parts.append(
            f"{g.value:g} s x {layers} layers x {sizes} sizes CUDA graph capture "
            f"({regime}; {len(g.fitted_on)} logs)"
        )
    if is_moe:
        m = fit["moe_warmup_s"]
        total += m.value
        parts.append(f"{m.value:g} s MoE kernel warm-up ({len(m.fitted_on)} log)")
    why = " + ".join(parts) + " (fitted on published vLLM startup logs, serving-fit.yaml)"
    return total, why


def _log_layers(log: StartupLog) -> tuple[int | None, bool]:
    """A log's decoder layers (its own figure or the catalogue's) and whether it is MoE."""
    from gpustrata.catalog.architectures import load_model_catalog

    arch = load_model_catalog().get(log.model)
    return log.layers or (arch.num_hidden_layers if arch else None), bool(arch and arch.is_moe)


@dataclass(frozen=True)
class LoggedStartupPrediction:
    """What the startup model says of one published log, beside what it logged."""

    point_s: float
    """The fitted prediction (the planner's point)."""
    low_s: float
    """The fast end: a disk load of unstated storage at the fastest fitted storage kind."""
    high_s: float
    """The slow end: the same at the slowest fitted kind; = point where storage is known."""
    cited_s: float
    """The cited defaults' prediction (what gpustrata planned with before any fit)."""
    logged_s: float
    how: str


def logged_startup_prediction(
    log: StartupLog, constants: Constants | None = None
) -> LoggedStartupPrediction:
    """The prediction for a published log, with *constants* (a refit's, for the held-out
    bench) or the catalogue's.

    Compares the log's load, its init, or both summed. Load: the log's weights per reader
    over the fitted bandwidth of its load path; a disk load over its stated storage's
    bandwidth, or, storage not stated, the rate of unstated-storage disk logs with the range of
    :func:`disk_bandwidth`. The cited defaults are :data:`LOAD_GBPS_DEFAULTS` of the planner
    source the path stands for over the whole checkpoint as logged, and a fixed 30 s init
    + 60 s for compile and graphs + 90 s for MoE.
    """
    fit = _constants(constants)
    fitted = low = high = default = logged = 0.0
    how: list[str] = []
    if log.load_s and log.reader_gib:
        size = log.reader_gib * (1 << 30)
        fixed = load_path_fixed_s(log.load_path, fit)
        if log.load_path == "disk":
            gbps, fast, slow, _ = disk_bandwidth(log.storage, fit)
        else:
            path: str = log.load_path
            if path == "page-cache" and log.tensor_parallel_size > 1:
                path = _page_cache_path(log.tensor_parallel_size, fit)
            if "load_gbps_" + path.replace("-", "_") not in fit:
                path = _NEAREST_PATH.get(path, path)
                fixed = load_path_fixed_s(path, fit)
            key = "load_gbps_" + path.replace("-", "_")
            gbps = fit[key].value if key in fit else LOAD_GBPS_DEFAULTS["pvc"][0]
            if path == "local-streamer" and log.storage_gbps is not None:
                gbps = streamer_bandwidth(log.storage_gbps, fit) or gbps
            fast = slow = gbps
        if log.storage_gbps is not None:  # no faster than the storage it reads
            gbps, fast, slow = (min(r, log.storage_gbps) for r in (gbps, fast, slow))
        planner = {
            "hf-download": "huggingface",
            "hf-download-fast": "huggingface",
            "s3-streamer": "s3",
            "s3-download": "s3",
        }.get(log.load_path, "local-nvme")
        today = LOAD_GBPS_DEFAULTS[planner][0]
        fitted += fixed + size / (gbps * GB)
        low += fixed + size / (slow * GB)
        high += fixed + size / (fast * GB)
        default += size / (today * GB)
        logged += log.load_s
        plus = f" + {fixed:g} s" if fixed else ""
        where = f" {log.storage}" if log.load_path == "disk" else ""
        how.append(f"load {log.reader_gib:.4g} GiB / {gbps:g} GB/s{plus} {log.load_path}{where}")
    if log.init_s:
        layers, moe = _log_layers(log)
        if layers is not None:
            init, _ = fitted_engine_init(
                layers,
                enforce_eager=log.enforce_eager,
                is_moe=moe,
                torch_compile=log.torch_compile,
                compile_cached=log.compile_cached,
                engine=log.engine,
                capture_sizes=log.capture_sizes,
                vllm_release=log.vllm_version,
                constants=fit,
            )
            fitted += init
            low += init
            high += init
            default += 30 + (0 if log.enforce_eager else 60) + (90 if moe else 0)
            logged += log.init_s
            how.append(f"init {init:.0f} s ({layers} layers{', MoE' if moe else ''})")
    return LoggedStartupPrediction(
        point_s=fitted,
        low_s=min(low, high),
        high_s=max(low, high),
        cited_s=default,
        logged_s=logged,
        how="; ".join(how),
    )


def _rate(gbps: float) -> str:
    """``1.0``, ``0.25``: one decimal unless more are needed."""
    return f"{gbps:.1f}" if round(gbps, 1) == gbps else f"{gbps:g}"


def _linear_params(arch: ModelArchitecture) -> float:
    """Parameters one token multiplies through: active params less embeddings and lm_head."""
    h, vocab = arch.hidden_size, arch.vocab_size
    embeds = vocab * h * (1 if arch.tie_word_embeddings else 2)
    return max(0.0, arch.params_active_b * 1e9 - embeds + (vocab * h if arch.is_moe else 0))


def forward_flops(
    arch: ModelArchitecture, tokens: float, context: float, logits_tokens: float
) -> float:
    """FLOPs of one forward pass over ``tokens`` tokens attending ``context`` tokens each.

    2 x tokens x (active params - embeddings - lm_head) + 2 x ``logits_tokens`` x vocab x
    hidden (logits are computed for the last token of each sequence) + 4 x heads x head_dim
    x tokens x context per layer (QK^T and PV), sliding layers attending at most their
    window, Gated DeltaNet layers 6 x value heads x key dim x value dim per token. The one
    FLOP count of the step estimate and the serving model.
    """
    linear = 2 * tokens * _linear_params(arch)
    logits = 2 * logits_tokens * arch.vocab_size * arch.hidden_size
    attn = 0.0
    # Gated DeltaNet: three 2-FLOP products (S^T k, k x delta, S^T q) over the state.
    gdn = 6 * (arch.linear_num_value_heads or 0) * (arch.linear_key_head_dim or 0)
    gdn *= arch.linear_value_head_dim or 0
    for kind in arch.layer_attention_types():
        if kind == "linear_attention":
            attn += gdn * tokens
            continue
        layer_ctx = (
            min(context, arch.sliding_window or context) if kind == "sliding_attention" else context
        )
        attn += 4 * arch.num_attention_heads * arch.head_dim * tokens * layer_ctx
    return linear + logits + attn


@dataclass(frozen=True)
class StepEstimate:
    """The longest engine step: a prefill of the largest batch."""

    tokens: int
    context_tokens: int
    flops: float
    effective_tflops: float
    seconds: float
    explanation: str


def step_estimate(
    arch: ModelArchitecture,
    gpu: GpuModel,
    *,
    tensor_parallel_size: int,
    tokens: int,
    max_model_len: int,
    max_num_seqs: int,
    efficiency: float = DEFAULT_EFFICIENCY,
) -> StepEstimate:
    """Prefill time of ``tokens`` tokens at the end of a ``max_model_len`` context.

    FLOPs = 2 x T x (active params - embeddings - lm_head) + 2 x min(T, max_num_seqs)
    x vocab x hidden (logits of the last token per sequence) + 4 x layers x heads x
    head_dim x T x context, where context is the average attended length (``max_model_len
    - T/2`` for a chunk at the end of a full prompt; ``T/2`` when the batch holds whole
    prompts) and sliding layers attend at most their window. Time = FLOPs / (dense BF16
    TFLOP/s x TP x efficiency); pipeline stages run one after another, so PP does not
    shorten a step.
    """
    tp = tensor_parallel_size
    t = tokens
    ctx = max_model_len - t / 2 if t < max_model_len else max_model_len / 2
    flops = forward_flops(arch, t, ctx, min(t, max_num_seqs))
    active = _linear_params(arch)
    rate = gpu.dense_bf16_tflops * 1e12 * tp * efficiency
    seconds = flops / rate
    why = (
        f"prefill of {t:,} tokens (context {ctx:,.0f}): 2 x {active / 1e9:.2f}B active params "
        f"+ attention + logits = {flops / 1e12:,.0f} TFLOP / ({gpu.dense_bf16_tflops:g} "
        f"TFLOP/s x TP {tp} x {efficiency:g} efficiency) = {seconds:.2f} s"
    )
    return StepEstimate(
        tokens=t,
        context_tokens=int(ctx),
        flops=flops,
        effective_tflops=rate / 1e12,
        seconds=seconds,
        explanation=why,
    )
