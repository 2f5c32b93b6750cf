"""O007 gpu-supports-dtype."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.nodes import (
    gpu_model_of_pool,
    gpu_model_of_selectors,
    gpu_pools,
    gpu_requests,
    targeted_pools,
)
from gpustrata_policies.view.objects import K8sObject, PodRef
from gpustrata_policies.view.pools import GpuPool
from gpustrata_policies.view.vllm_args import EngineArgs, serve_config, vllm_engine

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel

_BF16 = {"bfloat16", "bf16"}
# FP8 checkpoints run weight-only (W8A16, Marlin) on Ampere and natively from Ada/Hopper;
# vLLM has no FP8 kernels below compute capability 8.0 (vLLM FP8 W8A8 docs).
_FP8 = {"fp8", "fbgemm_fp8"}
_MODERN = (8, 0)
"""The compute capability from which both checks pass (bf16 and FP8 kernels)."""


# Each catalogue compute capability ("8.6") as a comparable pair, parsed once: a check
# asks it for every pod x pool x engine (issue 18: 70k parses of a handful of strings).
_CAPABILITIES: dict[str, tuple[int, int]] = {}


def _capability(gpu: GpuModel) -> tuple[int, int]:
    text = gpu.compute_capability
    found = _CAPABILITIES.get(text)
    if found is None:
        major, minor = text.split(".")
        found = _CAPABILITIES[text] = (int(major), int(minor))
    return found


def _problems(engine: EngineArgs, model: str | None, gpu: GpuModel) -> list[str]:
    cc = _capability(gpu)
    if cc >= _MODERN:
        return []  # both checks below are about GPUs older than 8.0
    out = []
    dtype = str(engine.get("dtype") or "auto").lower()
    if dtype in _BF16 and cc < (8, 0):
        out.append(
            f"dtype {dtype} needs compute capability 8.0 or newer (vLLM refuses to start: "
            "'Bfloat16 is only supported on GPUs with compute capability of at least 8.0'); "
            "use --dtype half"
        )
    quant = engine.get("quantization")
    where = "--quantization"
    if not isinstance(quant, str) and model:
        arch = catalogs.model_architecture(model)
        quant, where = (arch.quantization if arch else None), f"the checkpoint of {model}"
    if isinstance(quant, str) and quant.lower() in _FP8 and cc < (8, 0):
        out.append(
            f"FP8 weights ({where}: {quant}) need compute capability 8.0 or newer (weight-only "
            "FP8 via Marlin on Ampere, native FP8 from 8.9); vLLM has no FP8 kernels below 8.0"
        )
    return out


def _engines(obj: K8sObject, pod: PodRef) -> list[tuple[EngineArgs, str | None]]:
    found = []
    if pod.is_ray:
        if pod.role == "head":
            return []
        cfg = serve_config(obj)
        found += [(e, e.model) for e in (cfg.engines if cfg else [])]
        return found
    for c in pod.containers(init=False):
        one = vllm_engine(c)
        if one is not None:
            found.append((one, one.model))
    return found


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """An explicit bf16 dtype or FP8 quantisation runs on the pool's GPU."""
    pools = gpu_pools(ctx)
    for pod in obj.pods():
        if not gpu_requests(pod, ctx.config.gpu_resources):
            continue
        engines = _engines(obj, pod)
        if not engines:
            continue
        # Only GPUs older than 8.0 can fail a check (_problems); a pool is named only in
        # a finding (a pod targets tens of pools, almost all newer).
        gpus: list[tuple[GpuModel, GpuPool | str]] = []
        if pools:
            for pool in targeted_pools(pod, pools):
                gpu = gpu_model_of_pool(pool)
                if gpu is not None and _capability(gpu) < _MODERN:
                    gpus.append((gpu, pool))
        else:
            gpu, label = gpu_model_of_selectors(pod)
            if gpu is not None and _capability(gpu) < _MODERN:
                gpus.append((gpu, f"selected by {label}"))
        for gpu, on in gpus:
            for engine, model in engines:
                problems = _problems(engine, model, gpu)
                if problems:
                    where = on if isinstance(on, str) else f"pool {on.name}"
                    yield ctx.violation(
                        obj,
                        f"{engine.source} runs on {gpu.name} ({where}, compute capability "
                        f"{gpu.compute_capability}): {'; '.join(problems)}",
                        (*pod.path, "containers"),
                    )


RULE = folder_rule(__name__, check)
