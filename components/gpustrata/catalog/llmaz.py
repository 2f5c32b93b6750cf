"""llmaz's vLLM BackendRuntime per llmaz release (``data/llmaz-defaults.yaml``).

llmaz builds a Playground's Pod from a BackendRuntime (``backendRuntimeConfig.backendName``,
``vllm`` by default) that its Helm chart installs: the image (``image:version``, the
Playground's ``backendRuntimeConfig.version`` replacing ``version``:
:data:`LLMAZ_IMAGE_SOURCE`), the command, the recommended config's args, ``/dev/shm`` and
resources, and the probes. What the chart installs changes with the release (the vLLM image
tag at 0.1.2), so the facts are keyed by llmaz release (``versions.llmaz`` in the cluster
profile); from 0.1.2 the image is a chart value an installation may override.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.packaged import packaged_mapping, per_release

__all__ = ["LLMAZ_IMAGE_SOURCE", "LlmazBackend", "llmaz_backend", "llmaz_backends"]

LLMAZ_IMAGE_SOURCE = "InftyAI/llmaz@v0.1.4:pkg/controller/inference/playground_controller.go"
"""``buildTemplate``: the container image is the BackendRuntime's ``image`` + ``:`` + its
``version``, or the Playground's ``backendRuntimeConfig.version`` where it states one
(``pkg/controller_helper/backendruntime/backendruntime.go`` ``Image``)."""


@dataclass(frozen=True, slots=True)
class LlmazBackend:
    """The vLLM BackendRuntime the chart of one llmaz release installs."""

    release: str
    """The llmaz release (``0.1.4``, tag ``v0.1.4``)."""
    source: str
    """``InftyAI/llmaz@v0.1.4:chart/templates/backends/vllm.yaml``."""
    repository: str
    """The image repository (``vllm/vllm-openai``)."""
    version: str
    """The image tag the BackendRuntime runs unless a Playground names another (``v0.7.3``)."""
    command: tuple[str, ...]
    """The container command."""
    configs: Mapping[str, Mapping[str, Any]]
    """Recommended config name -> its ``args`` (llmaz's ``{{ .ModelPath }}`` placeholders
    kept), ``sharedMemorySize`` and ``resources`` where the release has them."""
    probes: Mapping[str, Any]
    """``startupProbe``, ``livenessProbe``, ``readinessProbe`` where the release has them."""

    def image(self, version: str | None = None) -> str:
        """The image a Playground runs: ``repository:version``, its own *version* (its
        ``backendRuntimeConfig.version``) where it states one."""
        return f"{self.repository}:{version or self.version}"


_PATH = "data/llmaz-defaults.yaml"


@functools.cache
def _catalogue() -> dict[str, LlmazBackend]:
    source = str(packaged_mapping(_PATH)["source"])
    return per_release(
        _PATH,
        "llmaz",
        lambda row, release: LlmazBackend(
            release,
            source.format(release=release, path="chart/templates/backends/vllm.yaml"),
            str(row["image"]["repository"]),
            str(row["image"]["version"]),
            tuple(map(str, row["command"])),
            dict(row["configs"]),
            dict(row["probes"]),
        ),
    )


def llmaz_backends() -> Sequence[LlmazBackend]:
    """Every catalogued llmaz release's vLLM BackendRuntime, oldest first."""
    return tuple(_catalogue().values())


def llmaz_backend(release: str) -> LlmazBackend | None:
    """The vLLM BackendRuntime of llmaz *release* (``0.1.4`` or ``v0.1.4``); None when that
    release is not catalogued."""
    return _catalogue().get(release.removeprefix("v"))
