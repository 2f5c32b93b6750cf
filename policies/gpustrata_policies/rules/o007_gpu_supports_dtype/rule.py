"""O007 gpu-supports-dtype."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
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


def _problems(site: EngineSite, gpu: GpuModel) -> list[tuple[str, ...]]:
    """What the engine runs that *gpu* has no kernels for: ``("bf16", dtype)`` and
    ``("fp8", where the quantisation was read, quantisation)``."""
    cc = gpu.capability
    if cc >= _MODERN:
        return []  # both checks below are about GPUs older than 8.0
    out: list[tuple[str, ...]] = []
    model = site.engine.model
    dtype = str(site.flag("dtype") or "auto").lower()
    if dtype in _BF16 and cc < (8, 0):
        out.append(("bf16", dtype))
    quant = site.flag("quantization")
    where = "--quantization"
    if not isinstance(quant, str) and model:
        arch = catalogs.model_architecture(model)
        quant, where = (arch.quantization if arch else None), f"the checkpoint of {model}"
    if isinstance(quant, str) and quant.lower() in _FP8 and cc < (8, 0):
        out.append(("fp8", where, quant))
    return out


def _shown(ref: GpuRef) -> str:
    """Where the GPU was read, as the message names it (``pool p``, ``selected by L``)."""
    if ref.where.startswith(("pool ", "nvidia.com/mig-", "Ray Serve LLM")):
        return ref.where
    return f"selected by {ref.where}"


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """An explicit bf16 dtype or FP8 quantisation runs on the GPU the engine gets."""
    extra = ctx.config.gpu_resources
    for site in engine_sites(ctx, obj):
        pod = site.gpu_pod
        if pod is None or not gpu_requests(pod, extra):
            continue
        found = site.gpus(ctx)  # MIG: the slice keeps its parent's compute capability
        # Only GPUs older than 8.0 can fail a check (_problems).
        for ref in found if not isinstance(found, str) else []:
            problems = _problems(site, ref.gpu)
            if problems:
                yield Verdict(
                    "violation",
                    "gpu-lacks-kernels",
                    values={
                        "container": site.label,
                        "gpu": ref.gpu.name,
                        "where": _shown(ref),
                        "compute_capability": ref.gpu.compute_capability,
                        "problems": tuple(problems),
                    },
                    thresholds={"min_compute_capability": ".".join(map(str, _MODERN))},
                    path=(*pod.path, "containers"),
                )


def _problem_text(problem: tuple[str, ...], minimum: str) -> str:
    """One dtype or quantisation the GPU has no kernels for, in words."""
    if problem[0] == "bf16":
        return (
            f"dtype {problem[1]} needs compute capability {minimum} or newer (vLLM refuses to "
            "start: 'Bfloat16 is only supported on GPUs with compute capability of at least "
            "8.0'); use --dtype half"
        )
    _, where, quant = problem
    return (
        f"FP8 weights ({where}: {quant}) need compute capability {minimum} or newer "
        "(weight-only FP8 via Marlin on Ampere, native FP8 from 8.9); vLLM has no FP8 kernels "
        f"below {minimum}"
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an O007 message derives: each dtype or quantisation the GPU lacks, in words."""
    minimum = str(verdict.thresholds["min_compute_capability"])
    problems = cast(tuple[tuple[str, ...], ...], verdict.values["problems"])
    return {"problems": "; ".join(_problem_text(p, minimum) for p in problems)}


RULE = folder_rule(__name__, worded(judge, fields))
