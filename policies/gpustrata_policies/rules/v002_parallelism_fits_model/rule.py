"""V002 parallelism-fits-model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

from gpustrata.core.terminal import quoted
from gpustrata.vllm.parallelism import kv_heads_split, valid_tp_sizes
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import engine_sites, site_architecture
from gpustrata_policies.view.objects import K8sObject

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture

"""The release whose sources these facts were checked against (catalogue reference)."""


def cases(arch: ModelArchitecture, tp: int, pp: int) -> list[str]:
    """Why vLLM refuses this TP/PP for the model, as case keys (``tp-not-positive``,
    ``tp-splits-heads``, ``tp-splits-kv-heads``, ``pp-outside-layers``; empty when it
    accepts them)."""
    out: list[str] = []
    if tp < 1:
        out.append("tp-not-positive")
    elif arch.num_attention_heads % tp:
        out.append("tp-splits-heads")
    elif not kv_heads_split(arch, tp):
        out.append("tp-splits-kv-heads")
    if pp < 1 or pp > arch.num_hidden_layers:
        out.append("pp-outside-layers")
    return out


_CASES: Mapping[str, str] = {
    "tp-not-positive": "tensor_parallel_size {tp} is not a positive number; use one of {fits}",
    "tp-splits-heads": (
        "tensor_parallel_size {tp} does not divide its {heads} attention heads (vLLM "
        "refuses to start: 'Total number of attention heads ({heads}) must be divisible "
        "by tensor parallel size ({tp}).'); use one of {fits}"
    ),
    "tp-splits-kv-heads": (
        "tensor_parallel_size {tp} and its {kv_heads} KV heads neither divide the other (vLLM's "
        "attention layers split KV heads across ranks, or replicate them when TP is "
        "larger, and assert one divides the other); use one of {fits}"
    ),
    "pp-outside-layers": (
        "pipeline_parallel_size {pp} is outside 1..{layers}, its number of layers "
        "(each pipeline stage needs at least one layer)"
    ),
}
"""Each case of :func:`cases` in words (``{key}``: a verdict value or threshold)."""


def problems(arch: ModelArchitecture, tp: int, pp: int) -> list[str]:
    """Why vLLM refuses this TP/PP for the model, in words (empty when it accepts them)."""
    figures = {"tp": tp, "pp": pp, **_model_values(arch), **_thresholds(arch)}
    return [_case_text(case, figures) for case in cases(arch, tp, pp)]


def _model_values(arch: ModelArchitecture) -> dict[str, Value]:
    """The model's figures a verdict carries (heads, KV heads, layers)."""
    return {
        "model": arch.id,
        "heads": arch.num_attention_heads,
        "kv_heads": arch.num_key_value_heads,
        "mla": arch.attention == "mla",
        "layers": arch.num_hidden_layers,
    }


def _thresholds(arch: ModelArchitecture) -> dict[str, Value]:
    """What vLLM accepts for the model: its valid TP sizes and at most one layer per stage."""
    return {"valid_tp_sizes": tuple(valid_tp_sizes(arch)), "max_pp": arch.num_hidden_layers}


def _case_text(case: str, figures: Mapping[str, Value]) -> str:
    """One case of :func:`cases` in words, from a verdict's figures."""
    fits = ", ".join(str(t) for t in cast(tuple[int, ...], figures["valid_tp_sizes"]))
    return _CASES[case].format_map({**figures, "fits": fits})


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """TP divides the model's heads (and fits its KV heads); PP is at most its layers."""
    for site in engine_sites(ctx, obj, presets=True):  # a KServe preset's too: no release
        tp, pp = site.int_flag("tensor_parallel_size"), site.int_flag("pipeline_parallel_size")
        tp = 1 if tp is None else tp
        pp = 1 if pp is None else pp
        if isinstance(tp, str) or isinstance(pp, str):
            bad = tp if isinstance(tp, str) else pp
            values = {"engine": site.label, "value": bad}
            yield Verdict("not_evaluated", "parallel-size-malformed", values=values)
            continue
        if tp == 1 and pp == 1:
            continue
        arch = site_architecture(site)
        if arch is None:
            models: dict[str, Value] = {"engine": site.label, "models": tuple(site.models)}
            yield Verdict("not_evaluated", "model-uncatalogued", values=models)
            continue
        found = cases(arch, tp, pp)
        if found:
            yield Verdict(
                "violation",
                "parallelism-does-not-fit",
                values={
                    "engine": site.label,
                    "tp": tp,
                    "pp": pp,
                    "cases": tuple(found),
                    **_model_values(arch),
                },
                thresholds=_thresholds(arch),
                path=site.path,
            )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V002 message quotes beyond its values: the value quoted, the models named
    and the catalogue's fix, or the model's KV heads and each case of :func:`cases` in words."""
    v = verdict.values
    if verdict.reason == "parallel-size-malformed":
        return {"quoted": quoted(v["value"])}
    if verdict.reason == "model-uncatalogued":
        models = " / ".join(cast(tuple[str, ...], v["models"])) or "a model it does not name"
        return {"named": models, "fix": catalogs.UNCATALOGUED_FIX}
    figures = {**v, **verdict.thresholds}
    return {
        "kv": "MLA" if v["mla"] else f"{v['kv_heads']} KV heads",
        "found": "; ".join(
            _case_text(case, figures) for case in cast(tuple[str, ...], figures["cases"])
        ),
    }


RULE = folder_rule(__name__, worded(judge, fields))
