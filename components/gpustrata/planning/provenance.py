"""Derived values that say where they came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["spec", "catalogue", "model-file", "formula", "default", "upstream-default"]
"""Where a value came from; ``model-file``: a model's own config.json on this machine."""


@dataclass(frozen=True)
class Derived:
    """One number (or setting) gpustrata derived, with its origin.

    ``key`` names the value (``pools.gpu-h100.kubeReserved.memory``); ``source`` is
    where it came from; ``why`` is the working a person can check
    (``11 MiB x maxPods 100 + 255 MiB (amazon-eks-ami nodeadm)``).
    """

    key: str
    value: Any
    source: Source
    why: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form used by ``gpustrata plan --format json``."""
        return {"key": self.key, "value": self.value, "source": self.source, "why": self.why}


class Ledger:
    """Collects derived values in the order they were derived."""

    def __init__(self) -> None:
        self.items: list[Derived] = []

    def add(self, key: str, value: Any, source: Source, why: str) -> Any:
        """Record a value and return it, so derivations read as assignments."""
        self.items.append(Derived(key, value, source, why))
        return value
