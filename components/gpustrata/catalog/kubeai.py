"""KubeAI's Helm chart defaults per chart release (``data/kubeai-defaults.yaml``).

KubeAI builds a vLLM ``Model``'s Pod from the installation's ``resourceProfiles`` (the
profile the Model names as ``NAME:COUNT``: requests and limits times COUNT, node selector,
affinity, tolerations, runtime class) and ``modelServers.VLLM.images`` (by the profile's
``imageName``, else ``default``), as :data:`KUBEAI_APPLY_SOURCE` does. The chart's
``values.yaml`` gives both; what it holds changes with the release (the vLLM image with
almost every one), so the facts are keyed by chart release (``versions.kubeai`` in the
cluster profile); :func:`defining` gives the releases whose defaults hold a profile.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpustrata.catalog.packaged import packaged_mapping, per_release
from gpustrata.core.helmmerge import merge_helm_values

__all__ = [
    "KUBEAI_APPLY_SOURCE",
    "KubeAIDefaults",
    "defining",
    "kubeai_defaults",
    "kubeai_releases",
]

KUBEAI_APPLY_SOURCE = "substratusai/kubeai@v0.21.0:internal/modelcontroller/model_controller.go"
"""``getModelConfig``: the profile's requests and limits multiplied by the Model's
``NAME:COUNT`` multiple; ``lookupServerImage``: ``spec.image``, else the engine's image named
by the profile's ``imageName``, else ``default``."""


@dataclass(frozen=True, slots=True)
class KubeAIDefaults:
    """The defaults of one KubeAI chart release."""

    release: str
    """The chart release (``0.21.0``, tag ``helm-chart-kubeai-0.21.0``)."""
    source: str
    """``substratusai/kubeai@helm-chart-kubeai-0.21.0:charts/kubeai/values.yaml``."""
    vllm_images: Mapping[str, str]
    """``modelServers.VLLM.images``: image name -> image reference."""
    resource_profiles: Mapping[str, Mapping[str, Any]]
    """``resourceProfiles``: name -> the fields KubeAI applies (``imageName``, ``requests``,
    ``limits``, ``nodeSelector``, ``affinity``, ``tolerations``, ``runtimeClassName``)."""
    overlays: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The chart's own values files beside ``values.yaml`` (``values-gke.yaml``): file ->
    its ``vllm_images`` and ``resource_profiles`` facts, applied with :meth:`with_overlays`."""
    applied: tuple[str, ...] = ()
    """The overlays merged into this object, in order."""

    def with_overlays(self, names: Sequence[str]) -> KubeAIDefaults | None:
        """These defaults with the chart's values files *names* merged over them in order,
        as Helm coalesces a values file over the chart's (maps key by key, anything else
        replaced, ``null`` removes a key: :func:`merge_helm_values`); None when this
        release's chart has no file of one of those names."""
        images: Any = dict(self.vllm_images)
        profiles: Any = dict(self.resource_profiles)
        for name in names:
            over = self.overlays.get(name)
            if over is None:
                return None
            images = merge_helm_values(images, over.get("vllm_images", {}), null_removes=True)
            profiles = merge_helm_values(
                profiles, over.get("resource_profiles", {}), null_removes=True
            )
        source = " + ".join([self.source, *names])
        return replace(
            self,
            source=source,
            vllm_images=images,
            resource_profiles=profiles,
            applied=(*self.applied, *names),
        )

    def vllm_image(self, profile: str) -> str | None:
        """The vLLM image KubeAI runs for a Model on *profile* without ``spec.image``; None
        when the profile is not among the defaults."""
        found = self.resource_profiles.get(profile)
        if found is None:
            return None
        name = found.get("imageName") or "default"
        return self.vllm_images.get(str(name)) or self.vllm_images.get("default")


_PATH = "data/kubeai-defaults.yaml"


@functools.cache
def _catalogue() -> dict[str, KubeAIDefaults]:
    source = str(packaged_mapping(_PATH)["source"])
    return per_release(
        _PATH,
        "kubeai",
        lambda row, release: KubeAIDefaults(
            release,
            source.format(release=release),
            dict(row["vllm_images"]),
            dict(row["resource_profiles"]),
            dict(row.get("overlays") or {}),
        ),
    )


def kubeai_releases() -> tuple[str, ...]:
    """The KubeAI chart releases whose defaults are catalogued, oldest first."""
    return tuple(_catalogue())


def kubeai_defaults(release: str) -> KubeAIDefaults | None:
    """The defaults of KubeAI chart *release* (``0.21.0`` or ``v0.21.0``); None when that
    release is not catalogued."""
    return _catalogue().get(release.removeprefix("v"))


def defining(profile: str) -> tuple[KubeAIDefaults, ...]:
    """The catalogued chart releases whose default values define the resource profile
    *profile* (``nvidia-gpu-h100``), oldest first: on the others KubeAI refuses a Model that
    names it (``resource profile not found``)."""
    return tuple(d for d in _catalogue().values() if profile in d.resource_profiles)
