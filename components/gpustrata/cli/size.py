"""``gpustrata size``: which GPUs, TP and replicas serve a workload within SLOs, cheapest.

The search and the ranking are :mod:`gpustrata.planning.sizing`; the output
:mod:`gpustrata.reports.sizing`. Exit codes: 0 some candidate meets the SLOs; 1 none does
(the candidates and their misses are still printed); 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, get_args

from gpustrata.cli.capacity import (
    MAX_PARALLEL,
    _choice,
    _float,
    _int,
    _resolve_gpu,
    _resolve_model,
    add_engine_args,
    tp_transport,
    vllm_version,
)
from gpustrata.cli.command import add_command
from gpustrata.cli.stack_args import add_models_arg, model_sources_of
from gpustrata.core.errors import InputError
from gpustrata.core.terminal import clipped
from gpustrata.core.vllm_choices import KvCacheDtype, ModelDtype

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import HardwareCatalog

__all__ = ["register", "size_command"]


def register(sub: Any) -> None:
    """Add ``size`` to the ``gpustrata`` sub-command parser."""
    p = add_command(sub, "size", size_command)
    p.add_argument("--model", required=True, help="model catalogue id or a config.json path")
    add_models_arg(p)
    p.add_argument("--input-tokens", required=True, help="prompt tokens per request")
    p.add_argument("--output-tokens", required=True, help="generated tokens per request")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", help="requests in flight (closed loop)")
    load.add_argument("--request-rate", help="requests per second arriving (open loop)")
    load.add_argument(
        "--burst",
        metavar="N",
        help="N requests sent at once and not replaced (vllm bench serve --num-prompts N at "
        "request rate inf)",
    )
    p.add_argument("--ttft", help="TTFT target in seconds (e.g. 2)")
    p.add_argument("--tpot", help="TPOT (inter-token latency) target in seconds (e.g. 0.05)")
    p.add_argument(
        "--gpu", action="append", default=[], help="only this GPU (id or GFD label); repeatable"
    )
    p.add_argument(
        "--instance-type", action="append", default=[], help="only this instance type; repeatable"
    )
    p.add_argument(
        "--cloud", choices=("aws", "gcp", "azure"), help="only this cloud's instance types"
    )
    p.add_argument(
        "--region",
        help="only the AWS/Azure instance types this region's on-demand price map lists, "
        "priced there (catalog/data/instance-regions.yaml, from the Karpenter pricing files); "
        "GCP types have no per-region data and are left out; --price still wins",
    )
    p.add_argument(
        "--margin",
        help="fraction a simulated figure must stay under each SLO target (e.g. 0.25; default: "
        "the simulation's median error on held-out published runs, printed with the SLO)",
    )
    p.add_argument("--tp", help="only this tensor_parallel_size")
    p.add_argument("--pp", help="pipeline_parallel_size (default 1)")
    p.add_argument("--replicas", help="evaluate exactly this many replicas")
    p.add_argument("--max-model-len", help="max_model_len (default: input + output tokens)")
    add_engine_args(
        p, release_use="its memory-profile and MoE-kernel facts and the snippet's image"
    )
    p.add_argument("--max-cost-per-hour", help="drop candidates above this USD per hour")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="TYPE=USD",
        help="price per hour of an instance type (overrides the catalogue); repeatable",
    )
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument(
        "--snippet",
        metavar="FILE",
        help="also write the top candidate's stack entry (node pool, model, engine and "
        "workload) to FILE as YAML",
    )


def _prices(raw: list[str], hardware: HardwareCatalog) -> dict[str, float]:
    """``--price TYPE=USD`` items; a type not in the instance catalogue is refused (it
    was ignored: the search never meets it)."""
    out: dict[str, float] = {}
    for item in raw:
        name, sep, value = item.partition("=")
        price = _float("--price", value if sep else None, lambda v: v > 0, "use TYPE=USD")
        if not sep or not name.strip() or price is None:
            raise InputError(
                f"--price {clipped(item)!r}: expected TYPE=USD, e.g. p5.48xlarge=55.04"
            )
        if hardware.instance(name.strip()) is None:
            near = hardware.related_instances(name)
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            raise InputError(
                f"--price {clipped(name.strip())!r} is not in the instance catalogue; {hint}"
                "price a type of catalog/data/instances.yaml"
            )
        out[name.strip()] = price
    return out


def _request(args: argparse.Namespace) -> Any:
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.planning.sizing import TP_SIZES, SizingRequest
    from gpustrata.vllm.calibration import Margin, measured_margin
    from gpustrata.vllm.performance import Workload

    hardware = load_hardware_catalog()
    arch = _resolve_model(args.model, sources=model_sources_of(args, stack=False))
    positive = ("use a positive number such as 1.5",)
    inp = _int("--input-tokens", args.input_tokens, 1, "2048")
    outp = _int("--output-tokens", args.output_tokens, 1, "256")
    conc = _int("--concurrency", args.concurrency, 1, "64")
    burst = _int("--burst", args.burst, 1, "500")
    rate = _float("--request-rate", args.request_rate, lambda v: v > 0, *positive)
    assert inp is not None and outp is not None
    gpus = [_resolve_gpu(g, hardware) for g in args.gpu]
    for name in args.instance_type:
        inst = hardware.instance(name)
        if inst is None:
            near = hardware.related_instances(name)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            raise InputError(
                f"--instance-type {clipped(name)!r} is not in the instance catalogue "
                f"(catalog/data/instances.yaml){hint}"
            )
    tp = _int("--tp", args.tp, 1, "1, 2, 4 or 8", MAX_PARALLEL)
    if args.region is not None and not args.region.strip():
        raise InputError("--region is empty: name a region such as westus3, or drop --region")
    margin = _float(
        "--margin", args.margin, lambda v: 0 <= v < 10, "use a fraction such as 0.25 (0: none)"
    )
    verdict = (
        measured_margin("simulation")
        if margin is None
        else Margin(margin, margin, f"--margin {margin:g}")
    )
    mml = _int("--max-model-len", args.max_model_len, 16, "4096")
    if mml is not None and inp + outp > mml:
        raise InputError(
            f"--max-model-len {mml} is below --input-tokens {inp} + --output-tokens {outp} = "
            f"{inp + outp}: vLLM rejects every such request; raise --max-model-len or shorten "
            "the workload"
        )
    settings: dict[str, Any] = {
        "dtype": _choice("--dtype", args.dtype, get_args(ModelDtype)),
        "kv_cache_dtype": _choice("--kv-cache-dtype", args.kv_cache_dtype, get_args(KvCacheDtype)),
        "quantization": args.quantization,
        "max_model_len": mml,
        "max_num_seqs": _int("--max-num-seqs", args.max_num_seqs, 1, "256"),
        "max_num_batched_tokens": _int(
            "--max-num-batched-tokens", args.max_num_batched_tokens, 1, "8192"
        ),
        "gpu_memory_utilization": _float(
            "--gpu-memory-utilization",
            args.gpu_memory_utilization,
            lambda v: 0 < v <= 1,
            "use a fraction in (0, 1] such as 0.9",
        ),
        "vllm_release": vllm_version(args.vllm_version),
        "tp_transport": tp_transport(args.tp_transport),
    }
    return SizingRequest(
        arch=arch,
        workload=Workload(
            inp,
            outp,
            concurrency=burst if burst is not None else conc,
            request_rate=rate,
            burst=burst is not None,
        ),
        ttft_s=_float("--ttft", args.ttft, lambda v: v > 0, *positive),
        tpot_s=_float("--tpot", args.tpot, lambda v: v > 0, *positive),
        gpus=gpus,
        instance_types=tuple(args.instance_type),
        tensor_parallel_sizes=(tp,) if tp else TP_SIZES,
        pipeline_parallel_size=_int("--pp", args.pp, 1, "1 or 2", MAX_PARALLEL) or 1,
        replicas=_int("--replicas", args.replicas, 1, "2"),
        settings={k: v for k, v in settings.items() if v is not None},
        max_cost_per_hour=_float(
            "--max-cost-per-hour", args.max_cost_per_hour, lambda v: v > 0, *positive
        ),
        prices=_prices(args.price, hardware),
        margin=verdict,
        cloud=args.cloud,
        region=args.region.strip().lower() if args.region else None,
    )


def size_command(args: argparse.Namespace) -> int:
    """which instance type, TP and replicas meet TTFT/TPOT targets for a workload, cheapest first,
    with a stack snippet

    Search instance types x tensor-parallel sizes x replicas for a model and a workload (fixed
    input/output lengths at a concurrency or a request rate); keep the configurations vLLM
    starts (the capacity estimate), screen TTFT, TPOT, throughput and cost with the calibrated
    closed form, rank the SLO-meeting ones by cost, and judge the head of that ranking again by
    simulating vLLM's scheduler (the smaller held-out error). Exit 1 when none meets the SLOs.
    """
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.planning.sizing import size
    from gpustrata.reports.sizing import (
        sizing_document,
        sizing_markdown,
        sizing_snippet,
        sizing_text,
    )
    from gpustrata.vllm.calibration import default_constants
    from gpustrata.vllm.capacity import CapacityError

    req = _request(args)
    constants = default_constants()
    try:
        result = size(req, load_hardware_catalog(), constants)
    except CapacityError as exc:
        raise InputError(f"{exc.setting}: {exc}") from None
    if args.snippet:
        from pathlib import Path

        snippet = sizing_snippet(result)
        if snippet is None:
            raise InputError(f"--snippet {args.snippet}: no configuration starts, nothing to write")
        try:
            Path(args.snippet).write_text(snippet, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"--snippet {args.snippet}: {exc.strerror}") from None
    if args.format == "json":
        print(json.dumps(sizing_document(result, constants), indent=2))
    elif args.format == "markdown":
        print(sizing_markdown(result, constants))
    else:
        print(sizing_text(result, constants))
    return 0 if result.candidates and result.candidates[0].meets_slo else 1
