"""Compatibility catalogue: which versions of the stack's parts work together.

The data lives in ``gpustrata/catalog/data/compat-*.yaml`` and covers:

- GPU Operator releases: supported Kubernetes minors, the chart's default and tested NVIDIA
  drivers, and the default container toolkit / device plugin / DCGM exporter / GFD / MIG manager
  image tags (rules O001, O004).
- CUDA version -> minimum Linux driver (rule O002).
- vLLM releases: pinned torch, Python range, engine generation (V0/V1) and, where verified, the
  CUDA version of the official ``vllm/vllm-openai`` image (rules O002, R004, V010).
- KubeRay releases: the oldest supported Ray, the behaviour KubeRay gates on ``rayVersion`` and
  the probes it injects into Ray containers (rules R004, R005).
- Ray releases: the vLLM requirement of the ``ray[llm]`` extra (rule R004), and parsing of
  ``rayproject/ray-llm`` image tags; Ray release ranges with a defect that breaks Ray on
  KubeRay (rule R004).

Every entry carries ``sources`` (at least one URL). Lookups never guess: an unknown version returns
``None`` and the caller reports "not evaluated".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from datetime import date
from importlib import resources
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpustrata.catalog.packaged import (
    CatalogError,
    catalog_yaml,
    packaged_document,
    packaged_text,
)
from gpustrata.core.versions import compare_versions as _cmp
from gpustrata.core.versions import pad_version as _pad
from gpustrata.core.versions import parse_version, version_satisfies

__all__ = [
    "CompatCatalog",
    "CompatCatalogError",
    "ComponentImage",
    "CudaUpdate",
    "DriverRequirement",
    "GpuOperatorRelease",
    "ImageDriverBranches",
    "KubeRayRelease",
    "KubernetesRange",
    "RayDefect",
    "RayLlmImage",
    "RayRelease",
    "RayVersionGate",
    "VllmRelease",
    "load_compat_catalog",
    "version_satisfies",
]

_DATA_PACKAGE = "gpustrata.catalog"
_DATA_DIR = "data"
_DATA_GLOB_PREFIX = "compat-"


class CompatCatalogError(CatalogError):
    """A compatibility data file is unreadable or an entry in it is invalid.

    The message names the file and the entry (table and version) so the data can be fixed.
    """


_Sources = Field(
    min_length=1,
    description="Where each fact in this entry was read (URLs, or repo/path@tag). At least one.",
)


class _Model(BaseModel):
    """Base for catalogue models: unknown keys are rejected and entries are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_version_text(value: str) -> str:
    parse_version(value)
    return value


class KubernetesRange(_Model):
    """An inclusive range of Kubernetes minor versions (``"1.29"`` .. ``"1.33"``)."""

    min: str = Field(description="Oldest supported Kubernetes minor, e.g. '1.29'.")
    max: str = Field(description="Newest supported Kubernetes minor, e.g. '1.33' (inclusive).")

    _v_min = field_validator("min", "max")(_check_version_text)

    def supports(self, kubernetes_version: str) -> bool:
        """Return whether a Kubernetes version (``"1.31"``, ``"v1.31.4"``, ``"1.31.4-eks-..."``)
        falls in this range; only major and minor are compared."""
        v = _pad(parse_version(kubernetes_version), 2)[:2]
        return _pad(parse_version(self.min), 2)[:2] <= v <= _pad(parse_version(self.max), 2)[:2]


class ComponentImage(_Model):
    """A container image a GPU Operator release deploys by default."""

    repository: str = Field(description="Registry path, e.g. 'nvcr.io/nvidia/k8s'.")
    image: str = Field(description="Image name, e.g. 'container-toolkit'.")
    tag: str = Field(
        description="Default tag exactly as in the chart values, e.g. 'v1.17.8-ubuntu20.04'."
    )
    version: str = Field(
        description="The component version in the tag without 'v' and distro suffix, e.g. '1.17.8'."
    )

    _v_version = field_validator("version")(_check_version_text)


class DriverImage(_Model):
    """Where the operator-managed driver container comes from."""

    repository: str = Field(description="Registry path of the driver image, e.g. 'nvcr.io/nvidia'.")
    image: str = Field(description="Driver image name, e.g. 'driver'.")


class GpuOperatorRelease(_Model):
    """One NVIDIA GPU Operator release (Helm chart ``nvidia/gpu-operator``)."""

    version: str = Field(description="Release tag, e.g. 'v25.3.0'.")
    helm_chart_version: str = Field(description="Helm chart version to pin, e.g. 'v25.3.0'.")
    released: date = Field(description="Date of the release tag commit.")
    kubernetes: KubernetesRange = Field(
        description="Kubernetes minors validated with upstream Kubernetes (Ubuntu 22.04 row)."
    )
    eks_kubernetes: KubernetesRange | None = Field(
        default=None, description="Kubernetes minors validated on Amazon EKS, when documented."
    )
    default_driver: str = Field(description="Driver version the chart installs by default.")
    recommended_driver: str | None = Field(
        default=None, description="Driver marked 'recommended' in the component matrix."
    )
    tested_drivers: list[str] = Field(
        min_length=1, description="Driver versions in the component matrix, chart default first."
    )
    driver_image: DriverImage = Field(description="Repository and name of the driver container.")
    container_toolkit: ComponentImage = Field(description="NVIDIA Container Toolkit default image.")
    device_plugin: ComponentImage = Field(description="NVIDIA device plugin default image.")
    dcgm_exporter: ComponentImage = Field(description="DCGM exporter default image.")
    gpu_feature_discovery: ComponentImage = Field(
        description="GPU Feature Discovery default image."
    )
    mig_manager: ComponentImage = Field(description="MIG manager default image.")
    node_feature_discovery_chart: str = Field(
        description="Version of the node-feature-discovery subchart the chart depends on."
    )
    sources: list[str] = _Sources

    _v_versions = field_validator("version", "helm_chart_version", "default_driver")(
        _check_version_text
    )

    @field_validator("tested_drivers")
    @classmethod
    def _default_first(cls, value: list[str]) -> list[str]:
        for v in value:
            parse_version(v)
        return value

    def supports_kubernetes(self, kubernetes_version: str) -> bool:
        """Return whether this release was validated with that Kubernetes version."""
        return self.kubernetes.supports(kubernetes_version)

    def driver_is_tested(self, driver_version: str) -> bool:
        """Return whether ``driver_version`` (e.g. '570.124.06') is in the tested set."""
        want = parse_version(driver_version)
        return any(parse_version(d) == want for d in self.tested_drivers)


class CudaUpdate(_Model):
    """The toolkit driver for one CUDA release (GA or Update N, recorded as X.Y.N)."""

    cuda: str = Field(description="Full CUDA version, e.g. '12.4.1' for CUDA 12.4 Update 1.")
    toolkit_min_driver: str = Field(description="Minimum Linux x86_64 driver from Table 3.")

    _v = field_validator("cuda", "toolkit_min_driver")(_check_version_text)


class ImageDriverBranches(_Model):
    """The driver branches an ``nvidia/cuda`` base image accepts below its CUDA's floor.

    The images declare ``NVIDIA_REQUIRE_CUDA=cuda>=X.Y brand=tesla,driver>=B,driver<B+1 ...``:
    the NVIDIA container runtime starts the container on an older driver of a listed branch
    (any brand but GeForce/Titan), where the CUDA forward-compatibility libraries then carry it.
    """

    cuda: str = Field(description="Full CUDA version of the image, e.g. '12.8.1'.")
    branches: list[str] = Field(
        min_length=1, description="Driver branches listed in NVIDIA_REQUIRE_CUDA, e.g. ['535']."
    )
    sources: list[str] = _Sources

    _v = field_validator("cuda")(_check_version_text)


class DriverRequirement(_Model):
    """Minimum NVIDIA Linux driver for a CUDA ``major.minor`` (and its updates).

    ``toolkit_min_driver`` (the GA release's driver) is the floor rule O002 enforces: images
    declare ``NVIDIA_REQUIRE_CUDA=cuda>=X.Y``, a per-``major.minor`` condition, so a CUDA update
    needs no newer driver than its GA release to start. See the data file header for why the
    minor-version-compatibility floor is not enough for inference images.
    """

    cuda: str = Field(description="CUDA major.minor, e.g. '12.4'.")
    toolkit_min_driver: str = Field(
        description="Toolkit driver of the GA release of this minor (Table 3), e.g. '550.54.14'."
    )
    updates: list[CudaUpdate] = Field(
        min_length=1, description="Toolkit driver per release of this minor (GA and updates)."
    )
    minor_version_compat_min_driver: str = Field(
        description="Lowest driver branch for CUDA minor version compatibility (Table 2)."
    )
    minor_version_compat_max_driver_exclusive: str | None = Field(
        default=None,
        description="Driver branch where the minor-version-compat range ends (Table 2).",
    )
    image_driver_branches: list[ImageDriverBranches] = Field(
        default_factory=list,
        description="Per nvidia/cuda image version of this minor: the driver branches its "
        "NVIDIA_REQUIRE_CUDA accepts through forward compatibility (where read).",
    )
    requested: str | None = Field(
        default=None,
        description="The CUDA version asked for, when it named an update (e.g. '12.4.1').",
    )
    sources: list[str] = _Sources

    _v = field_validator("cuda", "toolkit_min_driver", "minor_version_compat_min_driver")(
        _check_version_text
    )

    @property
    def min_driver(self) -> str:
        """The driver rule O002 requires: the GA toolkit driver of this ``major.minor``.

        The same for every update of the minor: the images' ``NVIDIA_REQUIRE_CUDA`` condition is
        ``cuda>=X.Y`` (a 580.82.07 driver starts a CUDA 13.0.3 image).
        """
        return self.toolkit_min_driver

    def driver_ok(self, driver_version: str) -> bool:
        """Return whether ``driver_version`` meets :attr:`min_driver`."""
        return _cmp(parse_version(driver_version), parse_version(self.min_driver)) >= 0

    def image_branches(self) -> ImageDriverBranches | None:
        """The forward-compatibility branches of the requested image, or None when not read.

        An exact CUDA version match wins; a ``major.minor`` request (a ``cu128`` tag) uses the
        entry of this minor only when there is exactly one, since updates change the list.
        """
        if self.requested is not None:
            want = parse_version(self.requested)
            for entry in self.image_driver_branches:
                if _cmp(parse_version(entry.cuda), want) == 0:
                    return entry
            return None
        return self.image_driver_branches[0] if len(self.image_driver_branches) == 1 else None


class VllmRelease(_Model):
    """One vLLM release as published on PyPI (and, where verified, as ``vllm/vllm-openai``)."""

    version: str = Field(description="Release version without 'v', e.g. '0.8.5.post1'.")
    torch: str = Field(description="Exact torch version the release pins (PyPI metadata).")
    requires_python: str = Field(description="The release's Requires-Python specifier.")
    ray_requirement: str | None = Field(
        default=None,
        description="Unconditional Ray requirement in the wheel metadata, "
        "e.g. 'ray[cgraph]>=2.48.0'.",
    )
    image_cuda: str | None = Field(
        default=None,
        description="CUDA version of the official vllm/vllm-openai image; None when not verified.",
    )
    image_cuda_from: Literal["dockerfile", "release-pipeline"] = Field(
        default="dockerfile",
        description="Where image_cuda was read: the default of docker/Dockerfile's ARG "
        "CUDA_VERSION, or the --build-arg CUDA_VERSION the release's "
        ".buildkite/release-pipeline.yaml passes when it builds the release image (before 0.9).",
    )
    default_engine: Literal["v0", "v1"] = Field(
        description="Engine used when VLLM_USE_V1 is unset ('v1' from 0.8.0)."
    )
    v0_engine_available: bool = Field(
        description="Whether the V0 engine still exists (removed in 0.11.0)."
    )
    notes: list[str] = Field(default_factory=list, description="Other facts rules may cite.")
    sources: list[str] = _Sources

    _v = field_validator("version", "torch")(_check_version_text)


class RayVersionGate(_Model):
    """Behaviour a KubeRay release switches on the RayCluster's ``rayVersion``."""

    name: str = Field(description="Short id of the behaviour, e.g. 'token-auth'.")
    min_ray: str = Field(description="Oldest Ray version for which KubeRay enables/accepts it.")
    description: str = Field(description="What changes at this boundary.")
    source: str = Field(description="Where the gate is implemented or documented.")

    _v = field_validator("min_ray")(_check_version_text)


class KubeRayRelease(_Model):
    """One KubeRay operator release."""

    version: str = Field(description="Release tag, e.g. 'v1.4.2'.")
    released: date = Field(description="Date of the release tag commit.")
    min_ray: str | None = Field(
        default=None,
        description="Oldest Ray version KubeRay documents as supported; None when not documented.",
    )
    unhealthy_thresholds_honoured: bool = Field(
        description="Whether RayService serviceUnhealthySecondThreshold/"
        "deploymentUnhealthySecondThreshold have any effect (kuberay#1685)."
    )
    shm_skipped_with_plasma_directory: bool = Field(
        default=False,
        description="Whether KubeRay skips its memory-backed /dev/shm injection into Ray "
        "containers whose rayStartParams set plasma-directory (ray-operator "
        "controllers/ray/common/pod.go, from v1.6.0).",
    )
    agent_probes: Literal["every-ray-container", "gcs-ft-only"] = Field(
        description="Which Ray containers that set no probe of their own get KubeRay's liveness "
        "and readiness probes, which ask the Ray dashboard agent (port 52365) for the Raylet's "
        "health: every one (from v1.1.0, kuberay#1674, unless the operator's "
        "ENABLE_PROBES_INJECTION is false) or only with GCS fault tolerance (v1.0.0); "
        "controllers/ray/common/pod.go at the tag."
    )
    ray_version_gates: list[RayVersionGate] = Field(
        default_factory=list, description="Behaviour gated on rayVersion in this release."
    )
    notes: list[str] = Field(default_factory=list, description="Other facts rules may cite.")
    sources: list[str] = _Sources

    _v = field_validator("version")(_check_version_text)

    def supports_ray(self, ray_version: str) -> bool | None:
        """Return whether that Ray version is supported; None when the minimum is undocumented."""
        if self.min_ray is None:
            return None
        return _cmp(parse_version(ray_version), parse_version(self.min_ray)) >= 0

    def gates_crossed(self, ray_a: str, ray_b: str) -> list[RayVersionGate]:
        """Gates whose boundary lies between two Ray versions (one enables it, the other not)."""
        a, b = parse_version(ray_a), parse_version(ray_b)
        out = []
        for g in self.ray_version_gates:
            m = parse_version(g.min_ray)
            if (_cmp(a, m) >= 0) != (_cmp(b, m) >= 0):
                out.append(g)
        return out


class RayRelease(_Model):
    """One Ray release and the vLLM its ``llm`` extra (Ray Serve LLM / Ray Data LLM) requires."""

    version: str = Field(description="Ray version, e.g. '2.46.0'.")
    requires_python: str = Field(description="The release's Requires-Python specifier.")
    vllm_requirement: str | None = Field(
        default=None,
        description="Specifier of vllm in the 'llm' extra, e.g. '>=0.8.5' or '==0.22.0'; "
        "None for releases without the extra.",
    )
    notes: list[str] = Field(default_factory=list, description="Other facts rules may cite.")
    sources: list[str] = _Sources

    _v = field_validator("version")(_check_version_text)

    def supports_vllm(self, vllm_version: str) -> bool | None:
        """Return whether that vLLM satisfies the ``llm`` extra; None when there is no extra."""
        if self.vllm_requirement is None:
            return None
        return version_satisfies(vllm_version, self.vllm_requirement)

    @property
    def pinned_vllm(self) -> str | None:
        """The exact vLLM version when the extra pins one with ``==``, else None."""
        req = self.vllm_requirement
        if req is not None and req.startswith("==") and "," not in req and "*" not in req:
            return req[2:].strip()
        return None

    @property
    def lowest_vllm(self) -> str | None:
        """The lowest vLLM the extra accepts when it is a lower bound alone (``>=0.9.2``),
        else None. Ray raises this bound in the same change that recompiles the
        ``ray-llm`` image's lock file, so it is the release the image is taken to run
        (assumed: the lock itself is not catalogued)."""
        req = self.vllm_requirement
        if req is not None and req.startswith(">=") and "," not in req and "*" not in req:
            return req[2:].strip()
        return None


class RayDefect(_Model):
    """A range of Ray releases with a defect that breaks Ray on KubeRay (Ray's own KubeRay
    guide says not to use them)."""

    name: str = Field(description="Short id, e.g. 'dashboard-agent-hang'.")
    first_ray: str = Field(description="First Ray release with the defect.")
    fixed_ray: str = Field(description="First Ray release without it.")
    breaks: str = Field(description="What fails, and when.")
    sources: list[str] = _Sources

    _v = field_validator("first_ray", "fixed_ray")(_check_version_text)

    def affects(self, ray_version: str) -> bool:
        """Whether Ray *ray_version* lies in ``[first_ray, fixed_ray)``; False when unreadable."""
        try:
            v = parse_version(ray_version)
        except ValueError:
            return False
        lo, hi = parse_version(self.first_ray), parse_version(self.fixed_ray)
        return _cmp(v, lo) >= 0 and _cmp(v, hi) < 0


class RayLlmImage(_Model):
    """What a ``rayproject/ray-llm`` image tag says, plus the catalogue's Ray facts."""

    tag: str = Field(description="The tag as given, e.g. '2.46.0-py311-cu124'.")
    ray: str = Field(description="Ray version in the tag.")
    python: str | None = Field(default=None, description="Python major.minor from 'pyNNN'.")
    cuda: str | None = Field(default=None, description="CUDA major.minor from 'cuNNN'.")
    vllm: str | None = Field(
        default=None,
        description="The vLLM the image runs: the exact pin of that Ray release, else the "
        "lowest release its lower bound accepts (then vllm_assumed).",
    )
    vllm_assumed: bool = Field(
        default=False,
        description="vllm is the lower bound of the Ray release's requirement (the image's "
        "lock file, which pins the exact release, is not catalogued), not an exact pin.",
    )
    vllm_requirement: str | None = Field(
        default=None, description="vLLM specifier of that Ray release's 'llm' extra, if known."
    )
    sources: list[str] = _Sources


_RAY_LLM_TAG = re.compile(
    r"^(?:ray-)?(?P<ray>\d+\.\d+\.\d+)(?:\.post\d+)?"
    r"(?:-py(?P<py>\d)(?P<pyminor>\d{1,2}))?"
    r"(?:-cu(?P<cu>\d{3}))?"
    r"(?:-(?P<rest>[A-Za-z0-9_.-]+))?$"
)


class KarpenterRelease(_Model):
    """One Karpenter (aws/karpenter-provider-aws) release: its chart and CRD API."""

    version: str = Field(description="Chart version (the release tag without 'v'), e.g. '1.14.1'.")
    released: date = Field(description="Date of the release commit.")
    chart: str = Field(description="OCI chart reference Helm installs it from.")
    kubernetes: KubernetesRange = Field(
        description="Kubernetes minors the upstream compatibility matrix lists for it."
    )
    api_versions: list[str] = Field(
        min_length=1, description="NodePool/EC2NodeClass API versions its CRDs serve."
    )
    sources: list[str] = _Sources

    _v = field_validator("version")(_check_version_text)


def _cuda_from_tag(code: str) -> str:
    # 'cu124' -> '12.4', 'cu128' -> '12.8', 'cu130' -> '13.0' (last digit is the minor).
    return f"{int(code[:-1])}.{int(code[-1])}"


class _Released(Protocol):
    @property
    def version(self) -> str: ...


_R = TypeVar("_R", bound=_Released)


class _ByRelease(Generic[_R]):
    """One project's catalogued releases, found by their first three version parts
    (``v1.4.2`` and ``1.4.2`` are one release, ``1.4`` is ``1.4.0``)."""

    def __init__(self, releases: Iterable[_R]) -> None:
        self._rows = {_key(r.version, 3): r for r in releases}

    def get(self, version: str) -> _R | None:
        """The release *version* names, or None (not catalogued, or not a version)."""
        return self._rows.get(_key_or_none(version, 3) or ())

    def newest_first(self) -> list[_R]:
        """Every release, newest first."""
        return [self._rows[k] for k in sorted(self._rows, reverse=True)]


class CompatCatalog:
    """Read-only view of the compatibility tables with tolerant version lookups."""

    def __init__(
        self,
        gpu_operator_releases: Iterable[GpuOperatorRelease],
        cuda_driver_requirements: Iterable[DriverRequirement],
        vllm_releases: Iterable[VllmRelease],
        kuberay_releases: Iterable[KubeRayRelease],
        ray_releases: Iterable[RayRelease],
        karpenter_releases: Iterable[KarpenterRelease] = (),
        ray_defects: Iterable[RayDefect] = (),
    ) -> None:
        """Build the catalogue from validated entries (see :func:`load_compat_catalog`)."""
        self._gpu_operator = _ByRelease(gpu_operator_releases)
        self._cuda = {_key(r.cuda, 2): r for r in cuda_driver_requirements}
        self._vllm = {parse_version(r.version): r for r in vllm_releases}
        self._kuberay = _ByRelease(kuberay_releases)
        self._ray = _ByRelease(ray_releases)
        self._karpenter = _ByRelease(karpenter_releases)
        self._ray_defects = tuple(ray_defects)

    def gpu_operator(self, version: str) -> GpuOperatorRelease | None:
        """The GPU Operator release for ``'v25.3.0'``/``'25.3.0'``, or None if not catalogued."""
        return self._gpu_operator.get(version)

    def gpu_operator_releases(self) -> list[GpuOperatorRelease]:
        """All catalogued GPU Operator releases, newest first."""
        return self._gpu_operator.newest_first()

    def min_driver_for_cuda(self, cuda: str) -> DriverRequirement | None:
        """Driver requirement for ``'12.4'`` or ``'12.4.1'`` (also ``'cu124'``, ``'12.4.1-...'``).

        The returned object's :attr:`DriverRequirement.min_driver` is the GA toolkit driver of the
        minor (``requested`` keeps the update asked for); ``None`` when the minor is not
        catalogued.
        """
        text = cuda.strip()
        m = re.fullmatch(r"cu(\d{3})", text)
        if m is not None:
            text = _cuda_from_tag(m.group(1))
        try:
            full = parse_version(text)
        except ValueError:
            return None
        if len(full) < 2:
            return None
        req = self._cuda.get(full[:2])
        if req is None:
            return None
        if len(full) >= 3:
            return req.model_copy(update={"requested": ".".join(str(p) for p in full[:3])})
        return req

    def vllm(self, version: str) -> VllmRelease | None:
        """The vLLM release for ``'vX.Y.Z'``, ``'X.Y.Z'``, ``'X.Y.Z.post1'`` or ``'X.Y.Z+cu128'``.

        An exact match (including ``.postN``) wins; a ``.postN`` that is not catalogued falls back
        to its base release, and a base release that is not catalogued falls back to a catalogued
        ``.postN`` of it (the newest), since post releases do not change pins in practice.
        """
        key = _key_or_none(version, None)
        if key is None:
            return None
        if key in self._vllm:
            return self._vllm[key]
        base = _pad(key, 3)[:3]
        if _pad(key, 3) != base or len(key) > 3:
            hit = self._vllm.get(base) or self._vllm.get(_trim(base))
            if hit is not None:
                return hit
        posts = [k for k in self._vllm if _pad(k, 3)[:3] == base and len(k) > 3]
        if posts:
            return self._vllm[max(posts)]
        return None

    def vllm_releases(self) -> list[VllmRelease]:
        """All catalogued vLLM releases, newest first."""
        return [self._vllm[k] for k in sorted(self._vllm, reverse=True)]

    def kuberay(self, version: str) -> KubeRayRelease | None:
        """The KubeRay release for ``'v1.4.2'``/``'1.4.2'``, or None if not catalogued."""
        return self._kuberay.get(version)

    def kuberay_releases(self) -> list[KubeRayRelease]:
        """All catalogued KubeRay releases, newest first."""
        return self._kuberay.newest_first()

    def karpenter(self, version: str) -> KarpenterRelease | None:
        """The Karpenter release for ``'1.14.1'``/``'v1.14.1'``, or None if not catalogued."""
        return self._karpenter.get(version)

    def karpenter_releases(self) -> list[KarpenterRelease]:
        """All catalogued Karpenter releases, newest first."""
        return self._karpenter.newest_first()

    def ray(self, version: str) -> RayRelease | None:
        """The Ray release for ``'2.46.0'`` (also ``'v2.46.0'``, ``'2.46'``), or None."""
        return self._ray.get(version)

    def ray_releases(self) -> list[RayRelease]:
        """All catalogued Ray releases, newest first."""
        return self._ray.newest_first()

    def ray_defects(self, version: str) -> list[RayDefect]:
        """The catalogued defects of Ray *version* (``'2.24.0'``); empty when none or
        unreadable."""
        return [d for d in self._ray_defects if d.affects(version)]

    def all_ray_defects(self) -> list[RayDefect]:
        """Every catalogued Ray defect range, in file order."""
        return list(self._ray_defects)

    def ray_llm_image(self, tag: str) -> RayLlmImage | None:
        """Parse a ``rayproject/ray-llm`` tag such as ``'ray-2.48.0-py311-cu128'``.

        The tag may carry the image name (``'rayproject/ray-llm:2.46.0-py311-cu124'``). Ray,
        Python and CUDA come from the tag; the vLLM requirement comes from the catalogued Ray
        release. Returns None when the tag does not start with a Ray version or the Ray release is
        not catalogued.
        """
        text = tag.strip()
        if ":" in text:
            text = text.rsplit(":", 1)[1]
        text = text.split("@", 1)[0]
        m = _RAY_LLM_TAG.match(text)
        if m is None:
            return None
        ray_release = self.ray(m.group("ray"))
        if ray_release is None:
            return None
        python = f"{m.group('py')}.{int(m.group('pyminor'))}" if m.group("py") else None
        cuda = _cuda_from_tag(m.group("cu")) if m.group("cu") else None
        return RayLlmImage(
            tag=tag,
            ray=m.group("ray"),
            python=python,
            cuda=cuda,
            vllm=ray_release.pinned_vllm or ray_release.lowest_vllm,
            vllm_assumed=ray_release.pinned_vllm is None and ray_release.lowest_vllm is not None,
            vllm_requirement=ray_release.vllm_requirement,
            sources=list(ray_release.sources),
        )


def _key(version: str, width: int | None) -> tuple[int, ...]:
    v = parse_version(version)
    return v if width is None else _pad(v, width)[:width]


def _key_or_none(version: str, width: int | None) -> tuple[int, ...] | None:
    try:
        return _key(version, width)
    except ValueError:
        return None


def _trim(v: tuple[int, ...]) -> tuple[int, ...]:
    while len(v) > 1 and v[-1] == 0:
        v = v[:-1]
    return v


_TABLES: dict[str, tuple[str, type[_Model], str]] = {
    "gpu_operator_releases": ("gpu_operator_releases", GpuOperatorRelease, "version"),
    "cuda_driver_requirements": ("cuda_driver_requirements", DriverRequirement, "cuda"),
    "vllm_releases": ("vllm_releases", VllmRelease, "version"),
    "kuberay_releases": ("kuberay_releases", KubeRayRelease, "version"),
    "ray_releases": ("ray_releases", RayRelease, "version"),
    "karpenter_releases": ("karpenter_releases", KarpenterRelease, "version"),
    "ray_defects": ("ray_defects", RayDefect, "first_ray"),
}


def _entry_label(raw: Any, key_field: str, index: int) -> str:
    if isinstance(raw, dict) and key_field in raw:
        return f"{key_field}={raw[key_field]!r}"
    return f"#{index}"


def _parse_documents(
    documents: Iterable[tuple[str, str]],
) -> dict[str, list[Any]]:
    return _tables((filename, _yaml(filename, text)) for filename, text in documents)


def _yaml(filename: str, text: str) -> Any:
    return catalog_yaml(text, filename, CompatCatalogError)


def _tables(documents: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """The validated tables of parsed ``(filename, document)`` pairs."""
    tables: dict[str, list[Any]] = {name: [] for name in _TABLES}
    seen: dict[tuple[str, tuple[int, ...]], str] = {}
    for filename, data in documents:
        if data is None:
            continue
        if not isinstance(data, dict):
            raise CompatCatalogError(f"{filename}: top level must be a mapping of table names")
        for table, rows in data.items():
            if table not in _TABLES:
                raise CompatCatalogError(
                    f"{filename}: unknown table {table!r}; expected one of {sorted(_TABLES)}"
                )
            if not isinstance(rows, list):
                raise CompatCatalogError(f"{filename}: {table} must be a list of entries")
            _, model, key_field = _TABLES[table]
            for i, raw in enumerate(rows):
                label = _entry_label(raw, key_field, i)
                try:
                    entry = model.model_validate(raw)
                except (ValidationError, ValueError) as exc:
                    raise CompatCatalogError(
                        f"{filename}: {table} entry {label} is invalid: {exc}"
                    ) from exc
                key = (table, parse_version(str(getattr(entry, key_field))))
                if key in seen:
                    raise CompatCatalogError(
                        f"{filename}: {table} entry {label} duplicates one in {seen[key]}"
                    )
                seen[key] = filename
                tables[table].append(entry)
    return tables


def catalog_from_documents(documents: Iterable[tuple[str, str]]) -> CompatCatalog:
    """Build a catalogue from ``(filename, yaml_text)`` pairs; raises :class:`CompatCatalogError`.

    Each document is a mapping whose keys are table names (``gpu_operator_releases``,
    ``cuda_driver_requirements``, ``vllm_releases``, ``kuberay_releases``, ``ray_releases``,
    ``karpenter_releases``, ``ray_defects``) and whose values are lists of entries. Used by
    :func:`load_compat_catalog` and by tests.
    """
    return CompatCatalog(**_parse_documents(documents))


def _packaged_names() -> list[str]:
    """The packaged ``compat-*.yaml`` files (``data/compat-cuda.yaml``), sorted by name."""
    root = resources.files(_DATA_PACKAGE).joinpath(_DATA_DIR)
    names = [
        f"{_DATA_DIR}/{item.name}"
        for item in sorted(root.iterdir(), key=lambda p: p.name)
        if item.name.startswith(_DATA_GLOB_PREFIX) and item.name.endswith(".yaml")
    ]
    if not names:
        raise CompatCatalogError(
            f"no {_DATA_DIR}/{_DATA_GLOB_PREFIX}*.yaml found in {_DATA_PACKAGE}"
        )
    return names


def packaged_documents() -> list[tuple[str, str]]:
    """The packaged ``compat-*.yaml`` files as ``(name, text)`` pairs, sorted by name."""
    return [(name, packaged_text(name)) for name in _packaged_names()]


@functools.cache
def load_compat_catalog() -> CompatCatalog:
    """Load and validate the packaged compatibility catalogue (cached for the process),
    each file from its prebuilt cache when current (:mod:`.packaged`)."""
    try:
        documents = [(name, packaged_document(name)) for name in _packaged_names()]
    except CatalogError as exc:
        raise CompatCatalogError(str(exc)) from exc
    return CompatCatalog(**_tables(documents))
