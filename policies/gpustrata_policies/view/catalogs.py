"""Catalogue look-ups for rules, loaded lazily (the catalogues use pydantic; a run that
never needs them, like ``gpustrata check`` on a plain Deployment, never imports it).

Every look-up returns ``None`` (or an :class:`ImageCuda` with ``cuda=None`` and the
reason) when the catalogue does not know the answer: rules never guess.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from gpustrata.core.unknown import UnknownInput
from gpustrata_policies.view.vllm_args import split_image, vllm_version

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture, ModelCatalog
    from gpustrata.catalog.compat import CompatCatalog, DriverRequirement, GpuOperatorRelease
    from gpustrata.catalog.hardware import GpuModel, HardwareCatalog, InstanceType
    from gpustrata.catalog.kserve import KServePreset
    from gpustrata.catalog.model_sources import ModelSources
    from gpustrata.catalog.vllm_release_types import VllmReleases

__all__ = [
    "ImageCuda",
    "compat",
    "gpu_by_label",
    "hardware",
    "image_cuda",
    "instance",
    "kserve_preset",
    "kserve_releases",
    "min_driver_for_cuda",
    "model_architecture",
    "operator_release",
    "preload",
    "readable_version",
    "reference_vllm",
    "reference_vllm_minor",
    "vllm_releases",
]

_CU_TAG = re.compile(r"(?:^|[-_.])cu(\d{3})(?=$|[-_.])")
_CUDA_TAG = re.compile(r"(?:^|[-_.])cuda-?(\d+\.\d+(?:\.\d+)?)(?=$|[-_])")


_MEMOS: dict[str, tuple[object, dict[Any, Any]]] = {}
# The catalogue loaders (each cached by its module), imported on first use: an import
# statement in a function costs a look-up per call, and rules call these 100k times.
_LOADERS: dict[str, Callable[[], Any]] = {}


def _memo(name: str, catalog: object) -> dict[Any, Any]:
    """The look-ups *name* made on *catalog*, kept while it is the catalogue loaded (a
    whole-cluster input asks the same few images and GPU labels tens of thousands of
    times; a test that reloads a catalogue gets fresh answers)."""
    entry = _MEMOS.get(name)
    if entry is None or entry[0] is not catalog:
        entry = _MEMOS[name] = (catalog, {})
    return entry[1]


def _loaded(name: str, module: str, loader: str) -> Any:
    """What *loader* of *module* returns now (a catalogue it caches, the command's model
    sources), the function found once per process."""
    load = _LOADERS.get(name)
    if load is None:
        load = _LOADERS[name] = getattr(importlib.import_module(module), loader)
    return load()


_PRELOADED: tuple[tuple[str, str], ...] = (
    ("gpustrata.catalog.compat", "load_compat_catalog"),
    ("gpustrata.catalog.hardware", "load_hardware_catalog"),
    ("gpustrata.catalog.architectures", "load_model_catalog"),
    ("gpustrata.catalog.vllm_releases", "load_vllm_releases"),
    ("gpustrata.catalog.vllm_facts", "scheduler_releases"),
    ("gpustrata.catalog.charts", "chart_releases"),
    ("gpustrata.catalog.serving", "load_serving_calibration"),
    ("gpustrata.catalog.eks_ami", "eks_ami_table"),
    ("gpustrata.catalog.aks_image", "aks_image_table"),
    ("gpustrata.catalog.kserve", "kserve_releases"),
    ("gpustrata.catalog.kubeai", "kubeai_releases"),
    ("gpustrata.catalog.llmaz", "llmaz_backends"),
)
"""Each packaged catalogue the rules read, by the function that loads (and caches) it."""
_CAPACITY_MODEL = (
    "gpustrata.vllm.capacity",
    "gpustrata.vllm.performance",
    "gpustrata.vllm.calibration",
    "gpustrata.vllm.offload",
)


def preload() -> None:
    """Load every packaged catalogue the rules read, and import the capacity model, now
    rather than when a rule first asks: for a server whose requests come later (the policy
    pack, started as ``pulumi preview`` starts, answers one AnalyzeStack at its end), this
    is paid while the program runs, not in the first request (issue 35: about 0.3 s of
    CPU). ``check`` does not call it: a small check never loads most of them."""
    for module, loader in _PRELOADED:
        getattr(importlib.import_module(module), loader)()
    for module in _CAPACITY_MODEL:
        importlib.import_module(module)


def compat() -> CompatCatalog:
    """The packaged compatibility catalogue."""
    catalog: CompatCatalog = _loaded("compat", "gpustrata.catalog.compat", "load_compat_catalog")
    return catalog


def vllm_releases() -> VllmReleases:
    """The packaged vLLM release catalogue (defaults and facts per release)."""
    from gpustrata.catalog.vllm_releases import load_vllm_releases

    return load_vllm_releases()


def kserve_preset(release: str, name: str) -> KServePreset | None:
    """KServe *release*'s well-known LLMInferenceServiceConfig *name*, or ``None`` when the
    catalogue does not hold it (:func:`gpustrata.catalog.kserve.kserve_preset`)."""
    from gpustrata.catalog.kserve import kserve_preset as lookup

    return lookup(release, name)


def kserve_releases() -> tuple[str, ...]:
    """The KServe releases whose presets are catalogued, oldest first."""
    from gpustrata.catalog.kserve import kserve_releases as releases

    return releases()


def reference_vllm() -> str:
    """The vLLM release a rule assumes when an image names none (from the catalogue)."""
    return vllm_releases().reference


def reference_vllm_minor() -> str:
    """The reference release as its series (``X.Y``), for prose."""
    from gpustrata.catalog.vllm_releases import minor_release

    return minor_release(reference_vllm())


def hardware() -> HardwareCatalog:
    """The packaged hardware catalogue."""
    catalog: HardwareCatalog = _loaded(
        "hardware", "gpustrata.catalog.hardware", "load_hardware_catalog"
    )
    return catalog


def instance(name: str) -> InstanceType | None:
    """An instance type by name, or ``None``."""
    return hardware().instance(name)


def gpu_by_label(label: str) -> GpuModel | None:
    """A GPU by catalogue id or GFD ``nvidia.com/gpu.product`` value, or ``None``."""
    catalog = hardware()
    memo = _memo("gpu_by_label", catalog)
    if label not in memo:
        memo[label] = catalog.gpu(label)
    found: GpuModel | None = memo[label]
    return found


def min_driver_for_cuda(cuda: str) -> DriverRequirement | None:
    """The driver a CUDA version needs (:meth:`CompatCatalog.min_driver_for_cuda`), or
    ``None`` when the minor is not catalogued."""
    catalog = compat()
    memo = _memo("min_driver_for_cuda", catalog)
    if cuda not in memo:
        memo[cuda] = catalog.min_driver_for_cuda(cuda)
    found: DriverRequirement | None = memo[cuda]
    return found


def operator_release(version: str | None) -> GpuOperatorRelease | None:
    """The catalogued GPU Operator release, or ``None``."""
    return compat().gpu_operator(version) if version else None


def model_architecture(model_id: str) -> ModelArchitecture | None:
    """A model architecture from the model's own files where the command names some
    (``--models DIR``, the Hugging Face cache:
    :func:`~gpustrata.catalog.model_sources.active_model_sources`), else by Hugging Face id
    or alias, else by a local path, URI or served name whose last component names one
    entry (``/models/Qwen3-32B``:
    :meth:`~gpustrata.catalog.architectures.ModelCatalog.named_by_path`), or ``None``.

    Raises :class:`~gpustrata.core.unknown.UnknownInput` (the rule is not evaluated) with
    the file and the fix when the model's local file is found but refused."""
    catalog: ModelCatalog = _loaded(
        "models", "gpustrata.catalog.architectures", "load_model_catalog"
    )
    memo = _memo("model_architecture", catalog)
    sources: ModelSources | None = _loaded(
        "sources", "gpustrata.catalog.model_sources", "active_model_sources"
    )
    local = sources is not None and not sources.empty
    key = (sources, model_id) if local else model_id
    if key not in memo:
        found = _local_architecture(sources, model_id) if sources is not None and local else None
        memo[key] = found or catalog.get(model_id) or catalog.named_by_path(model_id)
    found = memo[key]
    if isinstance(found, str):
        raise UnknownInput(model_id, found)
    return cast("ModelArchitecture | None", found)


def _local_architecture(sources: ModelSources, model_id: str) -> ModelArchitecture | str | None:
    """The model's architecture from its local files, the refusal's text, or None."""
    from gpustrata.catalog.architectures import ModelCatalogError

    try:
        return sources.architecture(model_id)
    except ModelCatalogError as exc:
        return (
            f"the local files of model {model_id!r} cannot be used: {exc} (gpustrata does not "
            "fall back to the catalogue for a model whose own files it found)"
        )


UNCATALOGUED_FIX = (
    "give its own files: check --models DIR (<org>/<name>/config.json or <name>/config.json) "
    "or the Hugging Face cache (HF_HUB_CACHE, HF_HOME)"
)
"""How a user makes a model that is not catalogued known (the one resolver of local model
files: :mod:`gpustrata.catalog.model_sources`); the "not in the model catalogue" reasons
end with it."""


def nearest_models(name: str) -> list[str]:
    """Catalogue ids closest to an unknown model name, best first (may be empty)."""
    from gpustrata.catalog.architectures import load_model_catalog

    catalog = load_model_catalog()
    memo = _memo("nearest_models", catalog)
    if name not in memo:
        memo[name] = catalog.nearest(name)
    return list(memo[name])


@dataclass(frozen=True, slots=True)
class ImageCuda:
    """The CUDA version an image is built on, where that was read, or why it is unknown."""

    cuda: str | None
    why: str


def image_cuda(image: object) -> ImageCuda | None:
    """CUDA of an image: ``vllm/vllm-openai:vX`` via the catalogue, a ``cuNNN`` /
    ``cudaX.Y`` tag segment (``rayproject/ray-llm:2.46.0-py311-cu124``), else ``None``
    (the image says nothing about CUDA)."""
    if not isinstance(image, str):
        return None
    memo = _memo("image_cuda", compat())
    if image not in memo:
        memo[image] = _image_cuda(image)
    found: ImageCuda | None = memo[image]
    return found


def _image_cuda(image: str) -> ImageCuda | None:
    repo, tag, _ = split_image(image)
    tag = tag or ""
    match = _CU_TAG.search(tag)
    if match:
        code = match.group(1)
        return ImageCuda(f"{int(code[:-1])}.{int(code[-1])}", f"the tag's cu{code}")
    match = _CUDA_TAG.search(tag)
    if match:
        return ImageCuda(match.group(1), f"the tag's cuda{match.group(1)}")
    if repo.rsplit("/", 2)[-2:] == ["nvidia", "cuda"]:
        base = re.match(r"(\d+\.\d+(?:\.\d+)?)-", tag)
        if base:
            return ImageCuda(base.group(1), "the nvidia/cuda base image tag")
    version = vllm_version(image)
    if version is None:
        return None
    release = compat().vllm(version)
    if release is None:
        return ImageCuda(None, f"vLLM {version} is not in the compatibility catalogue")
    if release.image_cuda is None:
        return ImageCuda(
            None, f"the CUDA version of the vLLM {release.version} image is not catalogued"
        )
    if release.image_cuda_from == "release-pipeline":
        return ImageCuda(
            release.image_cuda,
            f"vLLM {release.version} .buildkite/release-pipeline.yaml --build-arg CUDA_VERSION",
        )
    return ImageCuda(
        release.image_cuda, f"vLLM {release.version} docker/Dockerfile ARG CUDA_VERSION"
    )


@lru_cache(maxsize=4096)
def readable_version(text: str) -> bool:
    """Does *text* parse as a version the catalogue can compare?"""
    from gpustrata.core.versions import parse_version

    try:
        parse_version(text)
    except ValueError:
        return False
    return True


def repo_name(image: str) -> str:
    """``vllm/vllm-openai:v0.8.5`` -> ``vllm/vllm-openai``."""
    return split_image(image)[0]
