"""The value every candidate agrees on: the one helper behind every "decide only where all
the values an unknown fact can take give the same answer" (candidate GPUs and vLLM
releases, :mod:`gpustrata_policies.view.candidates`; KAITO and KubeAI releases,
:mod:`~gpustrata_policies.view.kaito`, :mod:`~gpustrata_policies.view.kubeai`).

A leaf module (it imports nothing of the view), so that the controller readers, which the
engine view imports, can use it without an import cycle."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

C = TypeVar("C")
V = TypeVar("V")

__all__ = ["Agreement", "agreement"]


@dataclass(frozen=True, slots=True)
class Agreement(Generic[C, V]):
    """What a fact reads on each candidate, grouped by equal values."""

    groups: tuple[tuple[V, tuple[C, ...]], ...]
    """(value, the candidates giving it), in the order each value was first met."""

    @property
    def agreed(self) -> bool:
        """Every candidate gives the same value (and there is at least one candidate)."""
        return len(self.groups) == 1

    @property
    def value(self) -> V | None:
        """The value all agree on; None where they do not (or there are none)."""
        return self.groups[0][0] if self.agreed else None

    def largest(self) -> tuple[V, tuple[C, ...]]:
        """The group most candidates fall in (the first such on a tie)."""
        return max(self.groups, key=lambda g: len(g[1]))


def agreement(
    candidates: Iterable[C],
    read: Callable[[C], V],
    key: Callable[[V], Hashable] | None = None,
) -> Agreement[C, V]:
    """*read* on each candidate, grouped by ``key(value)`` (the value itself by default):
    agreed where one group holds them all."""
    groups: dict[Hashable, tuple[V, list[C]]] = {}
    for candidate in candidates:
        value = read(candidate)
        found = groups.setdefault(key(value) if key is not None else _key(value), (value, []))
        found[1].append(candidate)
    return Agreement(tuple((v, tuple(cs)) for v, cs in groups.values()))


def _key(value: object) -> Hashable:
    """The value itself, or for a mapping or list (not hashable) its sorted JSON text, so
    that values equal by ``==`` fall in one group."""
    try:
        hash(value)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=repr)
    return value
