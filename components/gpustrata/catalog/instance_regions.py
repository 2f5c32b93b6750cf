"""Per-region on-demand prices of the catalogued AWS and Azure instance types
(``data/instance-regions.yaml``, written by ``tools/region_prices.py`` from the Karpenter
pricing files ``data/instances.yaml`` cites, at the same commits).

A type a region's map does not list is taken as not offered there (as far as that file
says). GCP types have no entry: no per-region source is catalogued for them.
"""

from __future__ import annotations

import functools
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from gpustrata.catalog.hardware import InstanceType, OnDemandPrice
from gpustrata.catalog.packaged import CatalogError, packaged_model

__all__ = ["InstanceRegions", "RegionSource", "instance_regions"]

PATH = "data/instance-regions.yaml"


class RegionSource(BaseModel):
    """One pricing file read: which cloud, where, when it was generated, which regions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(min_length=1, description='"aws" or "azure".')
    source: str = Field(min_length=1, description="owner/repo@commit:path of the Go file.")
    read_on: date = Field(description="The file's own 'generated at' date.")
    regions: tuple[str, ...] = Field(description="The regions the file has a map for.")


class InstanceRegions(BaseModel):
    """The whole file: its sources and, per instance type, USD/h by region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: tuple[RegionSource, ...]
    instance_regions: dict[str, dict[str, float]] = Field(
        description="Instance type -> region -> on-demand USD per instance-hour."
    )

    def regions(self, provider: str | None = None) -> tuple[str, ...]:
        """Every region some source has a map for (of *provider* only, when given)."""
        return tuple(
            sorted({r for s in self.sources if provider in (None, s.provider) for r in s.regions})
        )

    def offered_in(self, inst: InstanceType) -> tuple[str, ...]:
        """The regions whose map lists *inst* (empty for GCP types and unlisted ones)."""
        return tuple(sorted(self.instance_regions.get(inst.name, {})))

    def price(self, inst: InstanceType, region: str) -> OnDemandPrice | None:
        """*inst*'s on-demand price in *region* with its source, or None when that
        region's map does not list it."""
        usd = self.instance_regions.get(inst.name, {}).get(region)
        if usd is None:
            return None
        for s in self.sources:
            if s.provider == inst.provider and region in s.regions:
                return OnDemandPrice(
                    usd_per_hour=usd, region=region, read_on=s.read_on, source=s.source
                )
        raise CatalogError(f"{PATH}: {inst.name} is priced in {region}, which no source lists")


@functools.cache
def instance_regions() -> InstanceRegions:
    """The packaged per-region price table (read once)."""
    return packaged_model(PATH, InstanceRegions)
