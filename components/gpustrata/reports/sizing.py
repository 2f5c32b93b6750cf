"""What ``gpustrata size`` prints: ranked candidates, rejections, and a stack snippet.

* text: the top candidates with their predicted TTFT/TPOT/throughput and cost (the
  ``by`` column names the model: ``sim`` for the simulated means that judge the head of
  the ranking, ``screen`` for the closed form), the working of the top one (``<-``
  lines), the others that miss (with why), rejections, and a ready-to-paste
  ``node_pools`` + ``models`` snippet for the top one;
* markdown: the same as tables;
* JSON: ``{"workload", "slo", "max_model_len", "constants", "candidates": [{"gpu",
  "instance_type", "tensor_parallel_size", "pipeline_parallel_size", "replicas",
  "instances", "max_num_seqs", "max_num_batched_tokens", "judged_by", "predicted":
  {"tpot_seconds", "ttft_seconds", "output_tokens_per_second", "requests_per_second",
  "running_per_replica"}, "closed_form": {"tpot_seconds", "ttft_seconds",
  "output_tokens_per_replica"}, "simulated": {p50/p90 ...} | null, "cost_per_hour",
  "cost_per_million_output_tokens", "meets_slo", "misses"}], "rejected": [{"instance_type",
  "gpu", "tensor_parallel_size", "reason"}], "snippet"}``; ``predicted`` holds the figures
  the verdict used (``judged_by``: ``simulation``, ``screen`` for the closed form below the
  simulated head, or ``closed form`` where no simulated request completed); figures are
  ``{"value", "explanation"}`` pairs as in ``gpustrata capacity``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from gpustrata.catalog.model_sources import local_config_path
from gpustrata.planning.sizing import Candidate, SizingResult
from gpustrata.vllm.performance import ServingConstants
from gpustrata.vllm.reference import VLLM_VERSION
from gpustrata.vllm.simulate import SimulatedServing
from gpustrata.vllm.terms import Term

__all__ = ["sizing_document", "sizing_markdown", "sizing_snippet", "sizing_text"]

_SHOWN = 10


def _term(t: Term | None) -> dict[str, Any] | None:
    if t is None:
        return None
    value = t.value
    if isinstance(value, float) and math.isinf(value):
        return {"value": None, "explanation": t.explanation}
    return t.as_dict()


def _name(model_id: str) -> str:
    base = model_id.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9-]+", "-", base).strip("-")[:40] or "model"


def sizing_snippet(result: SizingResult) -> str | None:
    """A ``node_pools`` + ``models`` stack fragment for the top candidate (None if none)."""
    if not result.candidates:
        return None
    c = result.candidates[0]
    pool = f"gpu-{c.gpu.id}"
    engine: dict[str, Any] = {
        "tensor_parallel_size": c.tensor_parallel_size,
        "max_model_len": result.max_model_len,
    }
    if c.pipeline_parallel_size > 1:
        engine["pipeline_parallel_size"] = c.pipeline_parallel_size
    for key in (
        "dtype",
        "quantization",
        "kv_cache_dtype",
        "max_num_seqs",
        "max_num_batched_tokens",
        "gpu_memory_utilization",
    ):
        if result.request.settings.get(key) is not None:
            engine[key] = result.request.settings[key]
    w = result.request.workload
    workload: dict[str, Any] = {"input_tokens": w.input_tokens, "output_tokens": w.output_tokens}
    if w.request_rate is not None:
        workload["request_rate"] = w.request_rate
    else:
        workload["burst" if w.burst else "concurrency"] = w.concurrency
    if result.request.ttft_s is not None:
        workload["ttft_seconds"] = result.request.ttft_s
    if result.request.tpot_s is not None:
        workload["tpot_seconds"] = result.request.tpot_s
    release = result.request.settings.get("vllm_release") or VLLM_VERSION
    doc = {
        "node_pools": [
            {
                "name": pool,
                "instance_type": c.instance.name,
                "capacity_type": "ON_DEMAND",
                "min_size": c.instances,
                "max_size": c.instances,
            }
        ],
        "models": [
            {
                "name": _name(result.request.arch.id),
                "model": result.request.arch.id,
                "runtime": "deployment",
                "pool": pool,
                "image": f"vllm/vllm-openai:v{release}",
                "replicas": c.replicas,
                "engine": engine,
                "workload": workload,
            }
        ],
    }
    text = yaml.safe_dump(doc, sort_keys=False)
    local = local_config_path(result.request.arch)
    if local is not None:  # the stack must find the same file, or it plans another model
        text = (
            f"# {result.request.arch.id} was sized from {local}: plan the stack with "
            "`--models DIR`, or set catalog.models_dir to a project folder holding it "
            "(<org>/<name>/config.json).\n" + text
        )
    return text


def _cost(c: Candidate) -> str:
    return f"${c.cost_per_hour.value:,.2f}/h" if c.cost_per_hour else "no price"


def _per_m(c: Candidate) -> str:
    t = c.cost_per_million_output_tokens
    return f"${t.value:,.2f}" if t else "-"


def _ttft(c: Candidate) -> str:
    v = c.judged.ttft_seconds.value
    return "inf" if math.isinf(v) else f"{v:.2f} s"


def _row(c: Candidate) -> list[str]:
    return [
        c.instance.name,
        c.gpu.id,
        str(c.tensor_parallel_size),
        str(c.replicas),
        str(c.instances),
        _ttft(c),
        f"{c.judged.tpot_seconds.value * 1e3:.1f} ms",
        "screen" if c.screened else c.judged.model.replace("simulation", "sim"),
        f"{c.output_tokens_per_second.value:,.0f}",
        _cost(c),
        _per_m(c),
        ("yes" if c.meets_slo else "; ".join(c.misses)) + (" (screen)" if c.screened else ""),
    ]


_HEAD = [
    "instance",
    "gpu",
    "TP",
    "replicas",
    "instances",
    "TTFT",
    "TPOT",
    "by",
    "out tok/s",
    "cost",
    "$/M out",
    "meets SLO",
]


def _workload(result: SizingResult) -> str:
    w = result.request.workload
    load = w.load
    slo = []
    if result.request.ttft_s is not None:
        slo.append(f"TTFT <= {result.request.ttft_s:g} s")
    if result.request.tpot_s is not None:
        slo.append(f"TPOT <= {result.request.tpot_s * 1e3:g} ms")
    margin = ""
    if slo:
        m = result.request.margin
        margin = (
            f" with a margin of {m.tpot:.0%} on TPOT and {m.ttft:.0%} on TTFT on the simulated "
            f"means ({m.explanation})"
        )
    return f"{result.request.arch.id}: {w.input_tokens} in / {w.output_tokens} out at {load}" + (
        f"; SLO {', '.join(slo)}{margin}" if slo else ""
    )


def sizing_text(result: SizingResult, constants: ServingConstants) -> str:
    """The plain-text report."""
    out = [_workload(result), f"max_model_len {result.max_model_len_why}", ""]
    if not result.candidates:
        out.append(f"no candidate: {result.empty_reason or 'no configuration starts'}")
    else:
        widths = [
            max(len(h), *(len(_row(c)[i]) for c in result.candidates[:_SHOWN]))
            for i, h in enumerate(_HEAD)
        ]
        out.append("  ".join(h.ljust(n) for h, n in zip(_HEAD, widths, strict=True)))
        for c in result.candidates[:_SHOWN]:
            out.append("  ".join(v.ljust(n) for v, n in zip(_row(c), widths, strict=True)))
        if len(result.candidates) > _SHOWN:
            out.append(f"... and {len(result.candidates) - _SHOWN} more (--format json lists all)")
        top = result.candidates[0]
        out += [
            "",
            f"top: {top.instance.name}, TP {top.tensor_parallel_size}, {top.replicas} replica(s)",
        ]
        p, j = top.per_replica, top.judged
        for label, t in (
            ("running", p.running),
            ("TPOT", j.tpot_seconds),
            ("TTFT", j.ttft_seconds),
            ("throughput", top.output_tokens_per_second),
            ("cost", top.cost_per_hour),
            ("$/M out", top.cost_per_million_output_tokens),
        ):
            if t is not None:
                out.append(f"  {label:<10} <- {t.explanation}")
        sim = top.simulated
        if sim is not None:
            out.append(
                f"  simulated  <- TTFT p50 {sim.ttft_p50_s:.2f} s / p90 {sim.ttft_p90_s:.2f} s, "
                f"TPOT p50 {sim.tpot_p50_s * 1e3:.1f} ms / p90 {sim.tpot_p90_s * 1e3:.1f} ms, "
                f"{sim.preemptions} preemptions (gpustrata.vllm.simulate; "
                "benchmarks/bench_serving_loso.py has its error held out by publisher)"
            )
        screened = sum(1 for c in result.candidates if c.screened)
        if screened:
            out.append(
                f"  ({screened} candidate(s) marked 'screen' keep the closed form's figures "
                "and verdict, with no margin: only the head of the ranking is simulated)"
            )
        snippet = sizing_snippet(result)
        if snippet:
            out += [
                "",
                "stack snippet (under gpustrata:stack):",
                *("  " + ln for ln in snippet.splitlines()),
            ]
    if result.rejected:
        out += ["", f"rejected ({len(result.rejected)}):"]
        seen: set[tuple[str, int]] = set()
        for r in result.rejected:
            if (r.gpu, r.tensor_parallel_size) in seen:
                continue
            seen.add((r.gpu, r.tensor_parallel_size))
            out.append(f"  {r.gpu} TP {r.tensor_parallel_size}: {r.reason}")
    out += ["", _constants_line(constants)]
    return "\n".join(out)


def _compute_efficiencies(c: ServingConstants) -> str:
    by_cc = [
        f"{v:g} on sm{cc}"
        for cc, v in (("80", c.compute_efficiency_sm80), ("90", c.compute_efficiency_sm90))
        if v is not None
    ]
    return (
        " / ".join([*by_cc, f"{c.compute_efficiency:g} elsewhere"])
        if by_cc
        else (f"{c.compute_efficiency:g}")
    )


def _constants_line(c: ServingConstants) -> str:
    return (
        f"serving model: memory efficiency {c.memory_efficiency:g}, compute efficiency "
        f"{_compute_efficiencies(c)}, {c.step_overhead_s * 1e3:g} ms/step + "
        f"{c.per_sequence_overhead_s * 1e6:g} us/sequence, {c.request_overhead_s * 1e3:g} ms/"
        "request (catalog/data/serving-fit.yaml, fitted on the published runs of "
        "serving-calibration.yaml; --format json has each constant's working)"
    )


def sizing_markdown(result: SizingResult, constants: ServingConstants) -> str:
    """The report as markdown tables."""
    out = [f"### Sizing: {_workload(result)}", ""]
    if result.candidates:
        out.append("| " + " | ".join(_HEAD) + " |")
        out.append("|" + "---|" * len(_HEAD))
        for c in result.candidates[:_SHOWN]:
            out.append("| " + " | ".join(v.replace("|", "/") for v in _row(c)) + " |")
        snippet = sizing_snippet(result)
        if snippet:
            out += ["", "```yaml", snippet.rstrip(), "```"]
    else:
        out.append(f"No candidate: {result.empty_reason or 'no configuration starts'}.")
    if result.rejected:
        out += ["", "<details><summary>rejected</summary>", ""]
        out += [
            f"- {r.instance} ({r.gpu}) TP {r.tensor_parallel_size}: {r.reason}"
            for r in result.rejected
        ]
        out += ["", "</details>"]
    out += ["", f"_{_constants_line(constants)}_"]
    return "\n".join(out)


def sizing_document(result: SizingResult, constants: ServingConstants) -> dict[str, Any]:
    """The JSON document (see the module docstring)."""
    w = result.request.workload
    return {
        "model": result.request.arch.id,
        "workload": {
            "input_tokens": w.input_tokens,
            "output_tokens": w.output_tokens,
            "concurrency": None if w.burst else w.concurrency,
            "burst": w.concurrency if w.burst else None,
            "request_rate": w.request_rate,
        },
        "slo": {
            "ttft_seconds": result.request.ttft_s,
            "tpot_seconds": result.request.tpot_s,
            "ttft_margin": result.request.margin.ttft,
            "tpot_margin": result.request.margin.tpot,
            "margin_why": result.request.margin.explanation,
        },
        "empty_reason": result.empty_reason,
        "max_model_len": {"value": result.max_model_len, "explanation": result.max_model_len_why},
        "constants": {"source": constants.source},
        "candidates": [
            {
                "gpu": c.gpu.id,
                "instance_type": c.instance.name,
                "tensor_parallel_size": c.tensor_parallel_size,
                "pipeline_parallel_size": c.pipeline_parallel_size,
                "replicas": c.replicas,
                "instances": c.instances,
                "max_num_seqs": c.estimate.max_num_seqs,
                "max_num_batched_tokens": c.estimate.max_num_batched_tokens,
                "kv_cache_tokens": c.estimate.kv.tokens,
                "judged_by": "screen" if c.screened else c.judged.model,
                "predicted": {
                    "tpot_seconds": _term(c.judged.tpot_seconds),
                    "ttft_seconds": _term(c.judged.ttft_seconds),
                    "output_tokens_per_second": _term(c.output_tokens_per_second),
                    "requests_per_second": _term(c.requests_per_second),
                    "running_per_replica": _term(c.per_replica.running),
                },
                "closed_form": {
                    "tpot_seconds": _term(c.per_replica.tpot_seconds),
                    "ttft_seconds": _term(c.per_replica.ttft_seconds),
                    "output_tokens_per_replica": _term(c.per_replica.output_tokens_per_second),
                },
                "simulated": _simulated_doc(c.simulated),
                "cost_per_hour": _term(c.cost_per_hour),
                "cost_per_million_output_tokens": _term(c.cost_per_million_output_tokens),
                "meets_slo": c.meets_slo,
                "misses": list(c.misses),
            }
            for c in result.candidates
        ],
        "rejected": [
            {
                "instance_type": r.instance,
                "gpu": r.gpu,
                "tensor_parallel_size": r.tensor_parallel_size,
                "reason": r.reason,
            }
            for r in result.rejected
        ],
        "snippet": sizing_snippet(result),
    }


def _simulated_doc(sim: SimulatedServing | None) -> dict[str, Any] | None:
    if sim is None:
        return None
    return {
        "ttft_mean_seconds": sim.ttft_mean_s,
        "ttft_p50_seconds": sim.ttft_p50_s,
        "ttft_p90_seconds": sim.ttft_p90_s,
        "tpot_mean_seconds": sim.tpot_mean_s,
        "tpot_p50_seconds": sim.tpot_p50_s,
        "tpot_p90_seconds": sim.tpot_p90_s,
        "output_tokens_per_second_per_replica": sim.output_tokens_per_second,
        "preemptions": sim.preemptions,
        "explanation": sim.explanation,
    }
