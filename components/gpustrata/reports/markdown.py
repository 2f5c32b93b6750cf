"""``gpustrata plan --format markdown``: a pull-request comment read in thirty seconds.

Per stack, in reading order: the verdict; what the change did to the stack file (against
``--base``); any engine the capacity planner says vLLM would refuse to start that no rule
reports; findings by severity with the fix; the three layers side by side per model
(changed values in bold with the old value); and, collapsed, what was not evaluated and
why, the derived values and the resources that changed. The layout is
``templates/plan-report.md.j2``; every user-provided string is escaped
(:func:`gpustrata_policies.output.markdown.escape`) unless it is already :class:`Md`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from gpustrata.planning.plan_types import ModelPlan, StackPlan
from gpustrata.reports.compare import MISSING, Change, Comparison, compare, read_base
from gpustrata.reports.text import PlanReport
from gpustrata.vllm.capacity import VLLM_VERSION, gib
from gpustrata_policies.output.markdown import (
    Md,
    code,
    escape,
    findings_markdown,
    not_evaluated_markdown,
    plural,
    status_line,
)

__all__ = [
    "LAYER_COLUMNS",
    "Fact",
    "engine_problems",
    "markdown_report",
    "model_facts",
    "plan_markdown",
]

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
TEMPLATE = "plan-report.md.j2"
MAX_ROWS = 25
"""Longest table of changed settings or derived values before "and N more"."""

LAYER_COLUMNS = (
    ("nodes", "Nodes: pool and GPUs"),
    ("ray", "Ray: workers and bundles"),
    ("vllm", "vLLM: parallelism, context, KV cache"),
    ("probes", "Probes"),
)

Fact = tuple[str, str]
"""(label, value) of one number in a layer cell; plain text, escaped when rendered."""


def model_facts(mp: ModelPlan) -> dict[str, list[Fact]]:
    """The numbers of each layer of one model, as the reviewer reads them."""
    pool, cap, engine = mp.pool, mp.capacity, mp.spec.engine
    nodes: list[Fact] = [
        ("pool", pool.name),
        ("node", f"{pool.instance.name}, {pool.instance.gpu_count} × {pool.gpu.name}"),
        ("nodes", f"{pool.spec.min_size}..{pool.spec.max_size} {pool.spec.capacity_type}"),
        ("GPUs per Pod", str(mp.gpus_per_pod)),
    ]
    if pool.cost_per_hour is not None:
        nodes.append(("cost", pool.cost_per_hour.explanation.split(" = ")[0]))
    if mp.ray is None:
        ray: list[Fact] = [("", "not on Ray (plain vLLM Deployment)")]
    else:
        r = mp.ray
        ray = [
            ("workers", f"{r.min_workers}..{r.max_workers} × {r.gpus_per_worker} GPU"),
            ("placement group", f"{len(r.bundles)} × {{GPU: 1}} {r.placement_strategy}"),
            ("upgrade", r.upgrade_strategy),
        ]
    vllm: list[Fact] = [
        (
            "",
            f"TP {engine.tensor_parallel_size} × PP {engine.pipeline_parallel_size} = "
            f"{plural(mp.gpus_per_replica, 'GPU')}",
        ),
        ("replicas", f"{mp.min_replicas}..{mp.max_replicas}"),
    ]
    if cap is None:
        vllm += [
            ("max_model_len", _num(engine.max_model_len) if engine.max_model_len else "model max"),
            ("KV cache", "not estimated (see Not evaluated)"),
        ]
    else:
        kv_bytes = max(0, cap.memory.available_kv_bytes)
        fits = cap.max_concurrent_full_length_sequences if cap.fits else 0
        vllm += [
            ("max_model_len", _num(cap.max_model_len)),
            ("weights", f"{gib(cap.weights.bytes_per_gpu)}/GPU"),
            ("KV cache", f"{gib(kv_bytes)}/GPU = {_num(cap.kv.tokens)} tokens"),
            (
                "full-length requests at once",
                str(fits) if cap.fits else "0: vLLM refuses to start",
            ),
            ("largest max_model_len that fits", _num(cap.largest_max_model_len)),
        ]
    if mp.serving is not None:
        j = mp.serving.judged
        vllm += [
            ("predicted TPOT", f"{j.tpot_seconds.value * 1e3:.1f} ms ({j.model})"),
            ("TTFT", f"{j.ttft_seconds.value:.2f} s"),
            ("output", f"{j.output_tokens_per_second.value:,.0f} tok/s per replica"),
        ]
    probes: list[Fact] = [
        ("startup window", f"{mp.probes.startup_window_s} s"),
    ]
    if cap is not None:
        probes.append(("estimated startup", f"{round(cap.startup.total_s)} s"))
    probes += [
        (
            "liveness",
            f"{mp.probes.liveness_failure_threshold} × {mp.probes.liveness_period_s} s",
        ),
        ("readiness", f"every {mp.probes.readiness_period_s} s"),
    ]
    return {"nodes": nodes, "ray": ray, "vllm": vllm, "probes": probes}


def _num(value: int) -> str:
    return f"{value:,}"


def _cell(facts: list[Fact], before: list[Fact] | None) -> Md:
    """Facts joined by <br>; a value that differs from the base is bold with the old one."""
    old = dict(before) if before is not None else {}
    parts = []
    for label, value in facts:
        shown = escape(value)
        if before is not None and label in old and old[label] != value:
            shown = Md(f"**{shown}** (was {escape(old[label])})")
        parts.append(f"{escape(label)} {shown}" if label else shown)
    return Md("<br>".join(parts))


CAPACITY_RULES = ("V003", "V004")
"""Rules that report what the capacity planner's start-up check reports (weights, KV)."""


def engine_problems(plan: StackPlan, findings: Sequence[dict[str, Any]] = ()) -> list[Md]:
    """One paragraph per engine the capacity planner says vLLM would refuse to start,
    unless a finding of V003/V004 on that engine's object already says so."""
    reported = {
        str(f["resource"]).split("/", 1)[-1] for f in findings if f.get("rule") in CAPACITY_RULES
    }
    out = []
    for mp in plan.models.values():
        cap = mp.capacity
        if cap is None or cap.fits or f"{mp.spec.namespace}/{mp.name}" in reported:
            continue
        mem = cap.memory
        name = escape(mp.name)
        if not cap.weights_fit:
            text = (
                f"**{name}: vLLM would not start.** The weights "
                f"({gib(cap.weights.bytes_per_gpu)} per GPU) and the runtime's own memory do "
                f"not fit in the {gib(mem.requested.value)} that gpu\\_memory\\_utilization "
                f"{cap.gpu_memory_utilization} grants on one {escape(mp.pool.gpu.name)}: "
                f"{escape(mem.explanation)}.<br>**Fix:** more GPUs per engine "
                "(tensor\\_parallel\\_size), a GPU with more memory, or quantised weights."
            )
        else:
            quoted = f" vLLM {VLLM_VERSION} stops with: “{escape(cap.kv.vllm_error)}”" * bool(
                cap.kv.vllm_error
            )
            text = (
                f"**{name}: vLLM would refuse to start.** One request of max\\_model\\_len "
                f"{_num(cap.max_model_len)} tokens needs {gib(cap.kv.needed_bytes)} of KV cache "
                f"per GPU, but only {gib(max(0, cap.kv.check_bytes))} is left for it on one "
                f"{escape(mp.pool.gpu.name)} ({escape(mem.explanation)}). The largest "
                f"max\\_model\\_len that fits is {_num(cap.largest_max_model_len)}.{quoted}"
                f"<br>**Fix:** set max\\_model\\_len to at most "
                f"{_num(cap.largest_max_model_len)}, or make room for the KV cache: more GPUs "
                "per engine (tensor\\_parallel\\_size), a GPU with more memory, "
                "kv\\_cache\\_dtype fp8, or a higher gpu\\_memory\\_utilization."
            )
        out.append(Md(text))
    return out


def _value(value: Any) -> Md:
    if value is MISSING:
        return Md("*(absent)*")
    if isinstance(value, dict):
        return escape(", ".join(f"{k}={v}" for k, v in value.items()) or "{}")
    return code(value) if not isinstance(value, str) or len(value) <= 60 else escape(value)


def _change_rows(changes: Sequence[Change]) -> list[tuple[Md, Md, Md]]:
    return [(code(c.path), _value(c.before), _value(c.after)) for c in changes[:MAX_ROWS]]


def _finding_key(f: dict[str, Any]) -> tuple[str, str]:
    return (str(f["rule"]), str(f["resource"]))


def _mark_findings(
    findings: list[dict[str, Any]], comparison: Comparison | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Findings with ``status`` new/existing against the base, and the base's resolved ones."""
    if comparison is None or comparison.base_error is not None:
        return findings, []
    if comparison.new_stack:
        return [{**f, "status": "new"} for f in findings], []
    base = Counter(_finding_key(f) for f in comparison.base_findings)
    marked = []
    for f in findings:
        key = _finding_key(f)
        if base[key] > 0:
            base[key] -= 1
            marked.append({**f, "status": "existing"})
        else:
            marked.append({**f, "status": "new"})
    resolved = []
    for f in comparison.base_findings:
        key = _finding_key(f)
        if base[key] > 0:
            base[key] -= 1
            resolved.append(f)
    return marked, resolved


def _status(findings: list[dict[str, Any]], exit_code: int, problems: list[Md]) -> Md:
    """The verdict of the rules, and the capacity planner's when an engine cannot start."""
    status = status_line(findings, exit_code)
    if not problems:
        return status
    engines = plural(len(problems), "engine")
    if exit_code:
        return Md(f"{status} · **{engines} vLLM would refuse to start**")
    return Md(f"⚠️ **{engines} vLLM would refuse to start** (capacity planner) · rules: {status}")


def _summary(report: PlanReport, comparison: Comparison | None, findings: list[Any]) -> Md:
    """The second line: what was compared and what the change did."""
    if comparison is None:
        return Md("No base given (`--base REF` or `--base FILE` compares with one).")
    label = code(comparison.base.label)
    if comparison.new_stack:
        return Md(f"New stack file: {label} does not exist, so everything below is added.")
    if comparison.base_error is not None:
        return Md(f"The base {label} could not be planned, so only this side is shown.")
    new = sum(f.get("status") == "new" for f in findings)
    parts = [
        plural(len(comparison.settings), "setting") + " changed",
        plural(len(comparison.derived), "derived value") + " changed",
        plural(
            len(comparison.resources_added)
            + len(comparison.resources_removed)
            + len(comparison.resources_changed),
            "resource",
        )
        + " added, removed or changed",
        plural(new, "new finding"),
    ]
    return Md(f"Against {label}: " + ", ".join(parts) + ".")


def _not_evaluated(report: PlanReport, comparison: Comparison | None) -> list[dict[str, str]]:
    rows = [dict(n) for n in report.not_evaluated]
    for mp in report.plan.models.values():
        if mp.capacity is None:
            rows.append(
                {
                    "rule": "capacity",
                    "resource": f"model {mp.name}",
                    "reason": f"KV cache, startup and step time not estimated: "
                    f"{mp.capacity_unavailable}",
                }
            )
    if comparison is not None and comparison.base_error is not None:
        rows.append(
            {
                "rule": "--base",
                "resource": comparison.base.label,
                "reason": f"the base could not be planned: {comparison.base_error}",
            }
        )
    return rows


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        # Escape everything that is not already Markdown: user strings cannot inject.
        finalize=lambda value: value if isinstance(value, Md) else escape(value),
    )
    env.filters["code"] = code
    env.filters["mdjoin"] = lambda items, sep: Md(sep.join(escape(i) for i in items))
    return env


def markdown_report(
    report: PlanReport,
    document: dict[str, Any],
    base: str | None,
    project_dir: Path,
    placement: Sequence[str] | None = None,
) -> str:
    """``plan --format markdown [--base REF|FILE]``: read the base, compare, render."""
    comparison = None
    if base is not None:
        base_stack = read_base(base, Path(report.file))
        comparison = compare(
            base_stack,
            document,
            report.plan,
            report.resources,
            stack=report.stack,
            project_dir=project_dir,
        )
    return plan_markdown(report, comparison, placement)


def plan_markdown(
    report: PlanReport,
    comparison: Comparison | None = None,
    placement: Sequence[str] | None = None,
) -> str:
    """The pull-request comment for one stack (``comparison``: against ``--base``;
    ``placement``: the lines of ``--verify-placement``)."""
    plan = report.plan
    findings, resolved = _mark_findings(report.findings, comparison)
    base_plan = comparison.base_plan if comparison is not None else None
    rows = []
    for mp in plan.models.values():
        facts = model_facts(mp)
        before = None
        if base_plan is not None and mp.name in base_plan.models:
            before = model_facts(base_plan.models[mp.name])
        name = escape(mp.name)
        if comparison is not None and base_plan is not None and before is None:
            name = Md(f"{name} (**new**)")
        cells = [_cell(facts[k], before[k] if before else None) for k, _ in LAYER_COLUMNS]
        rows.append((name, code(mp.spec.model), cells))
    resources = []
    if comparison is not None:
        resources = [
            *(("added", r) for r in comparison.resources_added),
            *(("removed", r) for r in comparison.resources_removed),
            *(("changed", r) for r in comparison.resources_changed),
        ]
    problems = engine_problems(plan, findings)
    text = (
        _environment()
        .get_template(TEMPLATE)
        .render(
            stack=report.stack,
            environment=plan.spec.environment,
            file=report.file,
            status=_status(findings, report.exit_code, problems),
            summary=_summary(report, comparison, findings),
            comparison=comparison,
            settings=_change_rows(comparison.settings) if comparison else [],
            settings_more=max(0, len(comparison.settings) - MAX_ROWS) if comparison else 0,
            derived=_change_rows(comparison.derived) if comparison else [],
            derived_more=max(0, len(comparison.derived) - MAX_ROWS) if comparison else 0,
            resources=resources,
            problems=problems,
            columns=[title for _, title in LAYER_COLUMNS],
            rows=rows,
            findings=Md("\n".join(findings_markdown(findings, resolved=resolved))),
            not_evaluated=Md("\n".join(not_evaluated_markdown(_not_evaluated(report, comparison)))),
            placement=placement or [],
            resource_count=len([r for r in report.resources if r.type != "pulumi:pulumi:Stack"]),
        )
    )
    if report.warnings:
        notes = "\n".join(f"- {escape(w)}" for w in report.warnings)
        text = text.rstrip("\n") + f"\n\n**Warnings (advisory)**\n\n{notes}\n"
    return text.rstrip("\n") + "\n"
