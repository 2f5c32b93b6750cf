"""R007 serve-autoscaling-matches-engine."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, cast

from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import (
    every_release,
    on_every_candidate,
    release_unknown,
    releases_split,
)
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.candidates import (
    CandidateInputs,
    ReleaseCandidates,
    candidate_inputs,
    release_inputs,
    unsized_reason,
)
from gpustrata_policies.view.capacity import (
    Inputs,
    capacity_inputs,
    engine_sites,
    engine_version,
)
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


def _batch(
    ctx: RuleContext, site: EngineSite
) -> (
    tuple[int, str]
    | tuple[ReleaseCandidates, list[tuple[tuple[str, ...], int, str]]]
    | CandidateInputs
    | Verdict
):
    """max_num_seqs as the engine runs it (stated, or the release's default on its GPU; on
    every GPU it may run on where the release is known and the GPU is not), or the
    not-evaluated verdict that says why it is not known."""
    stated = site.int_flag("max_num_seqs")
    if isinstance(stated, int):
        return stated, "engine_kwargs max_num_seqs"
    values: dict[str, Value] = {"deployment": site.name}
    if stated is not None:
        values["max_num_seqs"] = quoted(site.flag("max_num_seqs"))
        return Verdict("not_evaluated", "max-num-seqs-malformed", values=values)
    version = engine_version(site)
    if version.version is None:
        every = _every_release(ctx, site)
        if every is not None:
            return every
        values["release"] = version.where
        return Verdict("not_evaluated", "release-unknown", values=values)
    found = capacity_inputs(ctx, site)
    if isinstance(found, str):
        on_each = candidate_inputs(ctx, site)
        if on_each is not None:
            return on_each
        why = unsized_reason(ctx, site, found).removeprefix(site.name).lstrip(": ")
        return Verdict("not_evaluated", "default-unknown", values={**values, "why": why})
    seqs = {inp.estimate.max_num_seqs for inp in found}
    if len(seqs) != 1:
        return Verdict("not_evaluated", "default-differs-by-gpu", values=values)
    return seqs.pop(), f"vLLM {version.version}'s default on {found[0].gpu.label}"


def _every_release(
    ctx: RuleContext, site: EngineSite
) -> tuple[ReleaseCandidates, list[tuple[tuple[str, ...], int, str]]] | None:
    """max_num_seqs under each class of releases an image that names none may run, on its
    one known GPU (:func:`~gpustrata_policies.view.candidates.release_inputs`); None where
    the releases are not bounded, the GPU is unknown or several, or a class is not sized."""
    found = capacity_inputs(ctx, site)
    if isinstance(found, str) or len(found) != 1:
        return None
    inputs = release_inputs(ctx, found[0])
    if inputs is None:
        return None
    out: list[tuple[tuple[str, ...], int, str]] = []
    for releases, sized in inputs.classes:
        if isinstance(sized, str):
            return None
        where = f"vLLM {releases[-1]}'s default on {sized.gpu.label}"
        out.append((releases, sized.estimate.max_num_seqs, where))
    return inputs.candidates, out


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
        admitted = _number(deployment, MAX_KEYS)
        if isinstance(batch, Verdict):
            yield batch
        elif isinstance(batch, CandidateInputs):
            yield from _on_every_gpu(site, batch, target, admitted, ratio)
        elif isinstance(batch[0], ReleaseCandidates):
            yield from _on_every_release(site, batch[0], batch[1], target, admitted, ratio)
        else:
            yield from _judge(site, target, batch[0], batch[1], admitted, ratio)


def _on_every_gpu(
    site: EngineSite,
    on_each: CandidateInputs,
    target: tuple[str, float],
    admitted: tuple[str, float] | str | None,
    ratio: float,
) -> Iterator[Verdict]:
    """The target against the release's default max_num_seqs on every GPU the engine may
    run on (its GPU unknown): decided where all agree
    (:func:`~gpustrata_policies.rules._common.on_every_candidate`), else a record naming the
    GPUs on each side and the profile key."""
    release = engine_version(site).version

    def judge_engine(inp: Inputs) -> Iterator[Verdict]:
        if not inp.estimate.fits:
            return  # vLLM does not start there (V003/V004): no batch to compare
        where = f"vLLM {release}'s default on {inp.gpu.label}"
        for verdict in _judge(site, target, inp.estimate.max_num_seqs, where, admitted, ratio):
            yield replace(verdict, values={**verdict.values, "gpu": inp.gpu.label})

    for verdict in on_every_candidate(site, on_each, judge_engine):
        if verdict.decision == "violation":
            where = f"vLLM {release}'s default on {verdict.values['gpu']}"
            yield replace(verdict, values={**verdict.values, "where": where})
        elif verdict.reason == "not-estimated":
            why = str(verdict.values["why"]).removeprefix(site.name).lstrip(": ")
            values: dict[str, Value] = {"deployment": site.name, "why": why}
            yield Verdict("not_evaluated", "default-depends-on-gpu", values=values)
        else:
            yield verdict


def _on_every_release(
    site: EngineSite,
    cands: ReleaseCandidates,
    classes: list[tuple[tuple[str, ...], int, str]],
    target: tuple[str, float],
    admitted: tuple[str, float] | str | None,
    ratio: float,
) -> Iterator[Verdict]:
    """The target against max_num_seqs under every release the image may run: decided
    where all agree (:func:`~gpustrata_policies.rules._common.every_release`)."""
    judged = [
        (rs, tuple(_judge(site, target, seqs, where, admitted, ratio)))
        for rs, seqs, where in classes
    ]
    yield from every_release(
        cands,
        judged,
        lambda v: f"{v.values['where']}; on every vLLM release {cands.span} its image may run",
        lambda rest, partial: Verdict(
            "not_evaluated",
            "default-unknown",
            values={
                "deployment": site.name,
                "why": f"{release_unknown(site, cands)}; {releases_split(cands, rest, partial)}",
            },
        ),
        key="where",
    )


def _judge(
    site: EngineSite,
    target: tuple[str, float],
    seqs: int,
    where: str,
    admitted: tuple[str, float] | str | None,
    ratio: float,
) -> Iterator[Verdict]:
    key, value = target
    if value <= ratio * seqs:
        return
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


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an R007 message quotes beyond its values: where a cluster profile pins the
    image, and the figures of a target above the batch (its multiple of max_num_seqs, what
    each replica admits, the largest target the ratio allows)."""
    v = verdict.values
    if verdict.reason == "release-unknown":
        return {"hint": profile_hint("images")}
    if verdict.reason != "target-above-batch":
        return {}
    seqs, value = cast(int, v["max_num_seqs"]), cast(float, v["target"])
    ratio = cast(float, verdict.thresholds["max_target_batch_ratio"])
    admitted = cast(tuple[str, float] | None, v["admitted"])
    return {
        "multiple": f"{value / seqs:.1f}",
        "queue": f"; each replica admits up to {admitted[0]} {admitted[1]:g}" if admitted else "",
        "cap": str(int(ratio * seqs)),
    }


RULE = folder_rule(__name__, worded(judge, fields))
