"""The capacity estimate of the engines a manifest runs, for V003, V004, V009, V010, V012.

An adapter from the engine reader (:mod:`gpustrata_policies.view.engines`) to the
capacity planner (:mod:`gpustrata.vllm.capacity`): which engines ask for GPUs, the model
architecture (model catalogue), the GPU model the engine runs on (pool descriptions or
GPU node labels), its :class:`~gpustrata.vllm.settings.EngineSettings` with vLLM's
defaults where unset, the vLLM version / engine generation from the image, the weight
source and the probes.

The planner and the catalogues use pydantic; they are imported only once an engine with
a GPU is found, so ``gpustrata check`` on manifests without one stays light.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from gpustrata.catalog.vllm_release_types import vllm_file_url
from gpustrata.catalog.vllm_releases import memory_default_any_release
from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION
from gpustrata.core.quantity import parse_number
from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.vllm.flags import AUTO_FIT
from gpustrata.vllm.settings import EngineSettings as VllmSettings
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.controllers import downloaded_model
from gpustrata_policies.view.engines import (
    MODEL_LABEL,
    OBJECT_STORE_PREFIXES,
    EngineSite,
    GpuRef,
    as_bool,
    as_int,
    is_location,
    labelled_architecture,
    site_gpus,
)
from gpustrata_policies.view.engines import engine_sites as all_engine_sites
from gpustrata_policies.view.objects import ContainerRef, K8sObject, as_list, as_map, dig
from gpustrata_policies.view.vllm_args import EngineArgs, hf_hub_cache

T = TypeVar("T")

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture
    from gpustrata.catalog.hardware import GpuModel
    from gpustrata.vllm.capacity import CapacityEstimate

Path = tuple[str | int, ...]

_RELEASES = catalogs.vllm_releases()
REFERENCE_VLLM = _RELEASES.reference
"""The vLLM release whose defaults and memory arithmetic the capacity planner models
(the release catalogue's reference)."""
VLLM_SRC = vllm_file_url(REFERENCE_VLLM, "").rstrip("/")
"""The planner's startup estimate (seconds, before the safety factor) on rendered objects."""
# Settings that change the memory budget in ways the planner does not model.
_UNMODELLED = ("cpu_offload_gb", "kv_cache_memory_bytes", "num_gpu_blocks_override")


# --------------------------------------------------------------------------- engines


def engine_sites(ctx: RuleContext, obj: K8sObject, *, presets: bool = False) -> list[EngineSite]:
    """The engines of *obj* (:func:`~gpustrata_policies.view.engines.engine_sites`, *presets*
    as there) asking for GPUs: ``vllm serve`` containers with a GPU limit, Ray Serve LLM's."""
    key = ("gpu-engine-sites", presets)
    found: list[EngineSite] = ctx.index.fact(obj, key, lambda: _gpu_sites(ctx, obj, presets))
    return found


def _gpu_sites(ctx: RuleContext, obj: K8sObject, presets: bool) -> list[EngineSite]:
    extra = ctx.config.gpu_resources
    sites: list[EngineSite] = []
    for site in all_engine_sites(ctx, obj, presets=presets):
        if site.container is not None and not site.container.gpu_limit(extra):
            continue
        if site.gpu_pod_unknown is not None:
            raise UnknownInput(site.gpu_pod_unknown)
        sites.append(site)
    return sites


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class ModelRef:
    """The catalogued architecture of an engine's model and how it was found."""

    arch: ModelArchitecture
    written: str
    """The model as the manifest names it."""
    via: str = ""
    """What named the model where the engine's name did not (a Pod label, a modelURI)."""

    @property
    def name(self) -> str:
        """``Qwen/Qwen2.5-7B-Instruct`` (or ``s3://... (meta-llama/...)`` when they differ;
        ``... (from PATH/config.json)`` when the model's own file was read)."""
        local = self.arch.sources[0] if self.arch.sources[0].startswith("file:") else None
        if local is not None:
            from gpustrata.catalog.model_sources import local_config_path

            return f"{self.written} (from {local_config_path(self.arch)})"
        if self.written == self.arch.id:
            return self.arch.id
        return f"{self.written} ({self.arch.id}{self.via})"


def _model_candidates(site: EngineSite) -> list[str]:
    out: list[str] = []
    loading = as_map(site.llm_config.get("model_loading_config"), "model_loading_config")
    source = loading.get("model_source")
    if source is UNKNOWN:
        raise UnknownInput(f"model_loading_config.model_source of {site.name}")
    if isinstance(source, str) and source:
        out.append(source)
    out.extend(site.models if site.preset else ())  # the model the preset's path holds
    if isinstance(site.engine.model, str) and site.engine.model:
        out.append(site.engine.model)
    out.extend(m for m in site.models if m not in out)  # a controller's download (kthena)
    served = site.engine.get("served_model_name")
    if isinstance(served, str) and out and is_location(out[0]):
        out.append(served)  # a path or bucket served under its Hugging Face name
    return out


def resolve_model(site: EngineSite) -> ModelRef | str:
    """The engine's model architecture from the model catalogue, or why it is unknown."""
    names = _model_candidates(site)
    if not names:
        return f"{site.name} names no model"
    for name in names:
        arch = catalogs.model_architecture(name)
        if arch is not None:
            held = name == downloaded_model(site.obj) and name != names[0]
            return ModelRef(arch, names[0], f", the model {name} names" if held else "")
    labelled = labelled_architecture(site) if is_location(names[0]) else None
    if labelled is not None:
        return ModelRef(labelled, names[0], f", as its Pod label {MODEL_LABEL} names it")
    shown = " / ".join(repr(n) for n in dict.fromkeys(names))
    near = catalogs.nearest_models(names[0])
    hint = f" (nearest catalogue ids: {', '.join(near)})" if near else ""
    return (
        f"model {shown} is not in the model catalogue, so its size and shape are unknown{hint}; "
        f"{catalogs.UNCATALOGUED_FIX}"
    )


# --------------------------------------------------------------------------- version


@dataclass(frozen=True, slots=True)
class EngineVersion:
    """The vLLM release an engine runs and which engine generation serves it."""

    version: str | None
    """The release; None when the image names none (nothing is assumed)."""
    where: str
    """``vLLM 0.8.5 (image vllm/vllm-openai:v0.8.5)``, or why no release is known."""
    v0: bool
    """The V0 engine (``/health`` tied to the engine loop); False: V1 (``AsyncLLM``) or,
    when :attr:`version` is None, unknown."""
    why: str
    """Why this engine generation (catalogue default or ``VLLM_USE_V1``)."""


def _env(site: EngineSite) -> dict[str, str]:
    """Literal env of the engine: the container's, or the Ray worker's plus the
    llm_config ``runtime_env.env_vars`` (which win)."""
    if site.container is not None:
        return site.container.literal_env()
    env: dict[str, str] = {}
    first = next(iter(site.gpu_pod.containers(init=False)), None) if site.gpu_pod else None
    if first is not None:
        env = first.literal_env()
    values = dig(site.llm_config, "runtime_env", "env_vars")
    if isinstance(values, Mapping):
        env.update({str(k): str(v) for k, v in values.items()})
    return env


def engine_version(site: EngineSite, candidate: str | None = None) -> EngineVersion:
    """The vLLM version from the image tag (``vllm/vllm-openai:vX``; ``rayproject/ray-llm``
    through the Ray release that pins it) and the engine generation the compatibility
    catalogue gives it (V1 the default from, and V0 removed in, the releases the vLLM
    release catalogue names). *candidate*: one of the releases an image that names none
    may run (:func:`~gpustrata_policies.view.candidates.release_inputs`), judged as if the
    image named it."""
    read = site.release()
    found, version = read.found, read.version
    image = read.image if read.image is not None else site.image
    where = ""
    if candidate is not None:
        found, version = None, candidate
        shown = f"image {image}" if isinstance(image, str) else "its image"
        where = f"vLLM {candidate} (one of the releases {shown} may run)"
    if found is not None and version is not None and candidate is None:
        if found.ray and found.assumed:
            where = f"vLLM {version} ({found.where})"
        elif found.ray:
            where = f"vLLM {version} (pinned by Ray {found.ray}, image {image})"
        elif found.assumed:
            where = f"vLLM {version} ({found.where})"
        else:
            where = f"vLLM {version} (image {image})"
    if version is None:
        # No release is assumed: the generation and every release-dependent default stay
        # unknown (V010 and V012 say "not evaluated" where the answer depends on them).
        what = f"image {image}" if isinstance(image, str) else "the image"
        reason = found.where if found is not None else f"{what} names no vLLM release"
        return EngineVersion(None, reason, False, "unknown: the image names no vLLM release")
    use_v1 = _env(site).get("VLLM_USE_V1")
    release = catalogs.compat().vllm(version) if version else None
    if release is not None:
        v0 = release.default_engine == "v0"
        why = f"vLLM {release.version}'s default engine in the compatibility catalogue"
        opt_in = _RELEASES.v1_opt_in_from
        if use_v1 == "1" and opt_in is not None and _older(release.version, opt_in):
            why = f"vLLM {release.version} has no V1 engine (VLLM_USE_V1 is read from {opt_in})"
        elif use_v1 in {"0", "1"} and release.v0_engine_available:
            v0, why = use_v1 == "0", f"VLLM_USE_V1={use_v1}"
    elif version is not None and _older(version, _RELEASES.v1_default_from):
        v1_from = _RELEASES.v1_default_from
        v0, why = True, f"vLLM {version} predates {v1_from}, where V1 became the default"
    else:
        v0, why = False, f"V1, the only engine since vLLM {_RELEASES.v0_removed_in}"
    return EngineVersion(version, where, v0, why)


def _older(version: str, than: str) -> bool:
    try:
        from gpustrata.core.versions import parse_version

        return parse_version(version) < parse_version(than)
    except ValueError:
        return False


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    """An engine's settings for the capacity planner, with the defaults that were applied."""

    engine: VllmSettings
    """The settings :func:`estimate_capacity` takes (V0 defaults filled in where they
    differ from the reference release)."""
    defaults: dict[str, str]
    """Setting -> how its unset value was resolved (quoted in messages)."""
    auto_fit: bool = False
    """``max_model_len`` -1/auto: the estimate uses the largest length that fits."""
    release: str | None = None
    """The image's vLLM release (None: not named, the reference release is assumed): the
    planner's per-release facts (the MXFP4 MoE kernel, the memory profile) follow it."""
    flashinfer_sampler: bool | None = None
    """What the engine's ``VLLM_USE_FLASHINFER_SAMPLER`` says (None: unset)."""


def _raw(engine: EngineArgs, key: str) -> Any:
    value = engine.get(key)
    if value is UNKNOWN:
        raise UnknownInput(f"{key} of {engine.source}")
    return value


def _int(engine: EngineArgs, key: str) -> int | str | None:
    """:func:`~gpustrata_policies.view.engines.as_int` with the error worded for V003."""
    value = as_int(engine, key)
    if isinstance(value, str):
        return f"{key} {quoted(engine.get(key))} is not an integer"
    return value


def engine_settings(
    site: EngineSite, arch: ModelArchitecture, v0: bool, release: str | None = None
) -> PlannerSettings | str:
    """Read the settings the planner needs; unset ones take vLLM's defaults (the image's
    *release* where the catalogue read it, else the reference release's; the V0 engine's
    where they differ). Returns an error text for unreadable values."""
    engine = site.engine
    if not engine.complete:
        return (
            f"{site.name} may take further flags from outside the manifest ($@ or unresolved "
            "variables), so its engine settings are not known"
        )
    for key in _UNMODELLED:
        if _raw(engine, key) not in (None, False, 0, "0"):
            return f"{key} {engine.get(key)} changes the memory budget in a way not modelled"
    dp = _int(engine, "data_parallel_size")
    if as_bool(engine, "enable_expert_parallel") is True and dp not in (None, 1):
        return "expert parallelism across data-parallel ranks is not modelled"
    kwargs: dict[str, Any] = {}
    defaults: dict[str, str] = {}
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = _int(engine, key)
        if isinstance(value, str):
            return value
        if value is not None and value < 1:
            return f"{key} {value} must be positive"
        kwargs[key] = value if value is not None else 1
        if value is None:
            defaults[key] = f"{key} unset: 1"
    auto_fit = False
    for key in ("max_model_len", "block_size", "max_num_batched_tokens", "max_num_seqs"):
        value = _int(engine, key)
        if isinstance(value, str):
            return value
        if key == "max_model_len" and value == AUTO_FIT:
            auto_fit, value = True, None
        elif value is not None and value < 1:
            return f"{key} {value} must be positive"
        kwargs[key] = value
    util = _raw(engine, "gpu_memory_utilization")
    everywhere = memory_default_any_release() if util is None and release is None else None
    if everywhere is not None:
        share, oldest, newest = everywhere
        kwargs["gpu_memory_utilization"] = share
        defaults["gpu_memory_utilization"] = (
            f"gpu_memory_utilization unset: {share:g}, the default of every vLLM release "
            f"read ({oldest} to {newest}; the image names none)"
        )
    elif util is None:
        kwargs["gpu_memory_utilization"], defaults["gpu_memory_utilization"] = _memory_share(
            release
        )
    else:
        try:
            kwargs["gpu_memory_utilization"] = float(str(util))
        except ValueError:
            return f"gpu_memory_utilization {quoted(util)} is not a number"
        if not 0 < kwargs["gpu_memory_utilization"] <= 1:
            return f"gpu_memory_utilization {util} is outside (0, 1] (V007)"
    for key in ("dtype", "kv_cache_dtype", "quantization"):
        value = _raw(engine, key)
        if value is not None and not isinstance(value, bool):
            kwargs[key] = str(value)
    if _raw(engine, "enable_chunked_prefill") is not None:
        kwargs["enable_chunked_prefill"] = as_bool(engine, "enable_chunked_prefill") is True
    kwargs["enforce_eager"] = as_bool(engine, "enforce_eager") is True
    mml = kwargs["max_model_len"] or arch.max_position_embeddings
    if auto_fit:
        defaults["max_model_len"] = (
            f"max_model_len auto: vLLM fits it to the KV cache, up to the model's "
            f"max_position_embeddings {mml}"
        )
    elif kwargs["max_model_len"] is None:
        defaults["max_model_len"] = (
            f"max_model_len unset: vLLM uses the model's max_position_embeddings {mml}"
        )
    if v0:
        _v0_defaults(kwargs, defaults, arch, mml, release)
    return PlannerSettings(VllmSettings(**kwargs), defaults, auto_fit, release)


def _memory_share(release: str | None) -> tuple[float, str]:
    """The unset ``gpu_memory_utilization`` of *release* (read in it, or agreed around
    it), else the reference release's, and how it was found."""
    from gpustrata.vllm.defaults import release_gpu_memory_utilization

    return release_gpu_memory_utilization(release)


def _v0_defaults(
    kwargs: dict[str, Any],
    defaults: dict[str, str],
    arch: ModelArchitecture,
    mml: int,
    release: str | None = None,
) -> None:
    """The V0 engine's own defaults (``_set_default_args_v0``, V0 ``SchedulerConfig``)."""
    v0 = _RELEASES.v0_defaults
    if kwargs.get("enable_chunked_prefill") is None:
        long_context = mml > v0.long_context and arch.attention in ("full",)
        kwargs["enable_chunked_prefill"] = long_context
        defaults["enable_chunked_prefill"] = (
            "enable_chunked_prefill unset: the V0 engine turns it on only for max_model_len "
            f"above {v0.long_context} without sliding windows or MLA"
        )
    if kwargs["max_num_batched_tokens"] is None:
        chunked = kwargs["enable_chunked_prefill"]
        budget = v0.chunked_batch_tokens(release)
        value = budget if chunked else max(mml, v0.batch_tokens)
        kwargs["max_num_batched_tokens"] = value
        defaults["max_num_batched_tokens"] = (
            f"max_num_batched_tokens unset: the V0 engine uses {value} "
            + ("(chunked prefill)" if chunked else f"(max(max_model_len, {v0.batch_tokens}))")
        )
    if kwargs["max_num_seqs"] is None:
        kwargs["max_num_seqs"] = v0.max_num_seqs
        defaults["max_num_seqs"] = f"max_num_seqs unset: the V0 engine's default {v0.max_num_seqs}"


# --------------------------------------------------------------------------- estimate


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything a capacity rule needs for one engine on one GPU model."""

    site: EngineSite
    model: ModelRef
    gpu: GpuRef
    version: EngineVersion
    settings: PlannerSettings
    estimate: CapacityEstimate

    def default_notes(self, *keys: str) -> str:
        """``; max_model_len unset: ...`` for the settings among *keys* left to vLLM."""
        est = self.estimate
        notes: list[str] = []
        for key in keys:
            if key in self.settings.defaults:
                notes.append(self.settings.defaults[key])
            elif key in est.defaults and key in _PER_GPU_DEFAULTS:
                own = self.version.version
                unread = (
                    f" (the reference release's: vLLM {own}'s default for this GPU is not "
                    "catalogued)"
                    if own not in (None, REFERENCE_VLLM)
                    else ""
                )
                notes.append(
                    f"{key} unset: vLLM {REFERENCE_VLLM}'s default on {self.gpu.gpu.name} is "
                    f"{getattr(est, key)}{unread}"
                )
            elif key == "block_size" and key in est.defaults:
                used = f"block_size unset: vLLM {REFERENCE_VLLM} uses {est.block_size}"
                if est.kv.block_size != est.block_size:
                    used += (
                        f", raised to {est.kv.block_size} so one attention page holds a "
                        "Gated DeltaNet state"
                    )
                notes.append(used)
            elif key == "enable_chunked_prefill" and key in est.defaults:
                notes.append("chunked prefill on: the V1 engine always chunks long prompts")
        return "".join(f"; {n}" for n in notes)


_PER_GPU_DEFAULTS = frozenset({"max_num_seqs", "max_num_batched_tokens"})


def not_evaluated_reason(site: EngineSite, reason: str) -> str:
    """*reason* prefixed with the engine's label unless it names it already."""
    return reason if reason.startswith(site.name) else f"{site.name}: {reason}"


def capacity_inputs(ctx: RuleContext, site: EngineSite) -> list[Inputs] | str:
    """The capacity estimate of *site* on each GPU model it can land on, or why it
    cannot be made (a "not evaluated" reason naming the missing input); made once per
    engine and evaluation, whichever capacity rule asks first."""
    # An engine is one per object and settings path (the sites rules ask about are those of
    # engine_sites, read once): its inputs are a fact of the object.
    key = ("capacity-inputs", site.path, site.ray)
    found: list[Inputs] | str = ctx.index.fact(site.obj, key, lambda: _inputs(ctx, site))
    return found


def _inputs(ctx: RuleContext, site: EngineSite) -> list[Inputs] | str:
    gpus = site_gpus(ctx, site)
    if isinstance(gpus, str):
        return gpus
    read = model_and_settings(site)
    if isinstance(read, str):
        return read
    model, version, settings = read
    out: list[Inputs] = []
    for ref in gpus:
        sized = settings
        if not version.v0 and version.version not in (None, REFERENCE_VLLM):
            # the named release's own per-GPU defaults where read (or agreed around it)
            from gpustrata_policies.view.candidates import release_scheduler_defaults

            sized = release_scheduler_defaults(settings, str(version.version), ref.gpu, ctx)
        estimate = gpu_estimate(ctx, site, model.arch, ref.gpu, sized)
        if isinstance(estimate, str):
            return estimate
        out.append(Inputs(site, model, ref, version, sized, estimate))
    return out


def model_and_settings(site: EngineSite) -> tuple[ModelRef, EngineVersion, PlannerSettings] | str:
    """The engine's model, release and planner settings, or why one is unknown."""
    model = resolve_model(site)
    if isinstance(model, str):
        return model
    version = engine_version(site)
    settings = engine_settings(site, model.arch, version.v0, version.version)
    if isinstance(settings, str):
        return settings
    sampler = _env(site).get("VLLM_USE_FLASHINFER_SAMPLER")
    if sampler is not None and sampler.strip().lstrip("-").isdigit():
        settings = dataclasses.replace(settings, flashinfer_sampler=bool(int(sampler)))
    return model, version, settings


def gpu_estimate(
    ctx: RuleContext,
    site: EngineSite,
    arch: ModelArchitecture,
    gpu: GpuModel,
    settings: PlannerSettings,
) -> CapacityEstimate | str:
    def compute() -> CapacityEstimate | Exception:
        from gpustrata.vllm.capacity import CapacityError

        try:
            release, sampler = settings.release, settings.flashinfer_sampler
            est = estimate(arch, gpu, settings.engine, release, sampler)
            fitted = est.kv.largest_max_model_len
            if settings.auto_fit and 0 < fitted < est.max_model_len:
                fit = settings.engine.replace(max_model_len=fitted)
                est = estimate(arch, gpu, fit, release, sampler)
            return est
        except CapacityError as exc:
            return exc

    def build() -> CapacityEstimate | str:
        # The estimate is a function of the architecture, GPU and settings alone: engines
        # that share them (one chart in many namespaces) share it, within one evaluation.
        shared: dict[Any, tuple[ModelArchitecture, CapacityEstimate | Exception]] = ctx.memo(
            "capacity-estimates-by-input", dict
        )
        key: Any = (
            id(arch),
            gpu.id,
            settings.auto_fit,
            settings.engine,
            settings.release,
            settings.flashinfer_sampler,
        )
        try:
            hash(key)
        except TypeError:  # a setting held as a mapping: not shared
            key = None
        held = shared.get(key) if key is not None else None
        if held is not None and held[0] is arch:
            result = held[1]
        else:
            result = compute()
            if key is not None:
                shared[key] = (arch, result)
        return f"{site.name}: {result}" if isinstance(result, Exception) else result

    found: CapacityEstimate | str = ctx.index.fact(
        site.obj, ("capacity-estimate", site.engine.source, gpu.id, settings.release), build
    )
    return found


# --------------------------------------------------------------------------- weights source


def _mount_for(container: ContainerRef, path: str) -> tuple[str, Mapping[str, Any]] | None:
    """The volume mounted at the longest prefix of *path*: (mountPath, volume)."""
    volumes = container.pod.volumes()
    best: tuple[str, Mapping[str, Any]] | None = None
    for mount in as_list(container.raw.get("volumeMounts"), f"volumeMounts of {container.label}"):
        if not isinstance(mount, Mapping):
            continue
        at, name = str(mount.get("mountPath") or ""), mount.get("name")
        if not at or not isinstance(name, str) or name not in volumes:
            continue
        inside = path == at or path.startswith(at.rstrip("/") + "/")
        if inside and (best is None or len(at) > len(best[0])):
            best = (at, volumes[name])
    return best


def _volume_source(at: str, volume: Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(volume.get("persistentVolumeClaim"), Mapping):
        claim = dig(volume, "persistentVolumeClaim", "claimName")
        return "pvc", f"PersistentVolumeClaim '{claim}' mounted at {at}"
    if isinstance(volume.get("hostPath"), Mapping):
        return "local-nvme", f"hostPath {dig(volume, 'hostPath', 'path')} mounted at {at}"
    if dig(volume, "emptyDir", "medium") == "Memory":
        return "local-nvme", f"a memory-backed emptyDir mounted at {at}"
    if isinstance(volume.get("emptyDir"), Mapping):
        return "pvc", f"an emptyDir on the node's disk mounted at {at}"
    return "pvc", f"volume '{volume.get('name')}' mounted at {at}"


_TRUTHY = ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class StartupConditions:
    """What a manifest states that the startup model distinguishes."""

    hf_transfer: bool = False
    """``HF_HUB_ENABLE_HF_TRANSFER`` set true: huggingface_hub downloads with hf_transfer."""
    streamer_distributed: bool = False
    """``--model-loader-extra-config`` with ``"distributed": true``: the Run:ai Model
    Streamer splits the read across the ranks."""
    capture_sizes: int | None = None
    """CUDA graph batch sizes ``--compilation-config`` asks for (``cudagraph_capture_sizes``,
    or the default sizes up to ``max_cudagraph_capture_size``); None: vLLM's default."""


def _json_option(engine: EngineArgs, key: str) -> Mapping[str, Any] | None:
    value = engine.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def startup_conditions(env: Mapping[str, str], engine: EngineArgs) -> StartupConditions:
    """The :class:`StartupConditions` of one engine from its env and flags."""
    hf_transfer = str(env.get("HF_HUB_ENABLE_HF_TRANSFER", "")).strip().lower() in _TRUTHY
    extra = _json_option(engine, "model_loader_extra_config")
    distributed = extra is not None and extra.get("distributed") in (True, "true")
    sizes: int | None = None
    compilation = _json_option(engine, "compilation_config")
    if compilation is not None:
        listed = compilation.get("cudagraph_capture_sizes")
        top = compilation.get("max_cudagraph_capture_size", compilation.get("max_capture_size"))
        if isinstance(listed, list) and listed:
            sizes = len(listed)
        elif isinstance(top, int) and not isinstance(top, bool) and top >= 1:
            # vLLM's default sizes up to the cap: 1, 2, 4, then steps of 8.
            sizes = len([n for n in (1, 2, 4) if n <= top]) + top // 8
    return StartupConditions(hf_transfer, distributed, sizes)


def weights_source(site: EngineSite, model: ModelRef) -> tuple[str, str]:
    """The planner's weight source (huggingface, s3, pvc, local-nvme) and why."""
    written = model.written
    if written.startswith(OBJECT_STORE_PREFIXES):
        return "s3", f"weights streamed from {written}"
    container = site.container
    if container is None:
        return "huggingface", "weights downloaded from the Hugging Face Hub"
    if written.startswith("/"):
        found = _mount_for(container, written)
        if found is None:
            return "pvc", f"weights read from {written} in the image (node disk)"
        source, where = _volume_source(*found)
        return source, f"weights read from {where}"
    cache = hf_hub_cache(container, site.engine.get("download_dir"))
    found = _mount_for(container, cache) if cache else None
    if found is not None and isinstance(found[1].get("persistentVolumeClaim"), Mapping):
        source, where = _volume_source(*found)
        return source, f"weights read from the Hugging Face cache on {where}"
    return "huggingface", "weights downloaded from the Hugging Face Hub"


# --------------------------------------------------------------------------- probes


@dataclass(frozen=True, slots=True)
class Probe:
    """A kubelet probe with Kubernetes' defaults filled in."""

    kind: str
    raw: Mapping[str, Any]
    initial_delay: int
    period: int
    timeout: int
    failure_threshold: int
    written: frozenset[str]

    def text(self, key: str) -> str:
        """``failureThreshold 3`` or ``failureThreshold 3 (default)``."""
        value = {
            "initialDelaySeconds": self.initial_delay,
            "periodSeconds": self.period,
            "timeoutSeconds": self.timeout,
            "failureThreshold": self.failure_threshold,
        }[key]
        return f"{key} {value}" if key in self.written else f"{key} {value} (default)"


# k8s.io/api/core/v1 Probe defaults (kubernetes/kubernetes pkg/apis/core/v1/defaults.go
# SetDefaults_Probe): an absent or 0 periodSeconds, timeoutSeconds or failureThreshold
# becomes the default; negative values fail validation (ValidateNonnegativeField).
_PROBE_DEFAULTS = {
    "initialDelaySeconds": 0,
    "periodSeconds": 10,
    "timeoutSeconds": 1,
    "failureThreshold": 3,
}


def probe(container: ContainerRef, kind: str) -> Probe | str | None:
    """The container's ``startupProbe`` / ``livenessProbe`` (None: absent; str: unreadable)."""
    raw = container.raw.get(kind)
    if raw is UNKNOWN:
        raise UnknownInput(f"{kind} of {container.label}")
    if not isinstance(raw, Mapping):
        return None
    values: dict[str, int] = {}
    for key, default in _PROBE_DEFAULTS.items():
        value = raw.get(key)
        if value is UNKNOWN:
            raise UnknownInput(f"{kind}.{key} of {container.label}")
        if value is None:
            values[key] = default
        elif not isinstance(value, int) or isinstance(value, bool):
            return f"{kind}.{key} {quoted(value)} is not an integer"
        elif value < 0:
            return f"{kind}.{key} {value} is negative, which the API server rejects"
        else:
            # SetDefaults_Probe also replaces 0 with the default (initialDelaySeconds: 0).
            values[key] = value or default
    return Probe(
        kind,
        raw,
        values["initialDelaySeconds"],
        values["periodSeconds"],
        values["timeoutSeconds"],
        values["failureThreshold"],
        frozenset(k for k in _PROBE_DEFAULTS if raw.get(k) not in (None, 0)),  # 0: default
    )


def annotated_startup(site: EngineSite) -> int | None:
    """The planner's startup estimate annotated on the object or its Pod template."""
    pod = site.gpu_pod
    for meta in (
        dig(site.obj.raw, "metadata", "annotations"),
        dig(site.obj.raw, *(pod.path[:-1] if pod else ()), "metadata", "annotations"),
    ):
        value = meta.get(STARTUP_ESTIMATE_ANNOTATION) if isinstance(meta, Mapping) else None
        if value is UNKNOWN:
            raise UnknownInput(f"annotation {STARTUP_ESTIMATE_ANNOTATION} of {site.obj.resource}")
        number = parse_number(value)
        if number is not None:
            return int(number)
    return None


_CACHE_MAX = 4096
_ESTIMATES: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}
_DERIVED: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}


def _by_identity(
    cache: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]],
    anchors: tuple[object, ...],
    rest: tuple[Any, ...],
    compute: Callable[[], T],
) -> T:
    """*compute*() once per process for the *anchors* (by identity) and *rest*. The
    anchors are kept alive in the value, so an id is never matched to another object;
    errors are not cached; the cache is emptied when it reaches its bound."""
    key = (*map(id, anchors), *rest)
    hit = cache.get(key)
    if hit is not None and all(map(operator.is_, hit[0], anchors)):
        return cast("T", hit[1])
    value = compute()
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = (anchors, value)
    return value


def estimate(
    arch: ModelArchitecture,
    gpu: GpuModel,
    settings: VllmSettings,
    release: str | None = None,
    flashinfer_sampler: bool | None = None,
) -> CapacityEstimate:
    """``estimate_capacity`` for the image's vLLM *release* (and the engine's
    ``VLLM_USE_FLASHINFER_SAMPLER``), memoised for the process.

    V003, V004 and V012 size the same engine many times (V012 binary-searches
    max_num_seqs, V003 tries other TP sizes and GPUs), and a manifest often repeats an
    engine, so one estimate per (model, GPU, settings) is computed once. Keyed by the
    identity of the catalogue entries (they are shared) and the settings.
    """
    from gpustrata.vllm.capacity import estimate_capacity

    return _by_identity(
        _ESTIMATES,
        (arch, gpu),
        (settings, release, flashinfer_sampler),
        lambda: estimate_capacity(
            arch, gpu, settings, vllm_release=release, flashinfer_sampler=flashinfer_sampler
        ),
    )


def per_estimate(est: CapacityEstimate, what: str, arg: int, compute: Callable[[], T]) -> T:
    """*compute*() for one estimate, once per process (V012's typical-length capacity and
    its max_num_seqs search: a manifest repeats engines, and :func:`estimate` hands the
    same estimate object to every repeat)."""
    return _by_identity(_DERIVED, (est,), (what, arg), compute)
