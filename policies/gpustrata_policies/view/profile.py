"""The cluster profile of the evaluation under way (:mod:`gpustrata.catalog.profile`).

:func:`gpustrata_policies.evaluate.evaluate` sets it for the length of one evaluation
(``profile=``); view functions that resolve a cluster fact the manifests lack (a site
label's GPU, a private image's vLLM release, the admission plugins, installed CRDs, load
bandwidth) ask :func:`active_profile` before their own logic. A context variable rather
than a parameter: those functions (``image_release``, ``gpu_model_of_labels``) are called
from places that hold no rule context, and an evaluation in another thread or task keeps
its own profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpustrata.catalog.profile import ClusterProfile

__all__ = ["active_profile", "profile_hint", "release_spans", "using_profile"]

_ACTIVE: ContextVar[ClusterProfile | None] = ContextVar("gpustrata_cluster_profile", default=None)


def active_profile() -> ClusterProfile | None:
    """The profile of the evaluation under way, or ``None``."""
    return _ACTIVE.get()


@contextmanager
def using_profile(profile: ClusterProfile | None) -> Iterator[None]:
    """Make *profile* the active one inside the ``with`` block."""
    token = _ACTIVE.set(profile)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def profile_hint(key: str) -> str:
    """``(set KEY in the cluster profile)``: appended to a "not evaluated" reason that a
    cluster fact would decide (it reads the same at the end or in the middle of a sentence;
    docs/reference/cluster-profile.md says where the profile lives)."""
    return f"(set {key} in the cluster profile)"


def release_spans(values: Iterable[tuple[str, str]]) -> str:
    """How a value the cluster profile's release would decide varies over the catalogued
    releases, from (value, release) pairs oldest first: ``a in 0.1 to 0.3; b in 0.4``, or
    ``5 values: a in 0.1 ... e in 0.9`` when there are more than two runs."""
    spans: list[tuple[str, list[str]]] = []
    for value, release in values:
        if spans and spans[-1][0] == value:
            spans[-1][1].append(release)
        else:
            spans.append((value, [release]))

    def span(value: str, releases: list[str]) -> str:
        tail = f" to {releases[-1]}" if len(releases) > 1 else ""
        return f"{value} in {releases[0]}{tail}"

    if len(spans) > 2:
        return f"{len(spans)} values: {span(*spans[0])} ... {span(*spans[-1])}"
    return "; ".join(span(*s) for s in spans)
