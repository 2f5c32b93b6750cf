"""The inference gateway's pinned releases (``data/gateway.yaml``) and the CRDs the stack
applies itself (``data/crds/``, copied unchanged from the pinned tags).

An ``inference-gateway`` model is reached through the Gateway API Inference Extension
(GAIE): Gateway API CRDs and GAIE CRDs first, then the gateway implementation (Istio's
``base`` and ``istiod`` charts, their Pods catalogued in ``charts.yaml``), then GAIE's
``inferencepool`` chart (the InferencePool and its endpoint picker).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpustrata.catalog.packaged import packaged_document
from gpustrata.core.yamlio import safe_load

__all__ = ["GatewayRelease", "gateway_crds", "gateway_release"]


@dataclass(frozen=True, slots=True)
class GatewayRelease:
    """The versions an inference gateway is installed at, pinned together."""

    gateway_api_version: str
    """Gateway API release whose standard-channel CRDs are applied (``v1.4.1``)."""
    extension_version: str
    """Gateway API Inference Extension release: its CRDs and ``inferencepool`` chart."""
    chart: str
    """GAIE's chart that deploys an InferencePool and its endpoint picker."""
    repository: str
    """Where that chart is published (an OCI registry)."""
    pool_api_version: str
    """API version of the InferencePool the chart renders."""
    implementation: str
    """The gateway implementation (``istio``)."""
    implementation_version: str
    """Its release (the version of its charts)."""
    implementation_repository: str
    """Helm repository of its charts."""
    crd_chart: str
    """Its chart that installs its own CRDs (``base``)."""
    controller_chart: str
    """Its chart that runs the controller (``istiod``)."""
    provider: str
    """``provider.name`` of the inferencepool chart for this implementation."""
    crd_dirs: tuple[str, ...]
    """Folders under ``catalog/data`` of the CRDs the stack applies, in install order."""
    sources: tuple[str, ...]


@functools.cache
def gateway_release() -> GatewayRelease:
    """The catalogued inference gateway release."""
    doc: Any = packaged_document("data/gateway.yaml")
    api, ext, impl = doc["gateway_api"], doc["inference_extension"], doc["implementation"]
    return GatewayRelease(
        gateway_api_version=str(api["version"]),
        extension_version=str(ext["version"]),
        chart=str(ext["chart"]),
        repository=str(ext["repository"]),
        pool_api_version=str(ext["pool_api_version"]),
        implementation=str(impl["name"]),
        implementation_version=str(impl["version"]),
        implementation_repository=str(impl["repository"]),
        crd_chart=str(impl["crd_chart"]),
        controller_chart=str(impl["controller_chart"]),
        provider=str(impl["provider"]),
        crd_dirs=(str(api["crds"]), str(ext["crds"])),
        sources=tuple(str(s) for part in (api, ext, impl) for s in part["sources"]),
    )


@functools.cache
def gateway_crds() -> tuple[Mapping[str, Any], ...]:
    """Every CustomResourceDefinition the stack applies for the gateway (Gateway API's
    standard channel, then GAIE's), as parsed from the copied upstream files."""
    base = resources.files("gpustrata.catalog").joinpath("data")
    out: list[Mapping[str, Any]] = []
    for folder in gateway_release().crd_dirs:
        directory = base.joinpath(folder)
        for entry in sorted(directory.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".yaml"):
                doc: Any = safe_load(entry.read_text("utf-8"))
                out.append(doc)
    return tuple(out)
