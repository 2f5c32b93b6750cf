"""Helpers shared by rule modules (not a rule: the registry skips ``_`` modules)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpustrata.core.terminal import yaml_spelling
from gpustrata.core.unknown import UnknownInput, handled_unknowns
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._verdict import Value, Verdict
from gpustrata_policies.view.agreement import agreement
from gpustrata_policies.view.candidates import (
    CandidateInputs,
    GpuCandidates,
    ReleaseCandidates,
    ReleaseInputs,
    candidate_inputs,
    unsized_reason,
)
from gpustrata_policies.view.capacity import (
    Inputs,
    capacity_inputs,
    not_evaluated_reason,
)
from gpustrata_policies.view.capacity import engine_sites as capacity_sites
from gpustrata_policies.view.endpoints import by_namespace
from gpustrata_policies.view.engines import (
    EngineSite,
    engine_sites,
    unread_ray_engines,
)
from gpustrata_policies.view.gateways import PoolView
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel


def fmt(value: Any) -> str:
    """A manifest value as the user wrote it, in YAML's spelling (strings unquoted; never a
    Python repr: :func:`gpustrata.core.terminal.yaml_spelling`)."""
    return yaml_spelling(value)


def and_joined(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: names as a message lists them."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def object_index(ctx: RuleContext) -> dict[tuple[str, str, str], K8sObject]:
    """Objects by (kind, namespace, name), built once per evaluation."""

    def build() -> dict[tuple[str, str, str], K8sObject]:
        return {(o.kind, o.namespace, o.name): o for o in ctx.objects}

    index: dict[tuple[str, str, str], K8sObject] = ctx.memo("object_index", build)
    return index


AUTOSCALER_KINDS = frozenset({"HorizontalPodAutoscaler", "ScaledObject"})


def scale_target(obj: K8sObject) -> tuple[str, str, str] | None:
    """(kind, namespace, name) an HPA / KEDA ScaledObject / VPA scales, or ``None``."""
    key = "targetRef" if obj.kind == "VerticalPodAutoscaler" else "scaleTargetRef"
    ref = as_map(dig(obj.raw, "spec", key), f"spec.{key} of {obj.resource}")
    name = ref.get("name")
    if not isinstance(name, str):
        return None
    default_kind = "Deployment" if obj.kind == "ScaledObject" else ""
    kind = ref.get("kind") or default_kind
    return str(kind), obj.namespace, name


def autoscalers_by_scale_target(
    ctx: RuleContext,
) -> tuple[dict[tuple[str, str, str], list[K8sObject]], str | None]:
    """HPAs and ScaledObjects by the (kind, namespace, name) they scale, once per
    evaluation; and why some autoscaler's target is unknown during a preview (``None``:
    none is), since such an autoscaler may scale any workload."""

    def build() -> tuple[dict[tuple[str, str, str], list[K8sObject]], str | None]:
        index: dict[tuple[str, str, str], list[K8sObject]] = {}
        unknown: str | None = None
        for obj in ctx.objects:
            if obj.kind not in AUTOSCALER_KINDS:
                continue
            try:
                with handled_unknowns():
                    target = scale_target(obj)
            except UnknownInput as exc:
                unknown = unknown or exc.what
                continue
            if target is not None:
                index.setdefault(target, []).append(obj)
        return index, unknown

    found: tuple[dict[tuple[str, str, str], list[K8sObject]], str | None] = ctx.memo(
        "autoscalers_by_scale_target", build
    )
    return found


def is_keda_owned(obj: K8sObject) -> bool:
    """An HPA that KEDA created for a ScaledObject (counted through the ScaledObject)."""
    owners = as_list(dig(obj.raw, "metadata", "ownerReferences"), "ownerReferences")
    if any(isinstance(o, Mapping) and o.get("kind") == "ScaledObject" for o in owners):
        return True
    return "scaledobject.keda.sh/name" in obj.labels


def autoscaler_target(obj: K8sObject) -> tuple[str, str, str] | None:
    """(kind, namespace, name) an HPA / KEDA ScaledObject writes replicas of; ``None`` for
    other kinds, for the HPA KEDA creates for a ScaledObject, and without a target name."""
    if obj.kind not in AUTOSCALER_KINDS or is_keda_owned(obj):
        return None
    return scale_target(obj)


def runs_vllm(ctx: RuleContext, obj: K8sObject) -> bool:
    """Does the object run a vLLM engine (a container command, Ray pods included, or Ray
    Serve LLM configs, those given as file references too)?"""
    return bool(engine_sites(ctx, obj, ray_pods=True) or unread_ray_engines(obj))


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A Kubernetes LabelSelector (matchLabels + matchExpressions) against labels."""
    match_labels = as_map(selector.get("matchLabels"), "matchLabels")
    if any(str(labels.get(k)) != str(v) for k, v in match_labels.items()):
        return False
    for expr in as_list(selector.get("matchExpressions"), "matchExpressions"):
        if not isinstance(expr, Mapping):
            continue
        key, op = str(expr.get("key")), expr.get("operator")
        values = [str(v) for v in expr.get("values") or []]
        present = key in labels
        ok = {
            "In": present and str(labels.get(key)) in values,
            "NotIn": not present or str(labels.get(key)) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(str(op), False)
        if not ok:
            return False
    return bool(match_labels) or bool(selector.get("matchExpressions"))


def pool_members(
    ctx: RuleContext, pool: PoolView
) -> tuple[list[tuple[PodRef, list[EngineSite]]], list[PodRef]]:
    """The Pods an InferencePool's selector picks in its namespace: those running vLLM
    (with their engines that listen on a known port) and the others (another server, a
    simulator, or the endpoint picker itself)."""
    engines: list[tuple[PodRef, list[EngineSite]]] = []
    others: list[PodRef] = []
    for obj in by_namespace(ctx).get(pool.obj.namespace, ()):
        if obj is pool.obj:
            continue
        pods = [p for p in obj.pods() if not p.is_ray]
        if not pods:
            continue
        sites = [s for s in engine_sites(ctx, obj) if not s.ray and s.engine.port is not None]
        for pod in pods:
            if not selector_matches(pool.selector, pod.labels):
                continue
            mine = [s for s in sites if _runs_in(s, pod)]
            if mine:
                engines.append((pod, mine))
            else:
                others.append(pod)
    return engines, others


def vllm_pods_in(ctx: RuleContext, namespace: str) -> list[tuple[PodRef, EngineSite]]:
    """Pods of *namespace* that run a vLLM engine on a known port (not Ray workers)."""
    out: list[tuple[PodRef, EngineSite]] = []
    for obj in by_namespace(ctx).get(namespace, ()):
        for site in engine_sites(ctx, obj):
            if site.ray or site.engine.port is None:
                continue
            for pod in obj.pods():
                if not pod.is_ray and _runs_in(site, pod):
                    out.append((pod, site))
    return out


def _runs_in(site: EngineSite, pod: PodRef) -> bool:
    return site.gpu_pod is pod or (site.container is not None and site.container.pod is pod)


def judged_engines(
    ctx: RuleContext,
    obj: K8sObject,
    judge_engine: Callable[[Inputs], Iterable[Verdict]],
    *,
    presets: bool = False,
) -> Iterator[Verdict]:
    """A capacity rule's verdicts: *judge_engine*'s on each engine the view estimates, on
    each GPU model it lands on (:func:`~gpustrata_policies.view.capacity.capacity_inputs`).
    Where the engine's GPU is unknown, its verdicts on every GPU it may run on
    (:func:`on_every_candidate`); where it could not be estimated otherwise, a
    "not-estimated" verdict carrying the view's sentence (``values["why"]``), so that the
    rule's ``messages`` template ``{why}`` words the same not-evaluated record. With
    *presets*, also the engines a controller's preset writes (a rule whose verdict does not
    depend on the vLLM release: :func:`~gpustrata_policies.view.engines.engine_sites`)."""
    for site in capacity_sites(ctx, obj, presets=presets):
        found = capacity_inputs(ctx, site)
        if not isinstance(found, str):
            for inp in found:
                yield from judge_engine(inp)
            continue
        candidates = candidate_inputs(ctx, site)
        if candidates is None:
            why = ctx.not_evaluated(obj, unsized_reason(ctx, site, found)).reason
            yield Verdict("not_evaluated", "not-estimated", values={"why": why})
        else:
            yield from on_every_candidate(site, candidates, judge_engine)


def on_every_candidate(
    site: EngineSite,
    found: CandidateInputs,
    judge_engine: Callable[[Inputs], Iterable[Verdict]],
) -> Iterator[Verdict]:
    """The verdicts of an engine whose GPU is unknown: *judge_engine* on every candidate
    GPU, reported only where they agree (same decisions for the same reasons on each).
    Nothing is assumed about which GPU it is.

    A pass on all is silent; a finding on all is the one on the largest candidate, its GPU
    named as the whole set ("every catalogued GPU it can run on, from X GiB to Y GiB");
    otherwise "not evaluated", naming the GPUs it passes on and those it fails on, and the
    profile key that would decide it. A candidate on which vLLM does not start for another
    rule's reason (its weights or one sequence do not fit: V003, V004), and the rule says
    nothing, neither agrees nor disagrees: the rule's question does not arise there."""
    cands = found.candidates
    judged: list[tuple[GpuModel, _Outcome]] = []
    for gpu, inp in zip(cands.gpus, found.inputs, strict=True):
        if isinstance(inp, str):
            judged.append((gpu, inp))
            continue
        verdicts = tuple(judge_engine(inp))
        judged.append((gpu, _MOOT if not verdicts and not inp.estimate.fits else verdicts))
    live = [(g, o) for g, o in judged if o != _MOOT]
    if not live:
        return  # vLLM starts on none: V003's (or V004's) finding, as on a known GPU
    if not agreement(live, lambda j: _kind(j[1])).agreed or any(
        isinstance(o, str) for _, o in live
    ):
        yield _split(site, cands, judged)
        return
    gpus, last = [g for g, _ in live], live[-1][1]
    assert not isinstance(last, str)  # narrowed above
    moot = len(judged) - len(live)
    for verdict in last:
        if verdict.decision == "not_evaluated" or "gpu" not in verdict.values:
            yield verdict
            continue
        models = f"{len(gpus)} models" if len(gpus) > 1 else "1 model"
        every = f"every catalogued GPU it can run on ({models} {memory_span(gpus)}"
        if moot:
            every = (
                f"every catalogued GPU it can start on ({models} {memory_span(gpus)}; on the "
                f"{moot} smaller ones its weights or one sequence do not fit, V003/V004"
            )
        every += f"; {cands.unnamed}; figures for the largest, {gpus[-1].name})"
        yield replace(verdict, values={**verdict.values, "gpu": every})


_MOOT = "moot"
_Outcome = tuple[Verdict, ...] | str
"""A candidate's verdicts, :data:`_MOOT`, or why the planner cannot size the engine there."""


def memory_span(gpus: Sequence[GpuModel]) -> str:
    """``from 15 GiB (NVIDIA T4) to 268.59 GiB (NVIDIA B300)`` for GPUs sorted by memory."""
    low, high = gpus[0], gpus[-1]
    if low is high:
        return f"{low.name}, {low.memory_gib:g} GiB"
    return f"from {low.memory_gib:g} GiB ({low.name}) to {high.memory_gib:g} GiB ({high.name})"


def _kind(outcome: _Outcome) -> tuple[tuple[str, str], ...]:
    """What a candidate's outcome decides (decision and reason of each verdict; ``()`` a
    pass), for comparing candidates."""
    if outcome == _MOOT:
        return (("moot", ""),)
    if isinstance(outcome, str):
        return (("error", outcome),)
    return tuple((v.decision, v.reason) for v in outcome)


def _split(
    site: EngineSite, cands: GpuCandidates, judged: list[tuple[GpuModel, _Outcome]]
) -> Verdict:
    """The not-evaluated verdict of candidates that disagree, naming each group's GPUs
    (the largest group as "the other N", with its memory range)."""
    found = agreement(judged, lambda j: _kind(j[1]))
    biggest = found.largest()[0]
    parts: list[str] = []
    for kind, members in found.groups:
        gpus = [g for g, _ in members]
        if not kind:
            what = "passes on"
        elif kind[0][0] == "moot":
            what = "does not start (V003/V004) on"
        elif kind[0][0] == "error":
            what = "cannot be sized on"
        elif any(d == "not_evaluated" for d, _ in kind):
            what = "is not evaluated on"
        else:
            what = "fails (" + ", ".join(r for _, r in kind) + ") on"
        if kind == biggest and len(found.groups) > 1 and len(gpus) > 3:
            named = f"the other {len(gpus)}"
        else:
            named = and_joined([g.id for g in gpus])
        parts.append(f"{what} {named} ({memory_span(gpus)})")
    # The profile key ends the record (once), as every GPU-unknown reason's does.
    unknown = not_evaluated_reason(site, cands.unknown).replace(f" {cands.hint}", "")
    why = (
        f"{unknown}; judged on {cands.basis} ({len(cands.gpus)} models), it "
        f"{'; it '.join(parts)}: the verdict depends on the GPU {cands.hint}"
    )
    return Verdict("not_evaluated", "not-estimated", values={"why": why})


def estimated_subject(inp: Inputs) -> dict[str, Value]:
    """The values that name a capacity verdict's engine, model and GPU."""
    return {"engine": inp.site.name, "model": inp.model.name, "gpu": inp.gpu.label}


def on_every_release(
    inp: Inputs,
    found: ReleaseInputs,
    judge_engine: Callable[[Inputs], Iterable[Verdict]],
    split_reason: str = "not-estimated",
) -> Iterator[Verdict]:
    """The verdicts of an engine whose image names no vLLM release: *judge_engine* under
    every release it may run (:func:`~gpustrata_policies.view.candidates.release_inputs`,
    one sizing per class of releases alike), reported only where they agree, as
    :func:`on_every_candidate` does for GPUs. A finding on all names the span ("on every
    vLLM release from X to Y its image may run"), figures for the newest; otherwise a
    *split_reason* record (``{why}``) naming the releases on each side and the profile
    key. A class under which vLLM does not start (V003/V004) and the rule says nothing
    neither agrees nor disagrees."""
    cands = found.candidates
    judged: list[tuple[tuple[str, ...], _Outcome]] = []
    for releases, sized in found.classes:
        if isinstance(sized, str):
            judged.append((releases, sized))
            continue
        verdicts = tuple(judge_engine(sized))
        judged.append((releases, _MOOT if not verdicts and not sized.estimate.fits else verdicts))
    yield from every_release(
        cands,
        judged,
        lambda v: f"{v.values['engine']}, on every vLLM release {cands.span} its image may run",
        lambda rest, partial: _release_split(inp, cands, rest, split_reason, partial),
    )


def every_release(
    cands: ReleaseCandidates,
    judged: Sequence[tuple[tuple[str, ...], _Outcome]],
    every: Callable[[Verdict], str],
    split: Callable[[list[tuple[tuple[str, ...], _Outcome]], bool], Verdict],
    key: str = "engine",
) -> Iterator[Verdict]:
    """What every candidate release decides (*judged*: each class's releases and outcome):
    a verdict every live class gives (same decision and reason) is reported once, from the
    newest class, its *key* value (``engine``) renamed by *every* (``..., on every vLLM release from
    X to Y its image may run``, with the basis and whose figures); the verdicts only some
    classes give become one *split* record naming the releases on each side. A moot class
    (vLLM does not start there and the rule says nothing) neither agrees nor disagrees."""
    live = [(r, o) for r, o in judged if o != _MOOT]
    if not live:
        return
    if any(isinstance(o, str) for _, o in live):
        yield split(list(judged), False)
        return
    kinds = [set(_kind(o)) for _, o in live]
    common = set.intersection(*kinds)
    last = live[-1][1]
    assert not isinstance(last, str)  # narrowed above
    newest = live[-1][0][-1]
    for verdict in last:
        if (verdict.decision, verdict.reason) not in common:
            continue
        if verdict.decision == "not_evaluated" or key not in verdict.values:
            yield verdict
            continue
        named = f"{every(verdict)} ({cands.basis}; figures for {newest})"
        yield replace(verdict, values={**verdict.values, key: named})
    rest = [
        (
            r,
            o
            if isinstance(o, str)
            else tuple(v for v in o if (v.decision, v.reason) not in common),
        )
        for r, o in judged
    ]
    if any(k != common for k in kinds):
        yield split(rest, bool(common))


def release_unknown(site: EngineSite, cands: ReleaseCandidates) -> str:
    """Why the engine's release is unknown (its image's reading), without the profile key,
    which a split record names once, at its end."""
    return site.release().where.replace(f" {cands.hint}", "")


def release_runs(releases: Sequence[str], order: Sequence[str]) -> str:
    """*releases* as runs of consecutive ones in *order* (``0.6.0 to 0.7.3, 0.9.0``)."""
    picked = set(releases)
    runs: list[list[str]] = []
    previous = False
    for release in order:
        if release in picked:
            if previous:
                runs[-1].append(release)
            else:
                runs.append([release])
        previous = release in picked
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} to {r[-1]}" for r in runs)


def _release_split(
    inp: Inputs,
    cands: ReleaseCandidates,
    judged: list[tuple[tuple[str, ...], _Outcome]],
    reason: str,
    partial: bool = False,
) -> Verdict:
    """The not-evaluated verdict of releases that disagree, naming each side's releases."""
    why = (
        f"{inp.site.name}: {inp.version.where}; on {inp.gpu.label}, "
        f"{releases_split(cands, judged, partial)}"
    )
    return Verdict("not_evaluated", reason, values={"why": why})


def releases_split(
    cands: ReleaseCandidates,
    judged: Sequence[tuple[tuple[str, ...], _Outcome]],
    partial: bool = False,
) -> str:
    """``judged under every vLLM release it may run (...), it passes under X; it fails (...) under
    Y: the verdict depends on the vLLM release (set images ...)``: the end of the record of
    an engine whose candidate releases disagree (*judged*: each class's releases and
    outcome). *partial*: the verdicts every release gives were reported apart, and a class
    with none left is worded "gives no other verdict", not "passes"."""
    found = agreement(judged, lambda j: _kind(j[1]))
    parts: list[str] = []
    for kind, members in found.groups:
        releases = [r for rs, _ in members for r in rs]
        if not kind:
            what = "gives no other verdict under" if partial else "passes under"
        elif kind[0][0] == "moot":
            what = "does not start (V003/V004) under"
        elif kind[0][0] == "error":
            what = "cannot be sized under"
        elif any(d == "not_evaluated" for d, _ in kind):
            what = "is not evaluated (" + ", ".join(r for _, r in kind) + ") under"
        else:
            what = "fails (" + ", ".join(r for _, r in kind) + ") under"
        parts.append(f"{what} {release_runs(releases, cands.releases)}")
    return (
        f"judged under every vLLM release it may run ({cands.basis}: {len(cands.releases)} "
        f"catalogued releases {cands.span}), it {'; it '.join(parts)}: the verdict depends "
        f"on the vLLM release {cands.hint}"
    )
