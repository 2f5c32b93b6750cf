"""V003 weights-fit."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import estimated_subject, judged_engines
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.capacity import Inputs, estimate
from gpustrata_policies.view.objects import K8sObject

if TYPE_CHECKING:
    from gpustrata.vllm.capacity import CapacityEstimate

_TP_SIZES = (2, 4, 8, 16)


def _try(inp: Inputs, gpu: Any = None, **overrides: Any) -> CapacityEstimate | None:
    """The same engine with one setting changed (None: vLLM would refuse it)."""
    from gpustrata.vllm.capacity import CapacityError

    try:
        settings = inp.settings.engine.replace(**overrides)
        return estimate(
            inp.model.arch,
            gpu or inp.gpu.gpu,
            settings,
            inp.settings.release,
            inp.settings.flashinfer_sampler,
        )
    except CapacityError:
        return None


def _fixes(inp: Inputs) -> str:
    """Concrete alternatives that make the weights fit, computed with the same planner."""
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.vllm.capacity import gib

    est = inp.estimate
    tp, pp = est.tensor_parallel_size, est.pipeline_parallel_size
    out: list[str] = []
    for size in (s for s in _TP_SIZES if s > tp):
        alt = _try(inp, tensor_parallel_size=size)
        if alt is not None and alt.weights_fit:
            out.append(
                f"tensor_parallel_size {size} on {inp.gpu.gpu.name} "
                f"({gib(alt.weights.bytes_per_gpu)} of weights per GPU, {size * pp} GPUs)"
            )
            break
    bigger = sorted(
        (g for g in load_hardware_catalog().gpus.values() if g.memory_gib > inp.gpu.gpu.memory_gib),
        key=lambda g: g.memory_gib,
    )
    for gpu in bigger:
        alt = _try(inp, gpu=gpu)
        if alt is not None and alt.weights_fit:
            out.append(f"a GPU with more memory such as {gpu.name} ({gpu.memory_gib:g} GiB)")
            break
    if not inp.settings.engine.quantization and inp.model.arch.quantization is None:
        alt = _try(inp, quantization="fp8")
        if alt is not None and alt.weights_fit:
            out.append(f"an FP8-quantised checkpoint ({gib(alt.weights.bytes_per_gpu)} per GPU)")
    if not out:
        return (
            "no larger tensor_parallel_size, catalogued GPU or FP8 checkpoint fits it on one "
            "node: add pipeline parallelism across nodes"
        )
    return "use " + ", or ".join(out)


def _cached_fixes(ctx: RuleContext, inp: Inputs) -> str:
    """:func:`_fixes` once per (model, GPU, estimate, settings) within one evaluation: a
    manifest repeats an engine (one chart in many namespaces) and each repeat would try
    the same alternatives again (issue 18: ~1,560 violations, a third of V003's time).

    The text is a function of the architecture, the GPU, the estimate's parallel sizes
    and the engine settings alone (the hardware catalogue is fixed for the process).
    Catalogue entries and the shared estimate are keyed by identity and kept in the value,
    so an id is never matched to another object; settings that cannot be hashed (a
    mapping) are not cached."""
    shared: dict[Any, tuple[tuple[object, ...], str]] = ctx.memo("v003-fixes", dict)
    anchors = (inp.model.arch, inp.gpu.gpu, inp.estimate)
    settings = inp.settings
    key: Any = (*map(id, anchors), settings.engine, settings.release, settings.flashinfer_sampler)
    try:
        held = shared.get(key)
    except TypeError:  # a setting held as a mapping: not shared
        return _fixes(inp)
    if held is not None and all(map(operator.is_, held[0], anchors)):
        return held[1]
    text = shared[key] = (anchors, _fixes(inp))
    return text[1]


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Weights per GPU plus activations and runtime overhead fit the memory vLLM may use."""
    # presets: a KServe preset's engine too (its weights against the GPU need no release)
    yield from judged_engines(ctx, obj, lambda inp: _judge_engine(ctx, inp), presets=True)


def _judge_engine(ctx: RuleContext, inp: Inputs) -> Iterator[Verdict]:
    """One engine: its weights fit (the fixes tried are cached in *ctx*)."""
    est = inp.estimate
    if est.weights_fit:
        return
    mem = est.memory
    values: dict[str, Value] = {
        **estimated_subject(inp),
        "tensor_parallel_size": est.tensor_parallel_size,
        "pipeline_parallel_size": est.pipeline_parallel_size,
        "weights_bytes": est.weights.bytes_per_gpu,
        "weights_explanation": est.weights.explanation,
        "utilization": est.gpu_memory_utilization,
        "total_bytes": mem.total.value,
        "requested_bytes": mem.requested.value,
        "activation_bytes": mem.activation.value,
        "cuda_graphs_bytes": mem.cuda_graphs.value,
        "runtime_overhead_bytes": mem.runtime_overhead.value,
        "defaults": inp.default_notes("tensor_parallel_size", "gpu_memory_utilization"),
        # The alternatives need the planner (and the evaluation's cache): decided here.
        "fixes": _cached_fixes(ctx, inp),
    }
    yield Verdict("violation", "weights-too-large", values, path=inp.site.path)


# The byte figures of a verdict, shown in GiB.
_SIZES = ("weights", "total", "requested", "activation", "cuda_graphs", "runtime_overhead")


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V003 message quotes beyond its values: the parallel layout, sizes in GiB
    and the room left for the weights."""
    if verdict.reason != "weights-too-large":
        return {}  # a not-evaluated record quotes the view's reason: nothing to import
    from gpustrata.vllm.capacity import gib

    v = verdict.values
    parallel = f"tensor_parallel_size {v['tensor_parallel_size']}"
    pp = cast(int, v["pipeline_parallel_size"])
    if pp > 1:
        parallel += f" x pipeline_parallel_size {pp}"
    size = {k: cast(int, v[f"{k}_bytes"]) for k in _SIZES}
    room = size["requested"] - size["activation"] - size["cuda_graphs"] - size["runtime_overhead"]
    return {
        "parallel": parallel,
        **{k: gib(n) for k, n in size.items()},
        "room": gib(max(0, room)),
        "short": gib(size["weights"] - room),
    }


RULE = folder_rule(__name__, worded(judge, fields))
