"""`gpustrata capacity`: will the model fit, how much KV cache, how long to start.

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
  ``startup_seconds``, ``startup_budget_seconds``, ``longest_step_seconds``; plus
  ``model``, ``gpu``, ``stack``, ``settings`` (resolved engine settings), ``defaults``
  (settings that took vLLM's default, with why), ``memory_budget`` (each term as a
  value/explanation pair), ``fits``, ``vllm_error`` and ``what_if`` (rows with
  ``gpu``, ``tensor_parallel_size``, ``pipeline_parallel_size``, ``gpus``,
  ``weights_bytes_per_gpu``, ``kv_cache_tokens``,
  ``max_concurrent_full_length_sequences``, ``largest_max_model_len``,
  ``startup_seconds``, ``longest_step_seconds``, ``current``).

Exit codes: 0 the configuration fits; 1 vLLM would refuse to start (weights or one
``max_model_len`` request do not fit); 2 bad input (one line naming the flag, the
value and the fix).
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.catalog.hardware import (
    CatalogError,
    GpuModel,
    HardwareCatalog,
    load_hardware_catalog,
)
from gpustrata.core.errors import InputError
from gpustrata.spec.stack import BlockSize, KvCacheDtype, ModelDtype, ModelSpec
from gpustrata.vllm.capacity import (
    LOAD_GBPS_DEFAULTS,
    CapacityError,
    CapacityEstimate,
    estimate_capacity,
    gib,
    model_settings,
    resolve_architecture,
)

__all__ = ["WHAT_IF_TP_SIZES", "capacity_document", "capacity_text", "register_capacity_command"]

WHAT_IF_TP_SIZES = (1, 2, 4, 8)
"""Tensor-parallel sizes the what-if table tries (one node's worth of GPUs)."""

_FLAGS = {
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


def register_capacity_command(sub: Any) -> None:
    """Add ``capacity`` to the ``gpustrata`` sub-command parser."""
    p = sub.add_parser(
        "capacity",
        help="weights per GPU, KV-cache capacity, largest max_model_len, startup and step "
        "time for a stack model or ad hoc flags",
        description="Capacity of one vLLM engine, each figure with its derivation. Use a "
        "stack model (--stack/--file with --model-name) or --model with --gpu; flags given "
        "with a stack override its values. Exit 1 when vLLM would refuse to start.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--stack", help="stack name: reads stacks/Pulumi.<stack>.yaml")
    src.add_argument("--file", type=Path, help="path of a Pulumi stack file")
    p.add_argument("--project-dir", type=Path, default=Path("."), help="Pulumi project dir")
    p.add_argument("--model-name", help="the stack model to size (default: the only one)")
    p.add_argument("--model", help="model catalogue id or alias, or a path to a config.json")
    p.add_argument("--gpu", help="catalogue GPU id (h100-sxm-80gb) or GFD product label")
    p.add_argument("--tp", help="tensor_parallel_size")
    p.add_argument("--pp", help="pipeline_parallel_size")
    p.add_argument("--max-model-len", help="max_model_len (default: the model's maximum)")
    p.add_argument("--gpu-memory-utilization", help="fraction of GPU memory (vLLM default 0.92)")
    p.add_argument("--dtype", help="model dtype: " + ", ".join(get_args(ModelDtype)))
    p.add_argument("--kv-cache-dtype", help="KV cache dtype: " + ", ".join(get_args(KvCacheDtype)))
    p.add_argument(
        "--block-size", help="KV block size: " + ", ".join(map(str, get_args(BlockSize)))
    )
    p.add_argument("--max-num-batched-tokens", help="max_num_batched_tokens (default: vLLM's)")
    p.add_argument("--max-num-seqs", help="max_num_seqs (default: vLLM's)")
    p.add_argument("--quantization", help="weight quantisation (fp8, awq, gptq, mxfp4, ...)")
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs / torch.compile")
    p.add_argument("--weights-source", help="huggingface, s3, pvc or local-nvme")
    p.add_argument("--load-gbps", help="measured weight load bandwidth in GB/s")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_capacity)


# --------------------------------------------------------------------------- input


def _int(flag: str, raw: str | None, low: int, example: str) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if value < low:
        raise InputError(f"{flag} {raw!r}: expected an integer >= {low}, e.g. {example}")
    return value


def _float(flag: str, raw: str | None, ok: Callable[[float], bool], fix: str) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not ok(value):
        raise InputError(f"{flag} {raw!r}: {fix}")
    return value


def _choice(flag: str, raw: str | None, choices: Iterable[object]) -> str | None:
    if raw is None:
        return None
    allowed = [str(c) for c in choices]
    if raw not in allowed:
        near = difflib.get_close_matches(raw, allowed, 1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise InputError(f"{flag} {raw!r} is not accepted; {hint}use one of {', '.join(allowed)}")
    return raw


def _close(query: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Names closest to ``query`` (case-insensitive, also against the part after '/')."""
    q = query.strip().lower()
    scored: list[tuple[float, str]] = []
    for name in set(names):
        low = name.lower()
        short = low.rsplit("/", 1)[-1]
        score = max(
            difflib.SequenceMatcher(None, q, low).ratio(),
            difflib.SequenceMatcher(None, q, short).ratio(),
            0.9 if q and q in low else 0.0,
        )
        scored.append((score, name))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [name for score, name in scored[:n] if score >= 0.4]


def _resolve_model(raw: str, base: Path | None = None) -> ModelArchitecture:
    catalog = load_model_catalog()
    try:
        arch = resolve_architecture(raw, catalog, base)
    except CatalogError as exc:
        raise InputError(f"--model {raw!r}: {exc}") from None
    if arch is None:
        if raw.endswith(".json") or raw.startswith(("/", "./", "../", "~")):
            raise InputError(
                f"--model {raw!r}: no such file; give a config.json (or a directory holding "
                "one) or a model catalogue id"
            )
        names = [n for m in catalog for n in m.names()]
        near = _close(raw, names)
        hint = f"close matches: {', '.join(near)}" if near else "see catalog/data/models.yaml"
        raise InputError(
            f"--model {raw!r} is neither a model catalogue id nor a path to a config.json; {hint}"
        )
    return arch


def _resolve_gpu(raw: str, hardware: HardwareCatalog) -> GpuModel:
    gpu = hardware.gpu(raw)
    if gpu is None:
        names = [
            *hardware.gpus,
            *(label for g in hardware.gpus.values() for label in g.gfd_products),
        ]
        near = _close(raw, names)
        hint = f"close matches: {', '.join(near)}" if near else f"known: {', '.join(hardware.gpus)}"
        raise InputError(f"--gpu {raw!r} is not a catalogue GPU id or GFD product label; {hint}")
    return gpu


@dataclass
class _Target:
    """What to size: the model, the GPU, the settings, and where they came from."""

    arch: ModelArchitecture
    gpu: GpuModel
    settings: dict[str, Any]
    stack: str | None
    model_name: str | None
    hardware: HardwareCatalog


def _stack_model(
    args: argparse.Namespace,
) -> tuple[ModelSpec | None, GpuModel | None, str | None, HardwareCatalog]:
    """The stack model named by --model-name (or the only one), with its pool's GPU."""
    hardware = load_hardware_catalog()
    if args.stack is None and args.file is None:
        if args.model_name:
            raise InputError("--model-name needs a stack: add --stack NAME or --file PATH")
        return None, None, None, hardware
    from gpustrata.cli.app import _load

    path, stack, plan, _ = _load(args)
    hardware = hardware.extended(plan.spec.catalog.gpus, plan.spec.catalog.instances)
    names = list(plan.models)
    if not names:
        raise InputError(f"{path}: the stack serves no models; pass --model and --gpu instead")
    if args.model_name is None:
        if len(names) > 1:
            raise InputError(
                f"--model-name is required: stack {stack} serves {', '.join(names)}; "
                f"e.g. --model-name {names[0]}"
            )
        name = names[0]
    elif args.model_name not in plan.models:
        near = difflib.get_close_matches(args.model_name, names, 1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise InputError(
            f"--model-name {args.model_name!r} is not a model of stack {stack}; {hint}"
            f"use one of {', '.join(names)}"
        )
    else:
        name = args.model_name
    mp = plan.models[name]
    return mp.spec, mp.pool.gpu, f"{stack} ({path})", hardware


def _target(args: argparse.Namespace) -> _Target:
    spec, pool_gpu, stack, hardware = _stack_model(args)
    settings: dict[str, Any] = {} if spec is None else model_settings(spec)
    flags: dict[str, Any] = {
        "tensor_parallel_size": _int("--tp", args.tp, 1, "1, 2, 4 or 8"),
        "pipeline_parallel_size": _int("--pp", args.pp, 1, "1 or 2"),
        "max_model_len": _int("--max-model-len", args.max_model_len, 16, "32768"),
        "gpu_memory_utilization": _float(
            "--gpu-memory-utilization",
            args.gpu_memory_utilization,
            lambda v: 0 < v <= 1,
            "use a fraction in (0, 1] such as 0.9",
        ),
        "dtype": _choice("--dtype", args.dtype, get_args(ModelDtype)),
        "kv_cache_dtype": _choice("--kv-cache-dtype", args.kv_cache_dtype, get_args(KvCacheDtype)),
        "block_size": _choice("--block-size", args.block_size, get_args(BlockSize)),
        "max_num_batched_tokens": _int(
            "--max-num-batched-tokens", args.max_num_batched_tokens, 1, "8192"
        ),
        "max_num_seqs": _int("--max-num-seqs", args.max_num_seqs, 1, "256"),
        "quantization": args.quantization,
        "weights_source": _choice("--weights-source", args.weights_source, LOAD_GBPS_DEFAULTS),
        "load_gbps": _float(
            "--load-gbps",
            args.load_gbps,
            lambda v: 0 < v <= 1000,
            "use a positive bandwidth in GB/s such as 1.0",
        ),
    }
    if flags["block_size"] is not None:
        flags["block_size"] = int(flags["block_size"])
    if args.enforce_eager:
        flags["enforce_eager"] = True
    settings.update({k: v for k, v in flags.items() if v is not None})

    if args.model is not None:
        arch = _resolve_model(args.model)
    elif spec is not None:
        found = resolve_architecture(spec.model, load_model_catalog())
        if found is None:
            raise InputError(
                f"stack model {spec.name}: {spec.model!r} is not in the model catalogue; "
                "pass --model with a catalogue id or a config.json path"
            )
        arch = found
    else:
        raise InputError(
            "name what to size: --stack NAME [--model-name M], or --model ID|CONFIG.JSON "
            "with --gpu ID"
        )
    if args.gpu is not None:
        gpu = _resolve_gpu(args.gpu, hardware)
    elif pool_gpu is not None:
        gpu = pool_gpu
    else:
        raise InputError(
            "--gpu is required with --model: a catalogue GPU id such as h100-sxm-80gb or a "
            "GFD product label such as NVIDIA-H100-80GB-HBM3"
        )
    name = spec.name if spec is not None else None
    return _Target(arch, gpu, settings, stack, name, hardware)


def _estimate(target: _Target, **overrides: Any) -> CapacityEstimate:
    try:
        return estimate_capacity(target.arch, target.gpu, **{**target.settings, **overrides})
    except CapacityError as exc:
        flag = _FLAGS.get(exc.setting, exc.setting)
        key = {"weights.source": "weights_source", "weights.load_gbps": "load_gbps"}.get(
            exc.setting, exc.setting
        )
        value = {**target.settings, **overrides}.get(key)
        shown = f" {value}" if value is not None else ""
        raise InputError(f"{flag}{shown}: {exc}") from None


def _what_if(target: _Target, current: CapacityEstimate) -> list[CapacityEstimate]:
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


def _row(est: CapacityEstimate, current: CapacityEstimate) -> dict[str, Any]:
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
    }


def capacity_document(
    est: CapacityEstimate,
    what_if: Sequence[CapacityEstimate] = (),
    stack: str | None = None,
    model_name: str | None = None,
) -> dict[str, Any]:
    """The JSON form (see the module docstring for the keys)."""
    doc: dict[str, Any] = {
        "model": est.model_id,
        "gpu": est.gpu_id,
        "stack": stack,
        "model_name": model_name,
        "settings": _settings(est),
        "defaults": dict(est.defaults),
    }
    for key, (value, why) in _figures(est).items():
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
    doc["what_if"] = [_row(r, est) for r in what_if]
    return doc


def _refusal(est: CapacityEstimate) -> str | None:
    """Why vLLM would not start with these settings, or None."""
    if est.fits:
        return None
    if not est.weights_fit:
        return (
            f"weights ({gib(est.weights.bytes_per_gpu)}) and overheads exceed "
            f"gpu_memory_utilization x GPU memory ({gib(est.memory.requested.value)}): "
            "'No available memory for the cache blocks'; raise --tp or use a larger GPU"
        )
    return est.kv.vllm_error


def _fmt(key: str, value: int | float) -> str:
    if key.endswith("_bytes_per_gpu") or key == "weights_bytes_total":
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
    "max_concurrent_full_length_sequences": "full-length sequences",
    "largest_max_model_len": "largest max_model_len",
    "startup_seconds": "startup",
    "startup_budget_seconds": "startup budget (x safety)",
    "longest_step_seconds": "longest engine step",
}


def capacity_text(
    est: CapacityEstimate,
    what_if: Sequence[CapacityEstimate] = (),
    stack: str | None = None,
    model_name: str | None = None,
) -> str:
    """The report for people: figures, their working, the what-if table."""
    where = f", stack {stack} model {model_name}" if stack else ""
    lines = [
        f"Capacity of {est.model_id} on {est.gpus} x {est.gpu_id} "
        f"(TP {est.tensor_parallel_size} x PP {est.pipeline_parallel_size}){where}",
        "  settings: " + ", ".join(f"{k} {v}" for k, v in _settings(est).items() if v is not None),
    ]
    for name, why in est.defaults.items():
        lines.append(f"    {name}: {why}")
    lines.append("")
    figures = _figures(est)
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
        )
        rows = [header]
        for r in what_if:
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
    return "\n".join(lines)


def _cmd_capacity(args: argparse.Namespace) -> int:
    target = _target(args)
    est = _estimate(target)
    rows = _what_if(target, est)
    if args.format == "json":
        doc = capacity_document(est, rows, target.stack, target.model_name)
        print(json.dumps(doc, indent=2))
    else:
        print(capacity_text(est, rows, target.stack, target.model_name))
    return 0 if est.fits else 1
