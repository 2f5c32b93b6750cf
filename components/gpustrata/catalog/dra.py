"""The NVIDIA DRA driver's Helm chart releases (``data/dra-driver.yaml``, each cited)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpustrata.core.yamlio import safe_load

__all__ = ["DraDriverRelease", "dra_driver_release", "dra_driver_releases"]


@dataclass(frozen=True, slots=True)
class DraDriverRelease:
    """One release of the ``nvidia-dra-driver-gpu`` chart."""

    version: str
    chart: str
    repository: str
    released: str
    sources: tuple[str, ...]


@functools.cache
def dra_driver_releases() -> tuple[DraDriverRelease, ...]:
    """Every catalogued release, newest first."""
    text = resources.files("gpustrata.catalog").joinpath("data/dra-driver.yaml").read_text("utf-8")
    doc: Any = safe_load(text)
    out = [
        DraDriverRelease(
            version=str(e["version"]),
            chart=str(e["chart"]),
            repository=str(e["repository"]),
            released=str(e["released"]),
            sources=tuple(str(s) for s in e["sources"]),
        )
        for e in doc["dra_driver_releases"]
    ]
    return tuple(
        sorted(out, key=lambda r: tuple(int(p) for p in r.version.split(".")), reverse=True)
    )


def dra_driver_release() -> DraDriverRelease:
    """The release gpustrata pins: the newest catalogued one."""
    return dra_driver_releases()[0]
