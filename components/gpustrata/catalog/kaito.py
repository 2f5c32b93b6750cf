"""What the KAITO controller decides for a preset Workspace or InferenceSet, per KAITO
release (``data/kaito-presets.yaml``, written by ``tools/kaito_presets.py``).

A preset Workspace states the model by preset name and the nodes by instance type; the
controller picks the rest: the image every vLLM preset runs (``kaito-base``, so the vLLM
release), the preset's Hugging Face model and revision, ``--tensor-parallel-size`` from the
instance type's GPU count, ``--gpu-memory-utilization`` and, from v0.7.0, the node count
(its estimator, ``resource.count`` deprecated). Those facts change with the release, so they
are keyed by it (``versions.kaito`` in the cluster profile); :func:`defining` gives the
releases whose presets hold a name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.packaged import packaged_mapping, per_release

__all__ = ["KaitoPreset", "KaitoRelease", "defining", "kaito_release", "kaito_releases"]


@dataclass(frozen=True, slots=True)
class KaitoPreset:
    """One preset's model, as a release's ``supported_models.yaml`` names it."""

    model: str
    """The Hugging Face repository (``meta-llama/Llama-3.3-70B-Instruct``)."""
    revision: str
    """The commit KAITO pins (``--code-revision``)."""


@dataclass(frozen=True, slots=True)
class KaitoRelease:
    """The facts of one KAITO release."""

    release: str
    """``0.12.0`` (tag ``v0.12.0``)."""
    source: str
    """``kaito-project/kaito@v0.12.0 (files read)``."""
    base_image: str
    """The image every vLLM preset runs (``mcr.microsoft.com/aks/kaito/kaito-base:0.5.0``)."""
    vllm: str
    """The vLLM release that image installs (the ``requirements.txt`` pin)."""
    parallelism: str
    """``all-gpus`` (``--tensor-parallel-size`` = the instance type's GPU count) or
    ``data-parallel-when-fits`` (1, with ``--data-parallel-size`` = the GPU count, when the
    model's files take under half of one GPU's memory; else the GPU count)."""
    node_count: str
    """``resource.count`` or ``estimated`` (the controller's node estimator decides)."""
    gpu_memory_utilization: str | None
    """The ``--gpu-memory-utilization`` KAITO passes; None: computed from the GPU."""
    gpu_memory_utilization_by_gpu: Mapping[str, str]
    """Its overrides by GPU model name (``NVIDIA A10`` -> ``0.82``)."""
    presets: Mapping[str, KaitoPreset]
    """Preset name -> its model."""
    served: Mapping[str, tuple[str, ...]]
    """Kind (``Workspace``, ``InferenceSet``) -> the API versions its CRD serves."""

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether this release serves *kind* at *api_version* (``kaito.sh/v1beta1``)."""
        group, _, version = api_version.rpartition("/")
        return group == "kaito.sh" and version in self.served.get(kind, ())


_PATH = "data/kaito-presets.yaml"


@functools.cache
def _catalogue() -> dict[str, KaitoRelease]:
    doc = packaged_mapping(_PATH)
    source = str(doc["source"])
    # files by their name, a folder (config/crd/bases) whole
    paths = [p.rsplit("/", 1)[-1] if "." in p else p for p in map(str, doc["paths"])]

    def build(row: Mapping[str, Any], release: str) -> KaitoRelease:
        gmu = row.get("gpu_memory_utilization")
        return KaitoRelease(
            release,
            f"{source.format(release=release, path='').rstrip(':')} ({', '.join(paths)})",
            str(row["base_image"]),
            str(row["vllm"]),
            str(row["parallelism"]),
            str(row["node_count"]),
            str(gmu) if gmu is not None else None,
            {str(k): str(v) for k, v in (row.get("gpu_memory_utilization_by_gpu") or {}).items()},
            {
                str(name): KaitoPreset(str(p["model"]), str(p["revision"]))
                for name, p in (row.get("presets") or {}).items()
            },
            {str(k): tuple(map(str, v)) for k, v in (row.get("served") or {}).items()},
        )

    return per_release(_PATH, "kaito", build)


def kaito_releases() -> tuple[str, ...]:
    """The KAITO releases whose preset facts are catalogued, oldest first."""
    return tuple(_catalogue())


def kaito_release(release: str) -> KaitoRelease | None:
    """The facts of KAITO *release* (``0.12.0`` or ``v0.12.0``); None when not catalogued."""
    return _catalogue().get(release.removeprefix("v"))


def defining(
    preset: str, api_version: str | None = None, kind: str | None = None
) -> tuple[KaitoRelease, ...]:
    """The catalogued releases whose presets include *preset* (``llama-3.3-70b-instruct``)
    and, given *api_version* and *kind*, that serve that kind at that version, oldest first:
    the others reject such an object."""
    return tuple(
        r
        for r in _catalogue().values()
        if preset in r.presets and (kind is None or r.serves(api_version or "", kind))
    )
