"""R007 serve-autoscaling-matches-engine."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view.capacity import capacity_inputs, engine_sites, engine_version
from gpustrata_policies.view.engines import EngineSite
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import profile_hint

TARGET_KEYS = ("target_ongoing_requests", "target_num_ongoing_requests_per_replica")
"""Ray Serve's autoscaling target, and its name before Ray 2.32 (still read by older Serve)."""
MAX_KEYS = ("max_ongoing_requests", "max_concurrent_queries")
"""Requests one replica admits at once, and the older name."""


def _number(config: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, float] | str | None:
    """(key as written, value) of the first key set, an error text, or None when unset."""
    for key in keys:
        value = config.get(key)
        if value is UNKNOWN:
            raise UnknownInput(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            return f"{key} {quoted(value)} is not a number"
        try:
            return key, float(value)
        except ValueError:
            return f"{key} {quoted(value)} is not a number"
    return None


def _batch(ctx: RuleContext, site: EngineSite) -> tuple[int, str] | Verdict:
    """max_num_seqs as the engine runs it (stated, or the release's default on its GPU), or
    the not-evaluated verdict that says why it is not known."""
    stated = site.int_flag("max_num_seqs")
    if isinstance(stated, int):
        return stated, "engine_kwargs max_num_seqs"
    values: dict[str, Value] = {"deployment": site.name}
    if stated is not None:
        values["max_num_seqs"] = quoted(site.flag("max_num_seqs"))
        return Verdict("not_evaluated", "max-num-seqs-malformed", values=values)
    version = engine_version(site)
    if version.version is None:
        values["release"] = version.where
        return Verdict("not_evaluated", "release-unknown", values=values)
    found = capacity_inputs(ctx, site)
    if isinstance(found, str):
        return Verdict("not_evaluated", "default-unknown", values={**values, "why": found})
    seqs = {inp.estimate.max_num_seqs for inp in found}
    if len(seqs) != 1:
        return Verdict("not_evaluated", "default-differs-by-gpu", values=values)
    return seqs.pop(), f"vLLM {version.version}'s default on {found[0].gpu.label}"


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Ray Serve LLM autoscaling targets near what one replica's engine runs at once."""
    ratio = ctx.threshold("max_target_batch_ratio")
    for site in engine_sites(ctx, obj):
        if not site.llm_config:
            continue  # a container engine: no Ray Serve autoscaler in front of it
        deployment = site.llm_config.get("deployment_config")
        if not isinstance(deployment, Mapping):
            continue
        autoscaling = deployment.get("autoscaling_config")
        target = _number(autoscaling, TARGET_KEYS) if isinstance(autoscaling, Mapping) else None
        if target is None:
            continue  # Ray Serve LLM's default target (16) sits below any engine batch read
        if isinstance(target, str):
            values = {"deployment": site.name, "error": target}
            yield Verdict("not_evaluated", "target-unreadable", values=values)
            continue
        batch = _batch(ctx, site)
        if isinstance(batch, Verdict):
            yield batch
            continue
        seqs, where = batch
        key, value = target
        if value <= ratio * seqs:
            continue
        admitted = _number(deployment, MAX_KEYS)
        yield Verdict(
            "violation",
            "target-above-batch",
            values={
                "deployment": site.name,
                "key": key,
                "target": value,
                "max_num_seqs": seqs,
                "where": where,
                "admitted": admitted if isinstance(admitted, tuple) else None,
            },
            thresholds={"max_target_batch_ratio": ratio},
            path=site.path,
        )


_NOT_EVALUATED = {
    "target-unreadable": "{error}",
    "max-num-seqs-malformed": "max_num_seqs {max_num_seqs} is not an integer",
    "release-unknown": (
        "max_num_seqs unset and {release}: its default differs between releases "
        "and GPUs. Set max_num_seqs in engine_kwargs or pin the image {hint}"
    ),
    "default-unknown": "max_num_seqs unset, and its default on this GPU is not known: {why}",
    "default-differs-by-gpu": (
        "max_num_seqs unset, and its default differs between the GPUs it may run on"
    ),
}
"""The prose of R007's not-evaluated verdicts, by reason (``{key}``: a verdict value)."""


def message(verdict: Verdict) -> str:
    """The prose of an R007 verdict."""
    v = verdict.values
    if verdict.reason in _NOT_EVALUATED:
        text = _NOT_EVALUATED[verdict.reason].format_map({**v, "hint": profile_hint("images")})
        return f"{v['deployment']}: {text}"
    key, seqs = v["key"], cast(int, v["max_num_seqs"])
    value = cast(float, v["target"])
    ratio = cast(float, verdict.thresholds["max_target_batch_ratio"])
    admitted = cast(tuple[str, float] | None, v["admitted"])
    queue = f"; each replica admits up to {admitted[0]} {admitted[1]:g}" if admitted else ""
    return (
        f"{v['deployment']}: Serve autoscaling {key} {value:g} is {value / seqs:.1f} x the "
        f"engine's max_num_seqs {seqs} ({v['where']}){queue}. vLLM runs {seqs} sequences at "
        f"once and the rest wait inside the replica, while the autoscaler adds a replica "
        f"only when the average ongoing requests per replica exceed {value:g}: requests "
        f"queue (TTFT grows) long before any scale-up. Fix: {key} at most "
        f"{ratio:g} x max_num_seqs ({int(ratio * seqs)}), or raise max_num_seqs where the "
        "KV cache holds it (V012)"
    )


RULE = folder_rule(__name__, judged(judge, message))
