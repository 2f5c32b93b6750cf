"""The values an unknown GPU can take: every catalogued GPU an engine may run on when the
Pod names none (or a family), and the engine's capacity inputs on each of them. A rule
decides on such an engine only where its verdict is the same on every candidate
(:func:`gpustrata_policies.rules._common.judged_engines`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.agreement import Agreement, agreement
from gpustrata_policies.view.capacity import (
    EngineVersion,
    Inputs,
    PlannerSettings,
    engine_settings,
    engine_version,
    gpu_estimate,
    model_and_settings,
    not_evaluated_reason,
)
from gpustrata_policies.view.engines import (
    EngineSite,
    GpuRef,
    gpu_resources,
    karpenter_gpu,
    neighbours,
    release_candidates,
    release_version,
    site_gpus,
)
from gpustrata_policies.view.kubeai import kubeai_default_basis
from gpustrata_policies.view.nodes import (
    gpu_model_of_selectors,
    gpu_pools,
    gpu_variants_named,
    targeted_pools,
)
from gpustrata_policies.view.profile import profile_hint

if TYPE_CHECKING:
    from gpustrata.catalog.hardware import GpuModel
    from gpustrata.catalog.vllm_release_types import BatchDefaults

__all__ = [
    "CANDIDATE_GPU",
    "Agreement",
    "CandidateInputs",
    "GpuCandidates",
    "ReleaseCandidates",
    "ReleaseInputs",
    "agreement",
    "candidate_engines",
    "candidate_inputs",
    "candidate_releases",
    "gpu_candidates",
    "release_inputs",
    "release_inputs_key",
    "release_scheduler_defaults",
    "scheduler_row",
]


@dataclass(frozen=True, slots=True)
class GpuCandidates:
    """Every catalogued GPU an engine whose GPU is unknown may run on: the values the
    unknown fact can take. A rule decides on such an engine only where its verdict is the
    same on each of them (:func:`gpustrata_policies.rules._common.judged_engines`)."""

    gpus: tuple[GpuModel, ...]
    """The candidates, smallest memory first."""
    unknown: str
    """Why the GPU is unknown (:func:`site_gpus`' reason)."""
    basis: str
    """What the set is (``every catalogued NVIDIA GPU of compute capability 7.0 or more``)."""
    hint: str
    """The cluster-profile key that would decide it (``gpu_products`` or ``pools``)."""
    unnamed: str
    """Why no one GPU is named (``the Pod names no GPU``), for a finding's wording."""


# Image words of vLLM builds for other accelerators than NVIDIA's (the vllm-openai-rocm and
# -cpu variants, vllm_args.vllm_tagged_image; AMD's rocm/vllm): no catalogued GPU is theirs.
_NOT_CUDA_BUILDS = ("rocm", "-cpu", "/cpu", "tpu", "neuron", "xpu", "hpu", "gaudi")


def gpu_candidates(ctx: RuleContext, site: EngineSite) -> GpuCandidates | None:
    """The catalogued GPUs *site* may run on when its GPU is unknown because the Pod names
    no GPU the catalogue knows by one model: it selects no GPU label (or only labels that
    name no GPU, such as a vendor's own), or a family label naming several catalogued
    models (``Tesla-V100``). None where the GPU is known, or unknown for a reason that no
    candidate set covers: a described pool or NodePool (its reason stands), a label or Ray
    ``accelerator_type`` naming a GPU the catalogue lacks, a MIG slice, GPUs that are not
    ``nvidia.com/gpu`` (the catalogue holds NVIDIA GPUs only), or an image built for another
    accelerator (ROCm, CPU, ...).

    Without a GPU label the set is every catalogued NVIDIA GPU of at least the lowest
    compute capability any vLLM release's CUDA build runs on (release catalogue
    ``cuda_compute_capability``): a superset of what any image can run on."""
    found = site_gpus(ctx, site)
    pod = site.gpu_pod
    if not isinstance(found, str) or pod is None:
        return None
    if set(gpu_resources(ctx, pod)) != {"nvidia.com/gpu"}:
        return None  # MIG slices, another vendor's resource, or several kinds
    words = [
        w for i in site.images if isinstance(i, str) for w in _NOT_CUDA_BUILDS if w in i.lower()
    ]
    if words:
        return None  # a build for another accelerator
    pools = gpu_pools(ctx)
    if pools and targeted_pools(pod, pools):
        return None  # a described pool says what it runs (or why that is unknown)
    wanted = site.llm_config.get("accelerator_type")
    if isinstance(wanted, str) and wanted:
        return None  # Ray places it on that GPU type, which the catalogue lacks
    labels = pod.selected_labels()
    if karpenter_gpu(labels) is not None:
        return None
    gpu, where = gpu_model_of_selectors(pod)
    if gpu is not None:
        return None
    if where:
        variants = gpu_variants_named(where.partition("=")[2])
        if len(variants) < 2:
            return None  # a GPU the catalogue lacks: no catalogued GPU is a candidate
        gpus = sorted(variants, key=lambda g: (g.memory_gib, g.id))
        basis = f"each catalogued GPU that {where} names"
        hint = profile_hint("gpu_products")
        unnamed = f"the {where.partition('=')[2]} label names no single model"
    else:
        floor = catalogs.vllm_releases().cuda_cc_floor
        if floor is None:
            return None
        lowest = divmod(round(floor.value * 10), 10)  # 7.5 -> (7, 5)
        gpus = sorted(
            (g for g in catalogs.hardware().gpus.values() if g.capability >= lowest),
            key=lambda g: (g.memory_gib, g.id),
        )
        basis = (
            f"every catalogued NVIDIA GPU of compute capability {floor.value:.1f} or more, the "
            f"lowest any vLLM release's CUDA build runs on ({floor.source})"
        )
        hint = profile_hint("gpu_products or pools")
        unnamed = "the Pod names no GPU"
    if not gpus:
        return None
    return GpuCandidates(tuple(gpus), found, basis, hint, unnamed)


CANDIDATE_GPU = "one of the candidates: the Pod's GPU is unknown"
"""The :attr:`GpuRef.where` of a candidate GPU (:func:`candidate_inputs`)."""


@dataclass(frozen=True, slots=True)
class CandidateInputs:
    """The capacity inputs of an engine whose GPU is unknown, on each candidate GPU
    (:func:`~gpustrata_policies.view.engines.gpu_candidates`): a rule reports only what
    holds on all of them."""

    candidates: GpuCandidates
    inputs: tuple[Inputs | str, ...]
    """Per candidate GPU (same order): its inputs, or why the planner cannot size it there."""


def candidate_inputs(ctx: RuleContext, site: EngineSite) -> CandidateInputs | None:
    """The capacity inputs of *site* on every GPU it may run on when its GPU is unknown
    (None where it is known, or unknown for a reason no candidate set covers, or where the
    model or settings are unknown as well: :func:`unsized_reason` then names that cause
    before the GPU's); once per engine."""
    key = ("candidate-inputs", site.path, site.ray)
    found: CandidateInputs | None = ctx.index.fact(
        site.obj, key, lambda: _candidate_inputs(ctx, site)
    )
    return found


def _candidate_inputs(ctx: RuleContext, site: EngineSite) -> CandidateInputs | None:
    candidates = gpu_candidates(ctx, site)
    if candidates is None:
        return None
    read = model_and_settings(site)
    if isinstance(read, str):
        return None
    model, version, settings = read
    out: list[Inputs | str] = []
    for gpu in candidates.gpus:
        estimate = gpu_estimate(ctx, site, model.arch, gpu, settings)
        ref = GpuRef(gpu, CANDIDATE_GPU)
        out.append(
            estimate
            if isinstance(estimate, str)
            else Inputs(site, model, ref, version, settings, estimate)
        )
    return CandidateInputs(candidates, tuple(out))


def unsized_reason(ctx: RuleContext, site: EngineSite, found: str) -> str:
    """The "not evaluated" reason of *site*, whose sizing failed for *found*
    (:func:`~gpustrata_policies.view.capacity.capacity_inputs`), prefixed with its label.
    Where the GPU is unknown in a way the candidate GPUs cover (:func:`gpu_candidates`) and
    the model or engine settings are unknown as well, that reason comes first and the GPU's
    after it: naming the GPU alone (``gpu_products``) would not decide the record."""
    read = model_and_settings(site) if gpu_candidates(ctx, site) is not None else None
    if not isinstance(read, str):
        return not_evaluated_reason(site, found)
    gpu = found.removeprefix(site.name).lstrip(": ")
    return f"{not_evaluated_reason(site, read)}; {gpu}"


@dataclass(frozen=True, slots=True)
class ReleaseCandidates:
    """Every catalogued vLLM release an engine whose image names none may run: the values
    the unknown release can take (:func:`candidate_releases`)."""

    releases: tuple[str, ...]
    """The candidates, oldest first."""
    basis: str
    """Why these (``image vllm/vllm-openai:latest is unpinned: any catalogued release``)."""
    hint: str
    """The cluster-profile key that would decide it (``images``)."""

    @property
    def span(self) -> str:
        """``from X to Y``, the oldest and newest candidates (or the one release)."""
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"from {first} to {last}"


def candidate_releases(site: EngineSite) -> ReleaseCandidates | None:
    """The catalogued vLLM releases (compatibility catalogue) *site*'s image may run when it
    names none (:func:`~gpustrata_policies.view.engines.release_candidates`: every one for
    an unpinned upstream image, those from the tag's leading release on for another
    publisher's build, the default images' of every KubeAI chart release defining a Model's
    profile); None where the release is known or nothing bounds it."""
    read = release_candidates(site, _catalogued())
    found = site.release()
    if read is None or found.found is None:
        return None
    image = found.image
    if found.found.defaults:
        return ReleaseCandidates(
            read, kubeai_default_basis(site.obj), profile_hint("versions.kubeai")
        )
    if found.found.unpinned:
        basis = f"image {image} names no release, so it may be any catalogued one"
    else:
        basis = (
            f"image {image} is another publisher's build whose tag leads with vLLM "
            f"{found.found.floor}: built on that release or a later one (AIBrix builds such "
            "a v0.10.0 tag from v0.10.2, vllm-project/aibrix@e3e10f9e:samples/"
            "disaggregation/vllm/README.md), not an earlier one"
        )
    return ReleaseCandidates(read, basis, profile_hint("images"))


def candidate_engines(site: EngineSite, cands: ReleaseCandidates) -> tuple[bool, ...]:
    """Per candidate release (same order): whether the engine runs V0 under it
    (:func:`~gpustrata_policies.view.capacity.engine_version`: the release's default engine
    and ``VLLM_USE_V1``), shared by engines alike in one process."""
    key = (cands.releases, _env_key(site))
    found = _ENGINES.get(key)
    if found is None:
        found = tuple(engine_version(site, r).v0 for r in cands.releases)
        if len(_ENGINES) > 4096:
            _ENGINES.clear()
        _ENGINES[key] = found
    return found


_ENGINES: dict[Any, tuple[bool, ...]] = {}


def _env_key(site: EngineSite) -> tuple[Any, ...]:
    """What of *site* picks the engine generation: its env (``VLLM_USE_V1``), with a Ray
    Serve LLM config's ``runtime_env``."""
    return tuple(sorted(site.env.items())), repr(site.llm_config.get("runtime_env"))


@cache
def _catalogued() -> tuple[str, ...]:
    """The compatibility catalogue's vLLM releases, oldest first."""
    return tuple(sorted((r.version for r in catalogs.compat().vllm_releases()), key=parse_version))


@dataclass(frozen=True, slots=True)
class ReleaseInputs:
    """The capacity inputs of an engine whose release is unknown, per class of candidate
    releases that size it alike (:func:`release_inputs`)."""

    candidates: ReleaseCandidates
    classes: tuple[tuple[tuple[str, ...], Inputs | str], ...]
    """(the releases of one class, oldest first; their inputs or why the planner cannot
    size the engine under them), in release order."""
    key: Any = None
    """What decides the classes (hashable; None where a setting is not): equal keys give
    equal classes, so a rule may share its verdicts between engines alike."""


def release_inputs(ctx: RuleContext, inp: Inputs) -> ReleaseInputs | None:
    """*inp*'s engine sized under every release its image may run (:func:`candidate_releases`)
    on *inp*'s GPU, each as if the image named it (its V0/V1 engine, its unset defaults:
    the release's scheduler row where the catalogue read it or the read releases around it
    agree, as V005 reads them; its memory facts). Releases that give the same settings and
    memory facts form one class, sized once. None where the release is known or nothing
    bounds it."""
    cands = candidate_releases(inp.site)
    if cands is None:
        return None
    key = ("release-inputs", inp.site.path, inp.site.ray, inp.gpu.gpu.id)
    found: ReleaseInputs = ctx.index.fact(
        inp.site.obj, key, lambda: _release_inputs(ctx, inp, cands)
    )
    return found


def _release_inputs(ctx: RuleContext, inp: Inputs, cands: ReleaseCandidates) -> ReleaseInputs:
    site, gpu = inp.site, inp.gpu.gpu
    out: list[tuple[tuple[str, ...], Inputs | str]] = []
    key, classes = _release_classes(inp, cands)
    for releases, version, settings in classes:
        if isinstance(settings, str):
            out.append((releases, settings))
            continue
        est = gpu_estimate(ctx, site, inp.model.arch, gpu, settings)
        sized = (
            est
            if isinstance(est, str)
            else Inputs(site, inp.model, inp.gpu, version, settings, est)
        )
        out.append((releases, sized))
    return ReleaseInputs(cands, tuple(out), key)


_Class = tuple[tuple[str, ...], EngineVersion, PlannerSettings | str]
_CLASSES: dict[Any, list[_Class]] = {}
"""Release classes by what decides them (the engine's settings read without a release, the
GPU, the image, the candidates), shared by every engine alike in one process: a manifest
repeats engines across namespaces and the per-release reading is the costly part."""


def release_inputs_key(inp: Inputs) -> Any:
    """:attr:`ReleaseInputs.key` of *inp*'s engine without sizing it (None where its release
    is known or unbounded, or a setting is not hashable)."""
    cands = candidate_releases(inp.site)
    return _classes_key(inp, cands) if cands is not None else None


def _classes_key(inp: Inputs, cands: ReleaseCandidates) -> Any:
    base = inp.settings
    key = (
        id(inp.model.arch),
        inp.model.arch.id,
        inp.gpu.gpu.id,
        base.engine,
        frozenset(base.defaults),
        base.auto_fit,
        base.flashinfer_sampler,
        inp.site.release().image,
        _env_key(inp.site),  # VLLM_USE_V1 picks the engine generation
        cands.releases,
    )
    try:
        hash(key)
    except TypeError:  # a setting held as a mapping: not shared
        return None
    return key


def _release_classes(inp: Inputs, cands: ReleaseCandidates) -> tuple[Any, list[_Class]]:
    """The candidate releases grouped into classes that size the engine alike: the same
    engine generation, settings (the release's defaults filled in) and memory facts."""
    # Imported here: the catalogue readers load pydantic, which a check with no engine to
    # size never needs (tests/policies/test_cli.py, light on imports).
    from gpustrata.catalog.vllm_releases import mxfp4_kernel, profile_facts, unread_memory_bracket
    from gpustrata.vllm.defaults import release_gpu_memory_utilization

    site, gpu = inp.site, inp.gpu.gpu
    key = _classes_key(inp, cands)
    shared = key is not None
    found = _CLASSES.get(key) if shared else None
    if found is not None:
        return key, found
    major = int(gpu.compute_capability.partition(".")[0])
    classes: dict[Any, tuple[list[str], EngineVersion, PlannerSettings | str]] = {}
    for release in cands.releases:
        version = engine_version(site, release)
        settings = engine_settings(site, inp.model.arch, version.v0, release)
        if not isinstance(settings, str) and not version.v0:
            settings = release_scheduler_defaults(settings, release, gpu)
        facts = profile_facts(release)
        memory = (
            facts.facts() if facts is not None else None,
            unread_memory_bracket(release),
            mxfp4_kernel(release, major)[0],
            release_gpu_memory_utilization(release)[0],
        )
        engine = settings if isinstance(settings, str) else settings.engine
        group = (version.v0, engine, memory)
        if group in classes:
            classes[group][0].append(release)
        else:
            classes[group] = ([release], version, settings)
    result = [(tuple(rs), v, st) for rs, v, st in classes.values()]
    if shared:
        if len(_CLASSES) > 4096:
            _CLASSES.clear()
        _CLASSES[key] = result
    return (key if shared else None), result


def release_scheduler_defaults(
    settings: PlannerSettings, release: str, gpu: GpuModel, ctx: RuleContext | None = None
) -> PlannerSettings:
    """*settings* with unset max_num_batched_tokens / max_num_seqs taken from *release*'s
    ``get_batch_defaults`` row for *gpu* (V1, ``vllm serve``), where the catalogue read the
    release or the read releases around it agree on the row; otherwise left to the
    planner's reference defaults, as for an image that names the release. With *ctx*, the
    row (:func:`scheduler_row`) is looked up once per evaluation, release and GPU, not
    once per engine (issue 35)."""
    engine = settings.engine
    if engine.max_num_batched_tokens is not None and engine.max_num_seqs is not None:
        return settings
    if ctx is None:
        found = scheduler_row(release, gpu)
    else:
        key = ("scheduler-row", release, gpu.id, gpu.name, gpu.memory_gib)
        found = ctx.memo(key, lambda: scheduler_row(release, gpu))
    if found is None:
        return settings
    return _with_row(settings, release, gpu, *found)


def scheduler_row(release: str, gpu: GpuModel) -> tuple[BatchDefaults | None, bool] | None:
    """(the ``get_batch_defaults`` row for *gpu*, whether ``max_num_seqs`` is clamped to
    the batched tokens) of *release*, where the catalogue read the release or the read
    releases around it agree on both; None otherwise. A function of the release, the
    GPU's memory, id and name and the catalogue alone."""
    from gpustrata.catalog.vllm_facts import scheduler_releases

    key = release_version(release)
    rows = (
        neighbours(key, [(release_version(r.version) or (), r) for r in scheduler_releases()])
        if key is not None
        else None
    )
    if not rows:
        return None
    label = f"{gpu.id} {gpu.name}"
    found = agreement(rows, lambda r: (r.batch_row(gpu.memory_gib, label), r.clamp_seqs))
    if not found.agreed or found.value is None:
        return None
    return found.value


def _with_row(
    settings: PlannerSettings,
    release: str,
    gpu: GpuModel,
    row: BatchDefaults | None,
    clamp: bool,
) -> PlannerSettings:
    """*settings* with the unset scheduler limits taken from *row* (see
    :func:`release_scheduler_defaults`)."""
    assert row is not None, "a read release has a get_batch_defaults row for every GPU"
    engine = settings.engine
    tokens = engine.max_num_batched_tokens
    changes: dict[str, Any] = {}
    defaults = dict(settings.defaults)
    if tokens is None and engine.enable_chunked_prefill is not False:
        tokens = changes["max_num_batched_tokens"] = row.tokens
        defaults["max_num_batched_tokens"] = (
            f"max_num_batched_tokens unset: vLLM {release}'s default on {gpu.name} is {tokens}"
        )
    if engine.max_num_seqs is None:
        seqs = min(row.seqs, tokens) if clamp and tokens else row.seqs
        changes["max_num_seqs"] = seqs
        defaults["max_num_seqs"] = (
            f"max_num_seqs unset: vLLM {release}'s default on {gpu.name} is {seqs}"
        )
    return dataclasses.replace(settings, engine=engine.replace(**changes), defaults=defaults)
