"""The NVIDIA DRA driver's Helm chart releases (``data/dra-driver.yaml``, each cited): NVIDIA's
``nvidia-dra-driver-gpu`` and the kubernetes-sigs ``dra-driver-nvidia-gpu``."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict

from gpustrata.catalog.packaged import packaged_model

__all__ = [
    "DRA_CHART_WAYS",
    "DraDriverRelease",
    "dra_driver_release",
    "dra_driver_release_of",
    "dra_driver_releases",
]

DRA_CHART_WAYS = ("nvidia-chart", "kubernetes-sigs-chart")
"""The stack's ``dra.driver`` values that install a chart of their own."""


class DraDriverRelease(BaseModel):
    """One release of a DRA driver chart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    way: str
    """The stack's ``dra.driver`` that installs it (one of :data:`DRA_CHART_WAYS`)."""
    chart: str
    repository: str
    released: str
    sources: tuple[str, ...]

    @property
    def chart_ref(self) -> str:
        """What Helm installs: the chart name, or the full reference of an OCI chart."""
        if self.repository.startswith("oci://"):
            return f"{self.repository.rstrip('/')}/{self.chart}"
        return self.chart


class _DraDriverFile(BaseModel):
    """``data/dra-driver.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dra_driver_releases: tuple[DraDriverRelease, ...]


@functools.cache
def dra_driver_releases() -> tuple[DraDriverRelease, ...]:
    """Every catalogued release, newest first."""
    out = packaged_model("data/dra-driver.yaml", _DraDriverFile).dra_driver_releases
    return tuple(
        sorted(out, key=lambda r: tuple(int(p) for p in r.version.split(".")), reverse=True)
    )


def dra_driver_release(way: str = "nvidia-chart") -> DraDriverRelease:
    """The release gpustrata pins for *way* (``dra.driver``): its newest catalogued one."""
    found = [r for r in dra_driver_releases() if r.way == way]
    if not found:
        raise ValueError(f"no DRA driver chart is catalogued for dra.driver {way!r}")
    return found[0]


def dra_driver_release_of(version: str) -> DraDriverRelease:
    """The catalogued release at *version* (the two charts' version lines do not overlap:
    25.x for NVIDIA's, 0.x for kubernetes-sigs')."""
    for release in dra_driver_releases():
        if release.version == version.removeprefix("v"):
            return release
    raise ValueError(f"DRA driver chart version {version!r} is not catalogued")
