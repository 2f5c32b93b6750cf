"""O007 gpu-supports-dtype."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import EngineSite, GpuRef, engine_sites
from gpustrata_policies.view.nodes import gpu_requests
from gpustrata_policies.view.objects import K8sObject

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


def _problems(site: EngineSite, gpu: GpuModel) -> list[str]:
    cc = _capability(gpu)
    if cc >= _MODERN:
        return []  # both checks below are about GPUs older than 8.0
    out = []
    model = site.engine.model
    dtype = str(site.flag("dtype") or "auto").lower()
    if dtype in _BF16 and cc < (8, 0):
        out.append(
            f"dtype {dtype} needs compute capability 8.0 or newer (vLLM refuses to start: "
            "'Bfloat16 is only supported on GPUs with compute capability of at least 8.0'); "
            "use --dtype half"
        )
    quant = site.flag("quantization")
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


def _shown(ref: GpuRef) -> str:
    """Where the GPU was read, as the message names it (``pool p``, ``selected by L``)."""
    if ref.where.startswith(("pool ", "nvidia.com/mig-", "Ray Serve LLM")):
        return ref.where
    return f"selected by {ref.where}"


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """An explicit bf16 dtype or FP8 quantisation runs on the GPU the engine gets."""
    extra = ctx.config.gpu_resources
    for site in engine_sites(ctx, obj):
        pod = site.gpu_pod
        if pod is None or not gpu_requests(pod, extra):
            continue
        found = site.gpus(ctx)  # MIG: the slice keeps its parent's compute capability
        # Only GPUs older than 8.0 can fail a check (_problems).
        for ref in found if not isinstance(found, str) else []:
            problems = "; ".join(_problems(site, ref.gpu))
            gpu = f"{ref.gpu.name} ({_shown(ref)}, compute capability {ref.gpu.compute_capability})"
            if problems:
                text = f"{site.label} runs on {gpu}: {problems}"
                yield ctx.violation(obj, text, (*pod.path, "containers"))


RULE = folder_rule(__name__, check)
