"""V002 parallelism-fits-model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata.core.terminal import quoted
from gpustrata.vllm.parallelism import kv_heads_split, valid_tp_sizes
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import engine_sites, site_architecture
from gpustrata_policies.view.objects import K8sObject

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture

"""The release whose sources these facts were checked against (catalogue reference)."""


def problems(arch: ModelArchitecture, tp: int, pp: int) -> list[str]:
    """Why vLLM refuses this TP/PP for the model (empty when it accepts them)."""
    out: list[str] = []
    heads, kv, layers = arch.num_attention_heads, arch.num_key_value_heads, arch.num_hidden_layers
    fits = ", ".join(str(t) for t in valid_tp_sizes(arch))
    if tp < 1:
        out.append(f"tensor_parallel_size {tp} is not a positive number; use one of {fits}")
    elif heads % tp:
        out.append(
            f"tensor_parallel_size {tp} does not divide its {heads} attention heads (vLLM "
            f"refuses to start: 'Total number of attention heads ({heads}) must be divisible "
            f"by tensor parallel size ({tp}).'); use one of {fits}"
        )
    elif not kv_heads_split(arch, tp):
        out.append(
            f"tensor_parallel_size {tp} and its {kv} KV heads neither divide the other (vLLM's "
            "attention layers split KV heads across ranks, or replicate them when TP is "
            f"larger, and assert one divides the other); use one of {fits}"
        )
    if pp < 1 or pp > layers:
        out.append(
            f"pipeline_parallel_size {pp} is outside 1..{layers}, its number of layers "
            "(each pipeline stage needs at least one layer)"
        )
    return out


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """TP divides the model's heads (and fits its KV heads); PP is at most its layers."""
    for site in engine_sites(ctx, obj):
        tp, pp = site.int_flag("tensor_parallel_size"), site.int_flag("pipeline_parallel_size")
        tp = 1 if tp is None else tp
        pp = 1 if pp is None else pp
        if isinstance(tp, str) or isinstance(pp, str):
            bad = tp if isinstance(tp, str) else pp
            yield ctx.not_evaluated(
                obj,
                f"{site.label}: parallel size {quoted(bad)} is not a number (V001 reads it too)",
            )
            continue
        if tp == 1 and pp == 1:
            continue
        arch = site_architecture(site)
        if arch is None:
            yield ctx.not_evaluated(
                obj,
                f"{site.label} serves {' / '.join(site.models) or 'a model it does not name'}, "
                "which is not in the model catalogue, so its attention heads and layers are "
                f"unknown; {catalogs.UNCATALOGUED_FIX}",
            )
            continue
        found = problems(arch, tp, pp)
        if found:
            kv = "MLA" if arch.attention == "mla" else f"{arch.num_key_value_heads} KV heads"
            yield ctx.violation(
                obj,
                f"{site.label} serves {arch.id} ({arch.num_attention_heads} attention heads, "
                f"{kv}, {arch.num_hidden_layers} layers): " + "; ".join(found),
                site.path,
            )


RULE = folder_rule(__name__, check)
