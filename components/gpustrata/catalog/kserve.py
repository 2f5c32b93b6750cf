"""KServe's well-known LLMInferenceServiceConfig presets per release (``data/kserve-presets.yaml``).

The KServe controller builds an LLMInferenceService's Pods from presets it ships
(``config/llmisvcconfig/``) merged under the service's own spec: the single-node template,
the data-parallel worker, the P/D prefill and decode templates. Which preset applies
follows the spec's shape (``combineBaseRefsConfig``); what each holds changes with every
release (the image, the probes, the ``/dev/shm`` size), so the facts are keyed by release
and are read only where the cluster profile states ``versions.kserve``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.packaged import per_release

__all__ = ["KSERVE_SELECTION_SOURCE", "KServePreset", "kserve_preset", "kserve_releases"]

KSERVE_SELECTION_SOURCE = "kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/config_merge.go"
"""``combineBaseRefsConfig``: the well-known presets first (single-node template, or the
data-parallel worker preset when ``spec.worker`` is set; with ``spec.prefill``, the prefill and
decode presets), then the service's own ``baseRefs``, then its spec, merged in that order."""


@dataclass(frozen=True, slots=True)
class KServePreset:
    """One well-known LLMInferenceServiceConfig of one KServe release."""

    name: str
    """Its name as KServe installs it (``kserve-config-llm-template``)."""
    source: str
    """``kserve/kserve@TAG:config/llmisvcconfig/<file>``."""
    parts: Mapping[str, Mapping[str, Any]]
    """Partial Pod specs by part of the service's spec (``template``, ``worker``,
    ``prefill.template``, ``prefill.worker``): the ``main`` container's image, ports, probes
    and emptyDir mounts, those volumes, terminationGracePeriodSeconds."""


@functools.cache
def _catalogue() -> dict[str, dict[str, KServePreset]]:
    return per_release(
        "data/kserve-presets.yaml",
        "kserve",
        lambda row, _: {
            str(p["name"]): KServePreset(str(p["name"]), str(p["source"]), dict(p["parts"]))
            for p in row["presets"]
        },
    )


def kserve_releases() -> tuple[str, ...]:
    """The KServe releases whose presets are catalogued (``0.20.0``), oldest first."""
    return tuple(_catalogue())


def kserve_preset(release: str, name: str) -> KServePreset | None:
    """The preset *name* (``kserve-config-llm-template``) of KServe *release* (``v0.20.0`` or
    ``0.20.0``: a patch release may change the presets, so ``0.20`` names none); None when
    that release or preset is not catalogued."""
    presets = _catalogue().get(release.removeprefix("v"))
    return presets.get(name) if presets is not None else None
