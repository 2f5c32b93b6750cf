"""What ``gpustrata capacity`` reports: will the model fit, how much KV cache, how long to start.

For a stack model (``--stack prod --model-name llama-70b``) or ad hoc flags (``--model
meta-llama/Llama-3.1-8B-Instruct --gpu l40s --tp 1``); flags given with a stack override
the stack's values (what-if). Output:

* text: every figure with its working (``<-`` lines) and a what-if table of the TP sizes
  (1, 2, 4, 8) x catalogue GPUs on which the model fits with the same settings;
* JSON (``--format json``): an object whose figures are ``{"value": ..., "explanation":
  ...}`` pairs under the keys ``weights_bytes_per_gpu``, ``weights_bytes_total``,
  ``kv_cache_memory_bytes_per_gpu``, ``kv_bytes_per_token_per_gpu``,
  ``kv_cache_page_size_bytes``, ``kv_cache_blocks``, ``kv_cache_tokens``,
  ``max_concurrent_full_length_sequences``, ``largest_max_model_len``,
  ``startup_seconds``, ``startup_fastest_seconds`` and ``startup_slowest_seconds`` (the
  range over the fitted storage kinds where the storage is not stated),
  ``startup_budget_seconds``, ``longest_step_seconds`` (with
  ``--kv-offloading-size`` also ``kv_cache_host_bytes`` and ``kv_cache_host_tokens``); plus
  ``model``, ``gpu``, ``stack``, ``settings`` (resolved engine settings), ``defaults``
  (settings that took vLLM's default, with why), ``memory_budget`` (each term as a
  value/explanation pair), ``fits``, ``vllm_error`` and ``what_if`` (rows with
  ``gpu``, ``tensor_parallel_size``, ``pipeline_parallel_size``, ``gpus``,
  ``weights_bytes_per_gpu``, ``kv_cache_tokens``,
  ``max_concurrent_full_length_sequences``, ``largest_max_model_len``,
  ``startup_seconds``, ``longest_step_seconds``, ``current``, ``predicted``: one
  replica's ``tpot_seconds``, ``ttft_seconds``, ``output_tokens_per_second`` at the
  stack's or the reference workload by the closed form, and for the current row
  ``simulated``: the simulated means ``plan`` and ``size`` judge by; or null).

The flags and the command itself live in :mod:`gpustrata.cli.capacity`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel, HardwareCatalog
from gpustrata.core.errors import InputError
from gpustrata.planning.serving import ServingAtSettings, WorkloadTooLong, serving_at_settings
from gpustrata.spec.serving import WorkloadSpec
from gpustrata.vllm.capacity import (
    CapacityError,
    CapacityEstimate,
    estimate_capacity,
    gib,
)
from gpustrata.vllm.offload import VLLM_CPU_SPEC_SRC, host_memory
from gpustrata.vllm.performance import Workload

__all__ = [
    "SETTING_FLAGS",
    "WHAT_IF_TP_SIZES",
    "CapacityTarget",
    "capacity_document",
    "capacity_text",
    "estimate",
    "what_if",
]

WHAT_IF_TP_SIZES = (1, 2, 4, 8)
"""Tensor-parallel sizes the what-if table tries (one node's worth of GPUs)."""

SETTING_FLAGS = {
    "tensor_parallel_size": "--tp",
    "pipeline_parallel_size": "--pp",
    "max_model_len": "--max-model-len",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "dtype": "--dtype",
    "kv_cache_dtype": "--kv-cache-dtype",
    "block_size": "--block-size",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "quantization": "--quantization",
    "weights.source": "--weights-source",
    "weights.load_gbps": "--load-gbps",
}
"""The command-line flag of each engine setting (capacity, size), for messages."""


@dataclass
class CapacityTarget:
    """What to size: the model, the GPU, the settings, and where they came from."""

    arch: ModelArchitecture
    gpu: GpuModel
    settings: dict[str, Any]
    stack: str | None
    model_name: str | None
    hardware: HardwareCatalog
    kv_offloading_size: float | None = None
    """vLLM's native KV offload to CPU in GiB (``--kv-offloading-size``), or None."""
    workload: WorkloadSpec | None = None
    """The stack model's workload (None: the reference workload)."""
    replicas: int = 1
    """Replicas the workload is spread over (the stack's largest count)."""


def _host_figures(
    est: CapacityEstimate, target: CapacityTarget | None
) -> dict[str, tuple[int | float, str]]:
    """The KV cache held on the host (``--kv-offloading-size``): bytes and tokens."""
    if target is None or not target.kv_offloading_size:
        return {}
    host = host_memory(
        {"kv_offloading_size": target.kv_offloading_size}, {}, est.gpus, est.kv.bytes_per_token
    )
    if isinstance(host, str) or host.kv_tokens is None:
        return {}
    why = "; ".join(host.parts)
    return {
        "kv_cache_host_bytes": (host.kv_bytes, why),
        "kv_cache_host_tokens": (
            host.kv_tokens,
            f"{host.kv_bytes:,} B / {est.gpus} GPU rank(s) / {est.kv.bytes_per_token:,} KV bytes "
            f"per token per GPU (the offload spec splits each chunk over the ranks, "
            f"{VLLM_CPU_SPEC_SRC}); on the GPUs: {est.kv.tokens:,}, "
            f"together {est.kv.tokens + host.kv_tokens:,}",
        ),
    }


def estimate(target: CapacityTarget, **overrides: Any) -> CapacityEstimate:
    try:
        return estimate_capacity(target.arch, target.gpu, **{**target.settings, **overrides})
    except CapacityError as exc:
        flag = SETTING_FLAGS.get(exc.setting, exc.setting)
        key = {"weights.source": "weights_source", "weights.load_gbps": "load_gbps"}.get(
            exc.setting, exc.setting
        )
        value = {**target.settings, **overrides}.get(key)
        shown = f" {value}" if value is not None else ""
        raise InputError(f"{flag}{shown}: {exc}") from None


def what_if(target: CapacityTarget, current: CapacityEstimate) -> list[CapacityEstimate]:
    """Fitting configurations over WHAT_IF_TP_SIZES x catalogue GPUs (same settings)."""
    rows: list[CapacityEstimate] = []
    gpus = sorted(target.hardware.gpus.values(), key=lambda g: (g.memory_gib, g.id))
    for gpu in gpus:
        for tp in WHAT_IF_TP_SIZES:
            settings = {**target.settings, "tensor_parallel_size": tp}
            try:
                est = estimate_capacity(target.arch, gpu, **settings)
            except CapacityError:
                continue
            if est.fits:
                rows.append(est)
    if not any(_same(r, current) for r in rows):
        rows.append(current)
    rows.sort(key=lambda r: (r.gpus, -r.kv.tokens))
    return rows


def _same(a: CapacityEstimate, b: CapacityEstimate) -> bool:
    return (a.gpu_id, a.tensor_parallel_size, a.pipeline_parallel_size) == (
        b.gpu_id,
        b.tensor_parallel_size,
        b.pipeline_parallel_size,
    )


# --------------------------------------------------------------------------- output


def _figures(est: CapacityEstimate) -> dict[str, tuple[int | float, str]]:
    kv, st = est.kv, est.startup
    per_token = (
        f"{kv.bytes_per_token:,} B: sum over the GPU's "
        f"{kv.layers_per_stage[0] if len(kv.layers_per_stage) == 1 else 'stage'} layers of "
        f"page bytes / block size ({kv.page_size_bytes:,} B / {kv.block_size} tokens per "
        f"layer; {kv.cache_dtype}, {kv.num_kv_heads_per_rank} KV heads per GPU)"
    )
    states = sum(len(g.layers) for g in kv.groups if g.kind == "mamba")
    if states:
        per_token += (
            f"; the {states} Gated DeltaNet layers add nothing per token: each holds one "
            "state page per sequence"
        )
    # A storage kind that is stated (or has one fitted speed) gives no range: both ends
    # are the startup itself.
    ranged = st.slow_s > st.fast_s
    itself = f"storage {st.storage}: the startup itself"
    seqs = (
        f"floor({kv.num_blocks:,} blocks / {kv.blocks_per_request:,} blocks per "
        f"{est.max_model_len:,}-token request) = floor({kv.max_concurrency:.2f}) (vLLM's "
        "'Maximum concurrency')"
    )
    return {
        "weights_bytes_per_gpu": (est.weights.bytes_per_gpu, est.weights.explanation),
        "weights_bytes_total": (
            est.weights.total_bytes,
            "all parameters at their stored precision: what the loader reads",
        ),
        "kv_cache_memory_bytes_per_gpu": (
            max(0, est.memory.available_kv_bytes),
            est.memory.explanation,
        ),
        "kv_bytes_per_token_per_gpu": (kv.bytes_per_token, per_token),
        "kv_cache_page_size_bytes": (kv.page_size_bytes, kv.explanation.split("; ")[0]),
        "kv_cache_blocks": (kv.num_blocks, kv.explanation),
        "kv_cache_tokens": (kv.tokens, kv.explanation),
        "max_concurrent_full_length_sequences": (est.max_concurrent_full_length_sequences, seqs),
        "largest_max_model_len": (
            est.largest_max_model_len,
            "largest max_model_len whose one request fits the KV memory minus the null block "
            "(binary search as vLLM's estimate_max_model_len), up to the model's "
            f"max_position_embeddings {est.model_max_len:,}",
        ),
        "startup_seconds": (
            round(st.total_s, 1),
            f"{st.explanation}; load bandwidth: {st.load_source}; init: {st.init_source}",
        ),
        "startup_fastest_seconds": (
            round(st.fast_s, 1),
            f"the startup with the read from storage {st.storage!r} at the fastest storage kind "
            "fitted on published logs (local disk); state weights.storage (or the cluster "
            "profile's storage.kind) to narrow the range"
            if ranged
            else itself,
        ),
        "startup_slowest_seconds": (
            round(st.slow_s, 1),
            "the same at the slowest storage kind fitted (EBS, network volume) or the cited "
            "default where it is slower"
            if ranged
            else itself,
        ),
        "startup_budget_seconds": (
            round(st.budget_s, 1),
            f"startup x safety factor {st.safety_factor:g}: the startup probe and RayService "
            "thresholds must allow this",
        ),
        "longest_step_seconds": (round(est.longest_step.seconds, 3), est.longest_step.explanation),
    }


def _settings(est: CapacityEstimate) -> dict[str, Any]:
    return {
        "tensor_parallel_size": est.tensor_parallel_size,
        "pipeline_parallel_size": est.pipeline_parallel_size,
        "max_model_len": est.max_model_len,
        "gpu_memory_utilization": est.gpu_memory_utilization,
        "dtype": est.dtype,
        "kv_cache_dtype": est.kv_cache_dtype,
        "block_size": est.block_size,
        "max_num_batched_tokens": est.max_num_batched_tokens,
        "max_num_seqs": est.max_num_seqs,
        "enable_chunked_prefill": est.chunked_prefill,
        "weights_source": est.weights_source,
    }


def _predicted(
    target: CapacityTarget | None, est: CapacityEstimate, *, simulate: bool = False
) -> ServingAtSettings | None:
    """A what-if row's predicted serving at the stack model's workload, else the reference
    workload (None: not predicted): the closed form, and with ``simulate`` (the current
    row) also the simulation ``plan`` and ``size`` judge by (0.1-1 s a row, too slow for
    every what-if row)."""
    if target is None:
        return None
    gpu = target.hardware.gpu(est.gpu_id)
    if gpu is None:
        return None
    try:
        return serving_at_settings(
            target.arch, gpu, est, target.workload, target.replicas, simulate=simulate
        )
    except WorkloadTooLong:
        return None


def _row(
    est: CapacityEstimate, current: CapacityEstimate, target: CapacityTarget | None = None
) -> dict[str, Any]:
    pred = _predicted(target, est, simulate=_same(est, current))
    predicted = None
    if pred is not None:
        p = pred.prediction
        predicted = {
            "workload": pred.workload_why,
            "tpot_seconds": round(p.tpot_seconds.value, 4),
            "ttft_seconds": round(p.ttft_seconds.value, 3),
            "output_tokens_per_second": round(p.output_tokens_per_second.value, 1),
            "simulated": None,
        }
        if pred.simulated is not None:
            j = pred.judged
            predicted["simulated"] = {
                "tpot_seconds": round(j.tpot_seconds.value, 4),
                "ttft_seconds": round(j.ttft_seconds.value, 3),
                "output_tokens_per_second": round(j.output_tokens_per_second.value, 1),
            }
    return {
        "gpu": est.gpu_id,
        "tensor_parallel_size": est.tensor_parallel_size,
        "pipeline_parallel_size": est.pipeline_parallel_size,
        "gpus": est.gpus,
        "weights_bytes_per_gpu": est.weights.bytes_per_gpu,
        "kv_cache_tokens": est.kv.tokens,
        "max_concurrent_full_length_sequences": est.max_concurrent_full_length_sequences,
        "largest_max_model_len": est.largest_max_model_len,
        "startup_seconds": round(est.startup.total_s, 1),
        "longest_step_seconds": round(est.longest_step.seconds, 3),
        "fits": est.fits,
        "current": _same(est, current),
        "predicted": predicted,
    }


def capacity_document(
    est: CapacityEstimate,
    what_if: Sequence[CapacityEstimate] = (),
    target: CapacityTarget | None = None,
) -> dict[str, Any]:
    """The JSON form (see the module docstring for the keys); with ``target`` (its stack
    and model name, if any), each what-if row carries its predicted serving."""
    doc: dict[str, Any] = {
        "model": est.model_id,
        "gpu": est.gpu_id,
        "stack": target.stack if target else None,
        "model_name": target.model_name if target else None,
        "settings": _settings(est),
        "defaults": dict(est.defaults),
    }
    for key, (value, why) in (_figures(est) | _host_figures(est, target)).items():
        doc[key] = {"value": value, "explanation": why}
    m = est.memory
    doc["memory_budget"] = {
        "total": m.total.as_dict(),
        "requested": m.requested.as_dict(),
        "weights": m.weights.as_dict(),
        "activation": m.activation.as_dict(),
        "cuda_graphs": m.cuda_graphs.as_dict(),
        "runtime_overhead": m.runtime_overhead.as_dict(),
        "available_kv_per_stage": list(m.available_kv_per_stage),
    }
    doc["fits"] = est.fits
    doc["vllm_error"] = _refusal(est)
    doc["what_if"] = [_row(r, est, target) for r in what_if]
    return doc


def _refusal(est: CapacityEstimate) -> str | None:
    """Why vLLM would not start with these settings, or None."""
    return est.refusal


def _fmt(key: str, value: int | float) -> str:
    if key.endswith("_bytes_per_gpu") or key in ("weights_bytes_total", "kv_cache_host_bytes"):
        return f"{gib(value)} ({value / 1e9:,.1f} GB)"
    if key.endswith("_seconds"):
        return f"{value:,.2f} s" if value < 10 else f"{value:,.0f} s"
    if key.endswith("_bytes") or key == "kv_bytes_per_token_per_gpu":
        return f"{int(value):,} B"
    return f"{int(value):,}"


_LABELS = {
    "weights_bytes_per_gpu": "weights per GPU",
    "weights_bytes_total": "weights in total",
    "kv_cache_memory_bytes_per_gpu": "KV cache memory per GPU",
    "kv_bytes_per_token_per_gpu": "KV bytes per token per GPU",
    "kv_cache_page_size_bytes": "KV page (one layer, one block)",
    "kv_cache_blocks": "KV cache blocks",
    "kv_cache_tokens": "KV cache tokens",
    "kv_cache_host_bytes": "KV cache on the host",
    "kv_cache_host_tokens": "KV cache tokens on the host",
    "max_concurrent_full_length_sequences": "full-length sequences",
    "largest_max_model_len": "largest max_model_len",
    "startup_seconds": "startup",
    "startup_fastest_seconds": "startup, fastest storage",
    "startup_slowest_seconds": "startup, slowest storage",
    "startup_budget_seconds": "startup budget (x safety)",
    "longest_step_seconds": "longest engine step",
}


def capacity_text(
    est: CapacityEstimate,
    what_if: Sequence[CapacityEstimate] = (),
    target: CapacityTarget | None = None,
) -> str:
    """The report for people: figures, their working, the what-if table (with ``target``,
    its stack and model name, and each row's predicted TPOT, TTFT and throughput)."""
    where = f", stack {target.stack} model {target.model_name}" if target and target.stack else ""
    lines = [
        f"Capacity of {est.model_id} on {est.gpus} x {est.gpu_id} "
        f"(TP {est.tensor_parallel_size} x PP {est.pipeline_parallel_size}){where}",
        "  settings: " + ", ".join(f"{k} {v}" for k, v in _settings(est).items() if v is not None),
    ]
    for name, why in est.defaults.items():
        lines.append(f"    {name}: {why}")
    lines.append("")
    figures = _figures(est) | _host_figures(est, target)
    width = max(len(v) for v in _LABELS.values())
    for key, (value, why) in figures.items():
        lines.append(f"  {_LABELS[key]:<{width}}  {_fmt(key, value)}")
        lines.append(f"      <- {why}")
    lines.append("")
    if est.fits:
        lines.append("  vLLM starts with these settings.")
    else:
        lines.append(f"  vLLM refuses to start: {_refusal(est)}")
    if what_if:
        lines += ["", "What if (same settings; TP sizes x catalogue GPUs on which it fits):"]
        header = (
            "",
            "gpu",
            "TP",
            "GPUs",
            "weights/GPU",
            "KV tokens",
            "full-len seqs",
            "largest max_model_len",
            "startup",
            "step",
            "TPOT",
            "TTFT",
            "tok/s",
        )
        rows = [header]
        workload = ""
        now: ServingAtSettings | None = None
        loads: set[Workload] = set()
        for r in what_if:
            # The current row is simulated too (the line under the table), once.
            pred = _predicted(target, r, simulate=_same(r, est))
            if pred is not None:
                loads.add(pred.workload)
                if not workload or _same(r, est):  # the note names the current row's
                    workload = pred.workload_why
                if _same(r, est):
                    now = pred
                p = pred.prediction
                predicted = (
                    f"{p.tpot_seconds.value * 1e3:.1f} ms",
                    f"{p.ttft_seconds.value:.2f} s",
                    f"{p.output_tokens_per_second.value:,.0f}",
                )
            else:
                predicted = ("-", "-", "-")
            rows.append(
                (
                    "*" if _same(r, est) else "",
                    r.gpu_id,
                    str(r.tensor_parallel_size),
                    str(r.gpus),
                    gib(r.weights.bytes_per_gpu),
                    f"{r.kv.tokens:,}",
                    str(r.max_concurrent_full_length_sequences),
                    f"{r.largest_max_model_len:,}",
                    f"{r.startup.total_s:,.0f} s",
                    f"{r.longest_step.seconds:.2f} s",
                    *predicted,
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            lines.append(
                "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )
        lines.append(
            "  (* = the configuration above; rows where it does not fit are left out"
            + ("" if est.fits else ", except the current one")
            + ")"
        )
        if workload:
            # Only the reference load (each row's own max_num_seqs) differs between rows.
            each = " (the current row's; each row runs at its own max_num_seqs)"
            each = each if len(loads) > 1 else ""
            lines.append(
                f"  (TPOT, TTFT, tok/s: one replica predicted by the closed form at the "
                f"{workload}{each}; constants fitted on published runs, "
                "catalog/data/serving-fit.yaml)"
            )
        if now is not None and now.simulated is not None:
            j = now.judged
            lines.append(
                f"  * simulated (what plan and size judge by): TPOT "
                f"{j.tpot_seconds.value * 1e3:.1f} ms, TTFT {j.ttft_seconds.value:.2f} s, "
                f"{j.output_tokens_per_second.value:,.0f} tok/s: {j.tpot_seconds.explanation}"
            )
    return "\n".join(lines)
