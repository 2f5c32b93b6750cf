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

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpustrata.catalog.profile import ClusterProfile

__all__ = ["active_profile", "profile_hint", "using_profile"]

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
