"""The one engine reader: every vLLM engine of an object as an :class:`EngineSite`.

Flags are parsed by :mod:`gpustrata_policies.view.vllm_args` (vLLM's grammar,
:mod:`gpustrata.vllm.flags`). Where a vLLM engine runs (a ``vllm serve`` container, or a
Ray Serve LLM config in a RayService), which vLLM version it is (the image tag; a
``rayproject/ray-llm`` tag through the Ray release's pinned vLLM in the compatibility
catalogue), which GPU it gets (the pools it targets, else its GPU node selectors) and the
model architecture (catalogue).

Version-dependent facts live in the rules and are keyed by the vLLM releases whose
source was read. A version between two read releases is judged under both, and a rule
reports only what both agree on (otherwise "not evaluated", saying why); releases outside
the read range are not judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

from gpustrata.catalog.vllm_release_types import vllm_file_url as vllm_source
from gpustrata.core.quantity import parse_number
from gpustrata.core.unknown import TAINTED, UNKNOWN, UnknownInput, memoised
from gpustrata.vllm.flags import flag_bool, int_setting
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.controllers import downloaded_model
from gpustrata_policies.view.image_releases import (
    ImageRelease,
    image_release,
    release_key,
    release_version,
)
from gpustrata_policies.view.karpenter import KARPENTER_GPU_MEMORY, KARPENTER_GPU_NAME
from gpustrata_policies.view.kinds import is_read_kind
from gpustrata_policies.view.kserve_llmisvc import (
    KSERVE_PRESET_SOURCE,
    llmisvc_engine,
    llmisvc_models,
)
from gpustrata_policies.view.kubeai import kubeai_default_images, kubeai_fill
from gpustrata_policies.view.kuberay import ray_groups
from gpustrata_policies.view.nodes import (
    gpu_model_of_selectors,
    gpu_models_of_pool,
    gpu_pools,
    gpu_variants_named,
    selector_key,
    targeted_pools,
)
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef, dig
from gpustrata_policies.view.profile import profile_hint
from gpustrata_policies.view.vllm_args import (
    EngineArgs,
    serve_config,
    vllm_engine,
)

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture
    from gpustrata.catalog.hardware import GpuModel

Path = tuple[str | int, ...]
Version = tuple[int, ...]
T = TypeVar("T")

__all__ = [
    "EngineSite",
    "GpuRef",
    "ImageRelease",
    "SiteRelease",
    "as_bool",
    "as_int",
    "default_image_releases",
    "engine_sites",
    "gpu_resources",
    "image_release",
    "is_location",
    "karpenter_gpu",
    "labelled_architecture",
    "neighbours",
    "pod_gpus",
    "ray_gpu_pod",
    "release_candidates",
    "release_key",
    "release_version",
    "site_architecture",
    "site_gpus",
    "site_release",
    "unread_ray_engines",
    "vllm_source",
]


@dataclass(frozen=True, slots=True)
class EngineSite:
    """One vLLM engine and what surrounds it: the one model of an engine every V rule,
    R005 and the capacity rules read (built once per container or ``llm_configs`` entry,
    resolved once per object and evaluation by :func:`engine_sites`)."""

    obj: K8sObject
    engine: EngineArgs
    path: Path
    """Where the settings are written (the container's args, else its command; or
    ``spec.serveConfigV2``)."""
    images: tuple[Any, ...]
    """Images that may run the engine (Ray: every worker container's)."""
    env: Mapping[str, str]
    """Literal env of the engine's containers (Ray: every worker container's, merged)."""
    pods: tuple[PodRef, ...]
    """The pod specs whose GPUs run the engine (Ray: the worker groups)."""
    ray: bool
    models: tuple[str, ...] = ()
    """Names the model goes by (Ray: ``model_source`` first, then ``model_id``)."""
    container: ContainerRef | None = None
    """The container running ``vllm serve`` (None on the Ray Serve LLM path)."""
    llm_config: Mapping[str, Any] = field(default_factory=dict)
    """The Ray Serve LLM ``llm_config`` ({} for containers)."""
    gpu_pod: PodRef | None = None
    """The pod spec whose GPUs run the engine (Ray: the one GPU worker group, or the one
    whose GPU is the ``accelerator_type``; None when none can be matched)."""
    image: Any = None
    """The image running the engine (Ray: the GPU worker group's first container's)."""
    gpu_pod_unknown: str | None = None
    """Set when the GPU worker group could not be read (a value known only at deploy time)."""
    preset: str = ""
    """Where the command line comes from when a controller's preset writes it and the
    manifest does not (a KServe LLMInferenceService: the preset's ``vllm serve /mnt/models``
    with ``spec.parallelism`` and ``VLLM_ADDITIONAL_ARGS``, :func:`~gpustrata_policies.view.
    launchers.llmisvc_engine`); empty where the manifest states it. Such a site is handed
    only to the rules that ask for it (``presets=True``: those whose verdict needs no vLLM
    release), since the preset's image, probes and run-time flags are not the manifest's."""
    known_release: SiteRelease | None = field(default=None, compare=False, repr=False)
    """The release once read without an unknown (:meth:`release`); a site lives for one
    evaluation (:func:`engine_sites`), so this does too."""

    @property
    def label(self) -> str:
        """Where the engine is, for messages (``container 'vllm'`` / serveConfigV2 path)."""
        return self.engine.source

    @property
    def name(self) -> str:
        """The engine by name (``container 'vllm'`` / ``Ray Serve LLM engine 'llama'``)."""
        if self.ray and self.engine.model:
            return f"Ray Serve LLM engine '{self.engine.model}'"
        return self.engine.source

    # Typed reads: every rule reads an engine's settings, release and GPUs through these
    # (tests/policies/test_engine_site.py fails on a rule that walks containers itself).

    def flag(self, key: str) -> Any:
        """A setting as written (dashes or underscores), None when unset; a setting V013
        finds malformed (flag and value in one word) reads as that word."""
        return self.engine.get(key)

    def int_flag(self, key: str) -> int | str | None:
        """An integer setting as vLLM reads it (:func:`as_int`): None when unset, the raw
        text when vLLM would refuse it (a malformed one included)."""
        return as_int(self.engine, key.replace("-", "_"))

    def bool_flag(self, key: str) -> bool | None:
        """A boolean setting (:func:`as_bool`): None when unset or not a boolean."""
        return as_bool(self.engine, key.replace("-", "_"))

    def flag_on(self, key: str) -> bool:
        """Is the boolean setting on (``--flag``, ``--flag=true``, YAML true)?"""
        return self.bool_flag(key) is True

    def gpus_per_engine(self) -> int | None:
        """Tensor x pipeline parallel size (defaults 1), None when a factor is unreadable."""
        return self.engine.gpus_per_engine()

    def release(self) -> SiteRelease:
        """The vLLM release the engine runs (:func:`site_release`, the one resolver), read
        once per site: a dozen rules ask (issue 35)."""
        found = self.known_release
        if found is None:
            memo: dict[str, Any] = {}
            found = memoised(memo, "release", site_release, self)
            if type(memo["release"]) is not TAINTED:  # an unknown read is read again
                object.__setattr__(self, "known_release", found)
        return found

    def gpus(self, ctx: RuleContext) -> list[GpuRef] | str:
        """The GPU(s) the engine gets, MIG slices and Ray accelerator types included
        (:func:`site_gpus`), or why none is known."""
        return site_gpus(ctx, self)


def engine_sites(
    ctx: RuleContext, obj: K8sObject, *, ray_pods: bool = False, presets: bool = False
) -> list[EngineSite]:
    """Every vLLM engine of the object: ``vllm serve`` containers, then the Ray Serve LLM
    configs of a RayService, resolved once per evaluation (a fact of the index).
    Containers in Ray pods (a RayCluster head running ``ray start; vllm serve``) only with
    *ray_pods* (the rules on the engine process itself read those too; the GPU and
    capacity rules judge Ray engines through their Serve config and worker groups).
    Engines a controller's preset writes (:attr:`EngineSite.preset`, a KServe
    LLMInferenceService that states no command) only with *presets*: for the rules whose
    verdict does not depend on the vLLM release, which the preset's image leaves unknown."""

    found: list[EngineSite] = ctx.index.fact(
        obj, _SITES[ray_pods], lambda: _sites(ctx, obj, ray_pods)
    )
    if presets:
        return [*found, *ctx.index.fact(obj, "preset-engine-sites", lambda: _preset_sites(obj))]
    return found


# The index's fact names for an object's engine sites (without and with Ray pods' containers).
_SITES = {False: "engine-sites", True: "engine-sites-with-ray-pods"}


def _preset_sites(obj: K8sObject) -> list[EngineSite]:
    """The engines a KServe LLMInferenceService's presets write for its ``main`` containers
    that state no command (:func:`~gpustrata_policies.view.launchers.llmisvc_engine`), on
    the Pods of ``spec.template`` and ``spec.worker``, the model named by ``spec.model``
    (:func:`~gpustrata_policies.view.launchers.llmisvc_models`)."""
    if obj.kind != "LLMInferenceService" or not is_read_kind(obj):
        return []
    out: list[EngineSite] = []
    for pod in obj.pods():
        if pod.role not in ("template", "worker"):
            continue  # the prefill presets are not read (launchers.py says so)
        engine = llmisvc_engine(obj, pod.role)
        main = next((c for c in pod.containers(init=False) if c.name == "main"), None)
        if engine is None or main is None or vllm_engine(main) is not None:
            continue  # a main container read as an engine of its own is judged as before
        out.append(
            EngineSite(
                obj,
                engine,
                main.path,
                (main.image,),
                main.literal_env(),
                (pod,),
                False,
                llmisvc_models(obj),
                container=main,
                gpu_pod=pod,
                image=main.image,
                preset=KSERVE_PRESET_SOURCE,
            )
        )
    if len(out) == 2 and _same_engine(*out):  # the data-parallel preset: one engine per Pod
        first, worker = out
        first.engine.source = first.engine.source.replace("(template", "(template and worker")
        return [dataclasses.replace(first, pods=(*first.pods, *worker.pods))]
    return out


_POD_PLACEMENT = ("nodeSelector", "affinity", "tolerations", "resourceClaims")
"""Pod fields that decide which GPU a Pod gets (:func:`_same_engine`)."""


def _same_engine(template: EngineSite, worker: EngineSite) -> bool:
    """Do a preset's template and worker Pods run the same engine on the same GPUs (KServe's
    data-parallel preset writes one command for both: each Pod holds its local ranks), so
    that the rules judge it once for both? Same settings, image, literal env, main
    container resources and the Pod fields that choose the node."""
    t, w = template.container, worker.container
    assert t is not None and w is not None  # preset sites are container sites
    return (
        template.engine.values == worker.engine.values
        and template.engine.complete == worker.engine.complete
        and t.image == w.image
        and t.literal_env() == w.literal_env()
        and t.raw.get("resources") == w.raw.get("resources")
        and all(t.pod.spec.get(k) == w.pod.spec.get(k) for k in _POD_PLACEMENT)
    )


def _sites(ctx: RuleContext, obj: K8sObject, ray_pods: bool) -> list[EngineSite]:
    if ray_pods:  # the Ray Serve LLM engines are the default list's: built once
        return [
            *_container_sites(ctx, obj, True),
            *(s for s in engine_sites(ctx, obj) if s.ray),
        ]
    return [*_container_sites(ctx, obj, False), *_ray_sites(ctx, obj)]


def unread_ray_engines(obj: K8sObject) -> list[str]:
    """The Ray Serve LLM engines of a RayService that have no :class:`EngineSite` because
    their ``llm_configs`` entry is a file reference, not readable here (their labels)."""
    cfg = serve_config(obj) if obj.kind == "RayService" else None
    return [e.source for e in (cfg.engines if cfg else []) if not e.complete]


def _ray_sites(ctx: RuleContext, obj: K8sObject) -> Iterator[EngineSite]:
    if obj.kind == "RayService":
        cfg = serve_config(obj)
        workers = tuple(p for p in obj.pods() if p.is_ray and p.role != "head")
        containers = [c for p in workers for c in p.containers(init=False)]
        env: dict[str, str] = {}
        for c in containers:
            env.update(c.literal_env())
        images = tuple(c.image for c in containers)
        complete = [e for e in cfg.engines if e.complete] if cfg else []
        configs = cfg.llm_configs if cfg else []
        for ray_engine, llm_config in zip(complete, configs, strict=False):
            source = dig(llm_config, "model_loading_config", "model_source")
            names = tuple(n for n in (source, ray_engine.model) if isinstance(n, str) and n)
            unknown = None
            try:
                gpu_pod = ray_gpu_pod(ctx, obj, llm_config)
            except UnknownInput as exc:
                gpu_pod, unknown = None, str(exc)
            image = None
            if gpu_pod is not None:
                image = next((c.image for c in gpu_pod.containers(init=False)), None)
            yield EngineSite(
                obj,
                ray_engine,
                ("spec", "serveConfigV2"),
                images,
                env,
                workers,
                True,
                names,
                llm_config=llm_config,
                gpu_pod=gpu_pod,
                image=image,
                gpu_pod_unknown=unknown,
            )


def _container_sites(ctx: RuleContext, obj: K8sObject, ray_pods: bool) -> Iterator[EngineSite]:
    for pod in obj.pods():
        if pod.is_ray and not ray_pods:
            continue
        for c in pod.containers(init=False):
            engine = vllm_engine(c, ctx.index)
            if engine is not None:
                path = (*c.path, "args" if "args" in c.raw else "command")
                names = (engine.model,) if engine.model else ()
                held = downloaded_model(obj)  # what the path holds (kthena's cache path)
                names = (*names, held) if held and held not in names else names
                yield EngineSite(
                    obj,
                    engine,
                    path,
                    (c.image,),
                    c.literal_env(),
                    (pod,),
                    False,
                    names,
                    container=c,
                    gpu_pod=pod,
                    image=c.image,
                )


# --------------------------------------------------------------------------- GPU


@dataclass(frozen=True, slots=True)
class GpuRef:
    """A GPU model an engine runs on and what says so."""

    gpu: GpuModel
    where: str

    @property
    def label(self) -> str:
        """``NVIDIA L4 (nvidia.com/gpu.product=NVIDIA-L4)``."""
        return f"{self.gpu.name} ({self.where})"


def gpu_resources(ctx: RuleContext, pod: PodRef) -> dict[str, Fraction]:
    """The GPU resources (``nvidia.com/*`` and the configured others) the pod's app
    containers ask for, read once per pod and evaluation (a Pod of N engine containers
    asks N times)."""

    def build() -> dict[str, Fraction]:
        extra = ctx.config.gpu_resources
        out: dict[str, Fraction] = {}
        for c in pod.containers(init=False):
            for section in ("limits", "requests"):
                for name, raw in c.resources(section).items():
                    if name.startswith("nvidia.com/") or name in extra:
                        if raw is UNKNOWN:
                            raise UnknownInput(f"{name} of {c.label}")
                        # parse_number caps the exponent: "1e10000000" is no number.
                        out.setdefault(name, parse_number(raw) or Fraction(0))
        return {k: v for k, v in out.items() if v > 0}

    # keyed by the object too: a repeated document shares its Pod spec with the first copy
    # (inputs/repeats.py), while DRA claims resolve in each copy's own namespace
    found: dict[str, Fraction] = ctx.memo(("gpu-resources", id(pod.obj), id(pod.spec)), build)
    return found


def is_number(raw: Any) -> bool:
    """Does *raw* read as a plain number (not a boolean; no absurd exponent)?"""
    return parse_number(raw) is not None


def ray_gpu_pod(ctx: RuleContext, obj: K8sObject, llm: Mapping[str, Any]) -> PodRef | None:
    """The worker group a Ray Serve LLM engine runs on: the only GPU group, or the one whose
    GPU is the engine's ``accelerator_type`` (Ray's name for the GPU model)."""
    groups = [g for g in ray_groups(obj) if not g.is_head and gpu_resources(ctx, g.pod)]
    if len(groups) == 1:
        return groups[0].pod
    wanted = llm.get("accelerator_type")
    if not isinstance(wanted, str):
        return None
    matching = [
        g.pod
        for g in groups
        if any(r.gpu.ray_accelerator_type == wanted for r in _listed(pod_gpus(ctx, g.pod)))
    ]
    return matching[0] if len(matching) == 1 else None


def _listed(found: list[GpuRef] | str) -> list[GpuRef]:
    return [] if isinstance(found, str) else found


def karpenter_gpu(labels: Mapping[str, Any]) -> tuple[GpuModel | None, str] | None:
    """Karpenter's ``instance-gpu-name`` (``h100``, ``a10g``) resolved through the AWS
    instance types of the hardware catalogue; ``instance-gpu-memory`` (MiB) picks between
    models of one name (A100 40 GB / 80 GB)."""
    name = labels.get(KARPENTER_GPU_NAME)
    if not isinstance(name, str):
        return None
    where = f"{KARPENTER_GPU_NAME}={name}"
    hw = catalogs.hardware()
    ids = {i.gpu for i in hw.instances.values() if i.provider == "aws"}  # Karpenter: EC2
    key = name.strip().lower()
    found = [hw.gpus[g] for g in sorted(ids) if g == key or g.startswith(f"{key}-")]
    memory = labels.get(KARPENTER_GPU_MEMORY)
    if len(found) > 1 and memory is not None and is_number(memory):
        mib = float(str(memory))
        found = [g for g in found if abs(g.memory_gib * 1024 - mib) <= 0.1 * mib]
        where += f", {KARPENTER_GPU_MEMORY}={memory}"
    return (found[0] if len(found) == 1 else None), where


def pod_gpus(ctx: RuleContext, pod: PodRef) -> list[GpuRef] | str:
    """The GPU model(s) a Pod can land on, or why none is known.

    Described pools the Pod targets win (each distinct GPU model is returned); otherwise
    the Pod's GPU node selectors (GFD product, instance type, Karpenter, GKE labels).
    """
    pools = gpu_pools(ctx)

    def from_pools() -> tuple[dict[str, GpuRef], list[str], bool]:
        refs: dict[str, GpuRef] = {}
        unknown: list[str] = []
        partial = False
        for pool in targeted_pools(pod, pools) if pools else []:
            models = gpu_models_of_pool(pool, pod)
            if isinstance(models, str):
                unknown.append(models)
                partial = partial or pool.extra.get("source") == "NodePool"
                continue
            where = f"pool {pool.name}"
            if len(models) > 1:
                where += f" (one of its GPU models {', '.join(m.id for m in models)})"
            for model in models:
                refs.setdefault(model.id, GpuRef(model, where))
        return refs, unknown, partial

    # The pools' models depend on the Pod only through its selectors: once per selector.
    refs, unknown, partial = ctx.memo(("pod_gpus_pools", selector_key(pod)), from_pools)
    if partial:
        return "; ".join(unknown)  # a NodePool may launch a type nothing here knows
    if refs:
        return list(refs.values())
    karpenter = karpenter_gpu(pod.selected_labels())
    gpu, where = karpenter if karpenter is not None else gpu_model_of_selectors(pod)
    if gpu is not None:
        return [GpuRef(gpu, where)]
    if where:
        variants = gpu_variants_named(where.partition("=")[2])
        if len(variants) > 1:
            names = ", ".join(g.name for g in variants)
            return (
                f"the GPU model selected by {where} is not one GPU: the value names a family "
                f"with several catalogued models ({names}) and does not say which "
                + profile_hint("gpu_products")
            )
        return (
            f"the GPU model selected by {where} is not in the hardware catalogue "
            + profile_hint("gpu_products")
        )
    if unknown:
        return "; ".join(unknown)
    return (
        "the GPU model is unknown: the Pod selects no nvidia.com/gpu.product, "
        "node.kubernetes.io/instance-type, karpenter.k8s.aws/instance-gpu-name or "
        "cloud.google.com/gke-accelerator label and matches no described GpuNodePool"
        + _selects_only(pod)
        + " "
        + profile_hint("gpu_products or pools")
    )


def _selects_only(pod: PodRef) -> str:
    """`` (it selects only K=V, ...: no GPU model gpustrata reads)`` for a Pod whose
    selectors name no GPU (a vendor's own GPU label, a GKE ComputeClass); empty when it
    selects nothing, so the reason says what the manifest does pin."""
    labels = pod.selected_labels()
    if not labels:
        return ""
    shown = [f"{k}={v}" for k, v in sorted(labels.items(), key=lambda kv: str(kv[0]))]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return f" (it selects only {', '.join(shown[:3])}{more}: no GPU model gpustrata reads)"


# --------------------------------------------------------------------------- versions


@dataclass(frozen=True, slots=True)
class SiteRelease:
    """The vLLM release an engine runs, read once by :func:`site_release`."""

    version: str | None
    """The release (``0.10.1.1``); None when no image names one (nothing is assumed)."""
    where: str
    """How it was read (the image's :attr:`ImageRelease.where`), or why no release is
    known (with the cluster-profile hint)."""
    image: Any = None
    """The image the release was read from (None when none names one)."""
    found: ImageRelease | None = None
    """The image's reading (Ray pin, assumed bound), None when no image names a release."""


def site_release(site: EngineSite) -> SiteRelease:
    """The one release resolver: the vLLM release of the engine's image
    (:func:`image_release`; Ray: the GPU worker group's image first, then the other worker
    images), with where it was read, or why none is known."""
    reasons: list[tuple[Any, ImageRelease]] = []
    seen: list[Any] = []
    for image in (site.image, *site.images) if site.image is not None else site.images:
        if image is UNKNOWN:
            defaults = _installation_release(site)
            if defaults is None:
                raise UnknownInput(f"image of {site.label}")
            return defaults
        if image in seen:
            continue
        seen.append(image)
        found = image_release(image)
        if found is None:
            continue
        if found.version:
            return SiteRelease(found.version, found.where, image, found)
        reasons.append((image, found))
    if reasons:
        image, found = reasons[0]
        return SiteRelease(None, f"{found.where} {profile_hint('images')}", image, found)
    shown = ", ".join(str(i) for i in site.images) or "none"
    return SiteRelease(
        None, f"the image ({shown}) does not name a vLLM version {profile_hint('images')}"
    )


def _installation_release(site: EngineSite) -> SiteRelease | None:
    """The release of an engine whose image the controller's installation sets, where the
    installed release is not stated and its defaults differ (a KubeAI Model without
    ``spec.image``): unknown, with the releases of those defaults as its candidates
    (:attr:`ImageRelease.defaults`); None where there are none (the image stays unknown)."""
    releases = default_image_releases(site)
    if not releases:
        return None
    why = kubeai_fill(site.obj).unknown.get("image")
    if why is None:
        return None
    where = f"the image of {site.label} is the KubeAI installation's: {why}"
    return SiteRelease(None, where, UNKNOWN, ImageRelease(None, where, defaults=releases))


def release_candidates(site: EngineSite, read: Sequence[str]) -> tuple[str, ...] | None:
    """The releases an engine whose image names none may run, for a rule that judges it
    under each and decides only where all agree: the rule's *read* releases (those whose
    facts it has) when the image is an unpinned upstream vLLM image (``latest``, no tag,
    a digest: :attr:`ImageRelease.unpinned`), those from its floor on for another
    publisher's build whose tag leads with a release (:attr:`ImageRelease.floor`); None
    where the release is known, or unknown for another reason (a vendor build tagged with
    the vendor's version, a dated or non-vLLM tag)."""
    found = site.release()
    if found.version is not None or found.found is None:
        return None
    if found.found.defaults:
        return found.found.defaults  # exact: every one is judged, read or not
    if found.found.unpinned:
        return tuple(read) or None
    floor = release_version(found.found.floor)
    if floor is None:
        return None
    return tuple(v for v in read if (release_version(v) or ()) >= floor) or None


def default_image_releases(site: EngineSite) -> tuple[str, ...]:
    """The vLLM releases of the default images a controller's installation may run for the
    engine, one per distinct image, where the installed release is not stated and those
    defaults differ (a KubeAI Model: :func:`~gpustrata_policies.view.kubeai.
    kubeai_default_images`), for a rule that decides only where its verdict is the same on
    all; empty where there are none or one names no release."""
    releases = []
    for image in kubeai_default_images(site.obj):
        found = image_release(image)
        if found is None or found.version is None:
            return ()
        releases.append(found.version)
    return tuple(dict.fromkeys(releases))


def site_gpus(ctx: RuleContext, site: EngineSite) -> list[GpuRef] | str:
    """The catalogue GPU(s) the engine really gets, each with where it was read, or why
    none is known: the one reader every rule asks (capacity, V005, V006, ...).

    Read on the Pod whose GPUs run the engine (:attr:`EngineSite.gpu_pod`; Ray: the worker
    group matched by ``accelerator_type``): its described pools, else its GPU selectors
    (:func:`pod_gpus`), else a Ray Serve LLM ``accelerator_type``. A MIG resource
    (``nvidia.com/mig-3g.40gb``, the mixed strategy) gives that slice of each parent GPU:
    the parent's compute capability with the slice's memory (what CUDA, and so vLLM,
    sees).
    """
    pod = site.gpu_pod
    if pod is None:
        return (
            f"{site.name}: no Ray worker group with GPUs could be matched to the engine "
            "(several GPU groups and no accelerator_type naming one of their GPUs)"
        )
    found = pod_gpus(ctx, pod)
    if isinstance(found, str):
        found = _accelerator_type_gpus(ctx, site, pod) or found
    profiles = [n.partition("/mig-")[2] for n in gpu_resources(ctx, pod) if "/mig-" in n]
    if not profiles:
        return found
    if isinstance(found, str):
        shown = ", ".join(f"nvidia.com/mig-{p}" for p in profiles)
        return f"{site.name} gets a MIG slice ({shown}); {found}"
    return _mig_slices(site, found, profiles)


def _mig_slices(site: EngineSite, parents: list[GpuRef], profiles: list[str]) -> list[GpuRef] | str:
    """The MIG slices *profiles* of each parent GPU, or why one is unknown."""
    hw = catalogs.hardware()
    out: list[GpuRef] = []
    for ref in parents:
        for profile in profiles:
            piece = hw.mig_slice(ref.gpu, profile)
            if piece is None:
                listed = ", ".join(ref.gpu.mig_profiles) or "none"
                return (
                    f"{site.name} gets a MIG slice nvidia.com/mig-{profile}, which the hardware "
                    f"catalogue does not list for {ref.gpu.name} ({ref.where}; its MIG "
                    f"profiles: {listed})"
                )
            out.append(GpuRef(piece, f"nvidia.com/mig-{profile} of {ref.gpu.name}, {ref.where}"))
    return out


def _accelerator_type_gpus(ctx: RuleContext, site: EngineSite, pod: PodRef) -> list[GpuRef]:
    """Where nothing in the cluster's description names the Pod's GPU, a Ray Serve LLM
    ``accelerator_type`` does: Ray schedules the engine's bundles only on nodes whose
    detected accelerator is that type (``accelerator_type:<name>`` resource), so the engine
    lands on one of the catalogue GPUs Ray names so (each is evaluated, like the GPUs of
    several pools)."""
    wanted = site.llm_config.get("accelerator_type")
    if wanted is UNKNOWN:
        raise UnknownInput(f"accelerator_type of {site.name}")
    if not isinstance(wanted, str) or not wanted:
        return []
    if gpu_pools(ctx) and targeted_pools(pod, gpu_pools(ctx)):
        return []  # a described pool names the GPU (or says it is not catalogued)
    if gpu_model_of_selectors(pod)[1]:
        return []  # a selector names a GPU the catalogue lacks: that is the reason
    where = f"Ray Serve LLM accelerator_type {wanted}"
    return [
        GpuRef(gpu, where)
        for gpu in catalogs.hardware().gpus.values()
        if gpu.ray_accelerator_type == wanted
    ]


def site_architecture(site: EngineSite) -> ModelArchitecture | None:
    """The catalogue architecture of the served model (by id or alias; for a path or bucket
    that names none, the model its Pod label names: :func:`labelled_architecture`), or None."""
    for name in site.models:
        arch = catalogs.model_architecture(name)
        if arch is not None:
            return arch
    return labelled_architecture(site) if site.models and is_location(site.models[0]) else None


OBJECT_STORE_PREFIXES = ("s3://", "gs://", "az://", "abfss://")
MODEL_LABEL = "ai.gke.io/model"
"""The Pod label GKE's samples name the served model by (``gemma-3-27b-it``)."""


def is_location(model: str) -> bool:
    """Is the model given as a local path, file URI or object-store bucket?"""
    return model.startswith(("/", "./", "../", "file:", *OBJECT_STORE_PREFIXES))


def labelled_architecture(site: EngineSite) -> ModelArchitecture | None:
    """The catalogued model a Pod label of the engine names (:data:`MODEL_LABEL`), or None.

    Read only where the engine's model is a path or bucket that names no catalogued model
    (the callers check): such a path holds a copy or a post-trained checkpoint of the model
    the label names (GKE's NeMo RL sample serves ``/data/nemo_rl_gemma3_27b_3_11/hf3-11``
    labelled ``gemma-3-27b-it``), whose shape is that model's; vLLM serves 32-bit and 16-bit
    checkpoints at 16 bits alike (``--dtype auto``), so the weight bytes are the model's too,
    unless the checkpoint is quantised, which the label would not say."""
    for pod in site.pods:
        label = pod.labels.get(MODEL_LABEL)
        arch = catalogs.model_architecture(label) if isinstance(label, str) and label else None
        if arch is not None:
            return arch
    return None


def as_int(engine: EngineArgs, key: str) -> int | str | None:
    """An integer setting as vLLM reads it; ``None`` when unset; the raw text when vLLM
    would refuse it (:func:`gpustrata.vllm.flags.int_setting`)."""
    return int_setting(engine.values, key, engine.source)


def as_bool(engine: EngineArgs, key: str) -> bool | None:
    """A boolean setting (``--flag``, ``--no-flag``, ``--flag=false``, YAML bools)."""
    return flag_bool(engine.values, key, engine.source)


def neighbours(version: Version, read: Sequence[tuple[Version, T]]) -> list[T] | None:
    """Facts of the read release itself, or of the read releases around it.

    ``read`` is sorted by version. Returns None outside the read range.
    """
    for key, facts in read:
        if key == version:
            return [facts]
    below = [f for k, f in read if k < version]
    above = [f for k, f in read if k > version]
    if not below or not above:
        return None
    return [below[-1], above[0]]


def fmt_version(version: Version) -> str:
    """``(0, 11, 1)`` -> ``0.11.1``."""
    return ".".join(str(p) for p in version)


def gib(gpu: GpuModel) -> str:
    """``79.65 GiB`` for messages."""
    return f"{gpu.memory_gib:g} GiB"
