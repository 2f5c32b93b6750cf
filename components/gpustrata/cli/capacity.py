"""``gpustrata capacity``: its flags, how they resolve to a model, a GPU and settings.

What the command prints (figures, the what-if table, the JSON keys) is
:mod:`gpustrata.reports.capacity`.

Exit codes: 0 the configuration fits; 1 vLLM would refuse to start (weights or one
``max_model_len`` request do not fit); 2 bad input (one line naming the flag, the
value and the fix).
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from gpustrata.cli.command import add_command
from gpustrata.cli.stack_args import add_stack_args, load_stack, model_sources_of
from gpustrata.core.errors import InputError
from gpustrata.core.terminal import clipped

# The closed sets name their values in --help; the catalogues and the stack models are
# loaded only when `capacity` or `size` runs (`check` starts without them).
from gpustrata.core.vllm_choices import BlockSize, KvCacheDtype, ModelDtype

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture
    from gpustrata.catalog.hardware import GpuModel, HardwareCatalog
    from gpustrata.catalog.model_sources import ModelSources
    from gpustrata.reports.capacity import CapacityTarget
    from gpustrata.spec.serving import ModelSpec, WorkloadSpec

__all__ = ["capacity_command", "register"]


def register(sub: Any) -> None:
    """Add ``capacity`` to the ``gpustrata`` sub-command parser."""
    p = add_command(sub, "capacity", capacity_command)
    add_stack_args(p, project_dir_help="Pulumi project dir")
    p.add_argument("--model-name", help="the stack model to size (default: the only one)")
    p.add_argument("--model", help="model catalogue id or alias, or a path to a config.json")
    p.add_argument("--gpu", help="catalogue GPU id (h100-sxm-80gb) or GFD product label")
    p.add_argument("--tp", help="tensor_parallel_size")
    p.add_argument("--pp", help="pipeline_parallel_size")
    p.add_argument("--max-model-len", help="max_model_len (default: the model's maximum)")
    add_engine_args(p, release_use="its memory-profile and MoE-kernel facts")
    p.add_argument(
        "--block-size", help="KV block size: " + ", ".join(map(str, get_args(BlockSize)))
    )
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs / torch.compile")
    p.add_argument(
        "--input-tokens", help="prompt tokens per request of the predicted workload (default 1024)"
    )
    p.add_argument(
        "--output-tokens", help="generated tokens per request of the predicted workload (256)"
    )
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", help="requests in flight (default: max_num_seqs)")
    load.add_argument("--request-rate", help="requests per second arriving (open loop)")
    load.add_argument("--burst", metavar="N", help="N requests sent at once")
    p.add_argument("--weights-source", help="huggingface, s3, pvc or local-nvme")
    p.add_argument("--load-gbps", help="measured weight load bandwidth in GB/s")
    p.add_argument(
        "--kv-offloading-size",
        help="vLLM's native KV offload to CPU in GiB (the total over the engine's GPUs): "
        "adds the tokens the host holds",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")


def add_engine_args(p: Any, *, release_use: str) -> None:
    """The vLLM engine settings ``capacity`` and ``size`` both take (left unset: vLLM's
    default for the GPU, or the model's own dtype); *release_use* says what the command
    reads of ``--vllm-version``."""
    p.add_argument("--max-num-seqs", help="max_num_seqs (default: vLLM's for the GPU)")
    p.add_argument(
        "--max-num-batched-tokens", help="max_num_batched_tokens (default: vLLM's for the GPU)"
    )
    p.add_argument(
        "--gpu-memory-utilization", help="fraction of GPU memory vLLM takes (default: vLLM's)"
    )
    p.add_argument(
        "--vllm-version",
        help="the engine's vLLM release (a catalogued one, e.g. 0.11.0; default: the "
        f"reference release): {release_use}",
    )
    p.add_argument(
        "--tp-transport",
        help="the path the TP all-reduces take: device (GPU peer access in one Pod, the "
        "default), host (one Pod without GPU peer access: NCCL through host memory), "
        "network (the TP group spans Pods, e.g. Ray worker Pods: NCCL over the network)",
    )
    p.add_argument("--dtype", help="model dtype: " + ", ".join(get_args(ModelDtype)))
    p.add_argument("--quantization", help="weight quantisation (fp8, awq, gptq, mxfp4, ...)")
    p.add_argument("--kv-cache-dtype", help="KV cache dtype: " + ", ".join(get_args(KvCacheDtype)))


# --------------------------------------------------------------------------- input


_MAX_FLAG_INT = 1_000_000
"""The largest integer a flag takes (tokens, sequences, replicas): more is a typo."""


def _int(
    flag: str, raw: str | None, low: int, example: str, high: int = _MAX_FLAG_INT
) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw) if len(raw) <= 20 else low - 1
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise InputError(
            f"{flag} {clipped(raw)!r}: expected an integer from {low} to {high:,}, e.g. {example}"
        )
    return value


def _float(flag: str, raw: str | None, ok: Callable[[float], bool], fix: str) -> float | None:
    """A finite number that *ok* accepts (``inf`` and ``nan`` never are)."""
    if raw is None:
        return None
    try:
        value = float(raw) if len(raw) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not ok(value):
        raise InputError(f"{flag} {clipped(raw)!r}: {fix}")
    return value


MAX_PARALLEL = 1024
"""The largest tensor or pipeline parallel size a flag takes (GPUs of one engine)."""


def _choice(flag: str, raw: str | None, choices: Iterable[object]) -> str | None:
    if raw is None:
        return None
    allowed = [str(c) for c in choices]
    if raw not in allowed:
        near = difflib.get_close_matches(raw, allowed, 1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise InputError(
            f"{flag} {clipped(raw)!r} is not accepted; {hint}use one of {', '.join(allowed)}"
        )
    return raw


def tp_transport(raw: str | None) -> str | None:
    """``--tp-transport``: one of :data:`gpustrata.vllm.transport.TRANSPORTS` (None: unset,
    the stack's layout or ``device``)."""
    if raw is None:
        return None
    from gpustrata.vllm.transport import TRANSPORTS

    if raw not in TRANSPORTS:
        raise InputError(
            f"--tp-transport {raw!r} is not a transport; use one of {', '.join(TRANSPORTS)}"
        )
    return raw


def vllm_version(raw: str | None) -> str | None:
    """``--vllm-version``: a release of the compatibility catalogue (a leading ``v`` is
    dropped), or None when not given."""
    if raw is None:
        return None
    from gpustrata.catalog.compat import load_compat_catalog

    compat = load_compat_catalog()
    version = raw.strip().removeprefix("v")
    if compat.vllm(version) is None:
        known = [r.version for r in compat.vllm_releases()]
        near = [k for k in known if k.startswith(version + ".")][:3] or (
            difflib.get_close_matches(version, known, 3)
        )
        hint = f"nearest: {', '.join(near)}; " if near else ""
        raise InputError(
            f"--vllm-version {raw!r} is not a catalogued vLLM release ({hint}catalogued "
            f"{known[-1]}..{known[0]}: catalog/data/compat-vllm.yaml)"
        )
    return version


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


def _resolve_model(
    raw: str, base: Path | None = None, sources: ModelSources | None = None
) -> ModelArchitecture:
    """``--model``: its files in *sources* (``--models DIR``, the Hugging Face cache), a
    catalogue id or a config.json path; an :class:`InputError` naming the fix otherwise."""
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.packaged import CatalogError
    from gpustrata.vllm.capacity import resolve_architecture

    catalog = load_model_catalog()
    try:
        arch = resolve_architecture(raw, catalog, base, sources=sources)
    except CatalogError as exc:
        raise InputError(f"--model {clipped(raw)!r}: {exc}") from None
    if arch is None:
        if raw.endswith(".json") or raw.startswith(("/", "./", "../", "~")):
            raise InputError(
                f"--model {clipped(raw)!r}: no such file; give a config.json (or a directory "
                "holding one) or a model catalogue id"
            )
        names = [n for m in catalog for n in m.names()]
        near = _close(raw, names)
        hint = f"close matches: {', '.join(near)}" if near else "see catalog/data/models.yaml"
        raise InputError(
            f"--model {clipped(raw)!r} is neither a model catalogue id nor a path to a "
            f"config.json, and no --models folder or Hugging Face cache holds its config.json; "
            f"{hint}"
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
        raise InputError(
            f"--gpu {clipped(raw)!r} is not a catalogue GPU id or GFD product label; {hint}"
        )
    return gpu


def _stack_model(
    args: argparse.Namespace,
) -> tuple[
    ModelSpec | None, GpuModel | None, str | None, HardwareCatalog, int, ModelSources | None
]:
    """The stack model named by --model-name (or the only one), with its pool's GPU, the
    replica count its serving is predicted at (the plan's largest) and where the plan looked
    for models' own files."""
    from gpustrata.catalog.hardware import load_hardware_catalog

    hardware = load_hardware_catalog()
    if args.stack is None and args.file is None:
        if args.model_name:
            raise InputError("--model-name needs a stack: add --stack NAME or --file PATH")
        return None, None, None, hardware, 1, model_sources_of(args, stack=False)
    path, stack, plan, _ = load_stack(args)
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
    return mp.spec, mp.pool.gpu, f"{stack} ({path})", hardware, mp.max_replicas, plan.sources


def _target(args: argparse.Namespace) -> CapacityTarget:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.packaged import CatalogError
    from gpustrata.planning.model_capacity import model_settings
    from gpustrata.reports.capacity import CapacityTarget
    from gpustrata.vllm.capacity import LOAD_GBPS_DEFAULTS, resolve_architecture

    spec, pool_gpu, stack, hardware, replicas, sources = _stack_model(args)
    settings: dict[str, Any] = {} if spec is None else model_settings(spec)
    flags: dict[str, Any] = {
        "tensor_parallel_size": _int("--tp", args.tp, 1, "1, 2, 4 or 8", MAX_PARALLEL),
        "pipeline_parallel_size": _int("--pp", args.pp, 1, "1 or 2", MAX_PARALLEL),
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
            lambda v: 0.001 <= v <= 1000,
            "use a bandwidth from 0.001 to 1000 GB/s such as 1.0",
        ),
    }
    if flags["block_size"] is not None:
        flags["block_size"] = int(flags["block_size"])
    if args.enforce_eager:
        flags["enforce_eager"] = True
    release = vllm_version(args.vllm_version)
    if release is not None:
        flags["vllm_release"] = release
    flags["tp_transport"] = tp_transport(args.tp_transport)
    settings.update({k: v for k, v in flags.items() if v is not None})

    if args.model is not None:
        arch = _resolve_model(args.model, sources=sources)
    elif spec is not None:
        project = Path(args.project_dir)  # where plan resolved it, inside the project
        try:
            found = resolve_architecture(
                spec.model, load_model_catalog(), project, project, sources
            )
        except CatalogError as exc:
            raise InputError(f"stack model {spec.name}: {exc}") from None
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
    offload = _float(
        "--kv-offloading-size",
        args.kv_offloading_size,
        lambda v: 0 < v <= 1 << 20,
        "use a positive size in GiB such as 40",
    )
    if offload is None and spec is not None:
        offload = _stack_offload(spec)
    workload = _workload(args, spec.workload if spec is not None else None)
    return CapacityTarget(arch, gpu, settings, stack, name, hardware, offload, workload, replicas)


def _stack_offload(spec: ModelSpec) -> float | None:
    """The native KV offload a stack model sets in ``engine.extra_args``
    (``kv_offloading_size`` GiB, backend ``native``: the LMCache backend holds it in its own
    server), or None; a value that is not a positive number is an error naming the key."""
    extra = spec.engine.extra_args
    if "kv_offloading_size" not in extra or extra.get("kv_offloading_backend", "native") != (
        "native"
    ):
        return None
    return _float(
        f"models.{spec.name}.engine.extra_args.kv_offloading_size",
        str(extra["kv_offloading_size"]),
        lambda v: 0 < v <= 1 << 20,
        "use a positive size in GiB such as 40",
    )


def _workload(args: argparse.Namespace, stated: WorkloadSpec | None) -> WorkloadSpec:
    """The stack model's workload (or the reference one) with the workload flags applied."""
    from gpustrata.spec.serving import WorkloadSpec

    base = stated if stated is not None else WorkloadSpec()
    update: dict[str, Any] = {}
    for key, raw, example in (
        ("input_tokens", args.input_tokens, "2048"),
        ("output_tokens", args.output_tokens, "256"),
    ):
        value = _int(f"--{key.replace('_', '-')}", raw, 1, example)
        if value is not None:
            update[key] = value
    conc = _int("--concurrency", args.concurrency, 1, "64")
    burst = _int("--burst", args.burst, 1, "500")
    rate = _float(
        "--request-rate", args.request_rate, lambda v: 0 < v < math.inf, "use a positive rate"
    )
    if conc is not None or burst is not None or rate is not None:
        update.update(concurrency=conc, burst=burst, request_rate=rate)
    return base.model_copy(update=update) if update else base


def capacity_command(args: argparse.Namespace) -> int:
    """weights per GPU, KV-cache capacity, largest max_model_len, startup and step time for a stack
    model or ad hoc flags

    Capacity of one vLLM engine, each figure with its derivation. Use a stack model
    (--stack/--file with --model-name) or --model with --gpu; flags given with a stack override
    its values. Exit 1 when vLLM would refuse to start.
    """
    from gpustrata.reports.capacity import capacity_document, capacity_text, estimate, what_if

    target = _target(args)
    est = estimate(target)
    rows = what_if(target, est)
    if args.format == "json":
        doc = capacity_document(est, rows, target)
        print(json.dumps(doc, indent=2))
    else:
        print(capacity_text(est, rows, target))
    return 0 if est.fits else 1
