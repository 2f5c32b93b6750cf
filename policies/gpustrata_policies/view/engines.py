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

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

from gpustrata.catalog.kaito import base_image_vllm
from gpustrata.catalog.vllm_release_types import vllm_file_url as vllm_source
from gpustrata.core.quantity import parse_number
from gpustrata.core.unknown import TAINTED, UNKNOWN, UnknownInput, memoised
from gpustrata.core.versions import parse_version
from gpustrata.vllm.flags import flag_bool, int_setting
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.karpenter import KARPENTER_GPU_MEMORY, KARPENTER_GPU_NAME
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
from gpustrata_policies.view.profile import active_profile, profile_hint
from gpustrata_policies.view.vllm_args import (
    EngineArgs,
    image_publisher,
    moving_tag,
    serve_config,
    split_image,
    vllm_engine,
    vllm_tagged_image,
    vllm_version,
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
    "karpenter_gpu",
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


def engine_sites(ctx: RuleContext, obj: K8sObject, *, ray_pods: bool = False) -> list[EngineSite]:
    """Every vLLM engine of the object: ``vllm serve`` containers, then the Ray Serve LLM
    configs of a RayService, resolved once per evaluation (a fact of the index).
    Containers in Ray pods (a RayCluster head running ``ray start; vllm serve``) only with
    *ray_pods* (the rules on the engine process itself read those too; the GPU and
    capacity rules judge Ray engines through their Serve config and worker groups)."""

    found: list[EngineSite] = ctx.index.fact(
        obj, _SITES[ray_pods], lambda: _sites(ctx, obj, ray_pods)
    )
    return found


# The index's fact names for an object's engine sites (without and with Ray pods' containers).
_SITES = {False: "engine-sites", True: "engine-sites-with-ray-pods"}


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

    found: dict[str, Fraction] = ctx.memo(("gpu-resources", id(pod.spec)), build)
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


def release_version(text: str | None) -> Version | None:
    """A vLLM release as a 3-part comparison key: ``'1.2.3'`` -> ``(1, 2, 3)``, ``'v1.2'``
    -> ``(1, 2, 0)``, ``'1.2.3.post1'`` -> ``(1, 2, 3)``; ``None`` when it is no version.
    Read with :func:`gpustrata.core.versions.parse_version`, the one version grammar."""
    if not text:
        return None
    try:
        parts = parse_version(text)
    except ValueError:
        return None
    return (*parts, 0, 0, 0)[:3]


def release_key(version: str) -> Version:
    """A catalogued release as a comparison key (``'1.2.3'`` -> ``(1, 2, 3)``)."""
    key = release_version(version)
    if key is None:
        raise ValueError(f"{version!r} is not a release version")
    return key


VENDOR_BUILDS = (
    ("nvcr.io/nvidia/", "NVIDIA NGC"),
    ("registry.redhat.io/rhaiis/", "Red Hat AI Inference Server"),
    ("vertex-ai/", "Vertex AI Model Garden"),
)
"""Vendor builds of vLLM whose tags are the vendor's own versions (repository prefix or
part, vendor); the vLLM inside is the release catalogue's ``vendor_images`` mapping where
the vendor's notes name it (read first, for any image: AIBrix's builds too), else unknown."""


@dataclass(frozen=True, slots=True)
class ImageRelease:
    """The vLLM release an image runs, as far as its reference says."""

    version: str | None
    """The release (``0.10.1.1``); None when the reference names none."""
    where: str
    """How it was read, or why no release is known (for messages)."""
    assumed: bool = False
    """The release is a bound, not read: a ``ray-llm`` image whose Ray release gives a lower
    bound only (its lowest release)."""
    ray: str | None = None
    """The Ray release whose pin gave the version (``rayproject/ray-llm``)."""
    unpinned: bool = False
    """An upstream vLLM image whose reference names no release (a moving tag such as
    ``latest``, no tag, a digest alone): it runs some vLLM release, any of the catalogued
    ones, so a rule may judge it under each (:func:`release_candidates`)."""
    floor: str | None = None
    """Another publisher's ``vllm-openai`` build whose tag leads with a vLLM release and adds
    its own build words (``v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2``, kthena's and AIBrix's
    P/D images): built on that release or a later one, never an earlier one. AIBrix's own
    README builds ``aibrix/vllm-openai:v0.10.0-nixl-latest`` from VLLM_BASE_TAG=v0.10.2
    (vllm-project/aibrix@e3e10f9e:samples/disaggregation/vllm/README.md), so the leading
    release is a floor, not the base (:func:`release_candidates`)."""
    defaults: tuple[str, ...] = ()
    """The releases of the default images a controller's installation may run where the
    manifest names no image and the installed release is not stated (a KubeAI Model:
    :func:`default_image_releases`), oldest first: a rule may judge the engine under each,
    as for an unpinned image (:func:`release_candidates`)."""


def image_release(image: Any) -> ImageRelease | None:
    """The vLLM release of an image reference as people write them: ``vllm/vllm-openai``
    tags (``v0.10.1.1``, ``v0.20.2-cu129``), ``latest`` or no tag (unpinned: no release,
    never an assumed one), a digest alone (names no release), a
    ``rayproject/ray-llm`` tag (through the vLLM its Ray release pins), another
    publisher's ``vllm-openai`` (``lmcache/vllm-openai``: its own versions) and vendor
    builds (unknown). None when the image is none of these."""
    if image is UNKNOWN:
        raise UnknownInput("image")
    if not isinstance(image, str):
        return None
    profile = active_profile()
    stated = profile.image_release(image) if profile is not None else None
    if stated is not None:
        return ImageRelease(
            stated.vllm.removeprefix("v"),
            f"image {image} (vLLM {stated.vllm.removeprefix('v')}, cluster profile images "
            f"{stated.pattern})",
        )
    repo, tag, digest = split_image(image)
    if repo.endswith("rayproject/ray-llm"):
        info = catalogs.compat().ray_llm_image(tag or "")
        if info is not None and info.vllm and info.vllm_assumed:
            return ImageRelease(
                info.vllm,
                f"image {image} (Ray {info.ray} requires vllm{info.vllm_requirement}: "
                f"assumed to run {info.vllm}, the lowest release it accepts)",
                assumed=True,
                ray=info.ray,
            )
        if info is not None and info.vllm:
            return ImageRelease(
                info.vllm, f"image {image} (Ray {info.ray} pins vllm=={info.vllm})", ray=info.ray
            )
        return ImageRelease(None, f"image {image} does not pin a vLLM version the catalogue knows")
    kaito = base_image_vllm(image)
    if kaito is not None:  # KAITO's preset image: its requirements pin the vLLM release
        vllm, row = kaito
        return ImageRelease(
            vllm,
            f"image {image} (the kaito-base image of KAITO {row.release} installs vLLM "
            f"{vllm}: {row.source})",
        )
    build = catalogs.vllm_releases().vendor_image(repo, tag or "")
    if build is not None:  # a vendor build whose notes or build files name its vLLM
        return ImageRelease(
            build.vllm,
            f"image {image} ({build.vendor} {tag} ships vLLM {build.vllm}: {build.source})",
        )
    publisher = image_publisher(image)
    if publisher is not None:
        return ImageRelease(
            None,
            f"image {image} is tagged with {publisher}'s version, not vLLM's, and the "
            f"catalogue does not map {publisher} releases to the vLLM inside",
        )
    for prefix, vendor in VENDOR_BUILDS:
        if prefix in repo and "vllm" in repo.lower():
            return ImageRelease(
                None,
                f"image {image} is a {vendor} build tagged with the vendor's version; the "
                "vLLM release inside is not catalogued",
            )
    if not vllm_tagged_image(image):
        return None
    version = vllm_version(image)
    if version is not None:
        return ImageRelease(version, f"image {image}")
    if tag is None and digest is not None:
        return ImageRelease(
            None, f"image {image} is pinned by digest, which names no vLLM version", unpinned=True
        )
    if moving_tag(tag) is not None:
        # A moving tag (latest, nightly, main, ...: vllm_args.MOVING_TAG_WORDS, the words
        # K013 reports) names no release: what it runs changed with every vLLM release, so
        # no default-dependent figure is read from it (K013 reports the moving tag itself).
        shown = f"tag {tag!r}" if tag else "no tag"
        return ImageRelease(
            None,
            f"image {image} is unpinned ({shown}): it names no vLLM release, and the one it "
            "runs moves with every push",
            unpinned=True,
        )
    lead = _LEADING_RELEASE.match(tag or "")
    return ImageRelease(
        None,
        f"image {image}: tag {tag!r} names no vLLM release",
        floor=lead.group(1) if lead and catalogs.compat().vllm(lead.group(1)) else None,
    )


_LEADING_RELEASE = re.compile(r"v(\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?)-[a-z]")
"""A tag that leads with a vLLM release and adds build words (``v0.10.0-cu128-nixl-...``):
:attr:`ImageRelease.floor`."""


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
    """The catalogue architecture of the served model (by id or alias), or None."""
    for name in site.models:
        arch = catalogs.model_architecture(name)
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
