"""The one version grammar: ``v0.8.5``, ``0.8.5.post1``, ``2.46.0+cu124``, ``570.124.06``."""

from __future__ import annotations

import functools
import re

__all__ = ["is_version", "parse_version"]

_VERSION_RE = re.compile(r"^[vV]?(\d+(?:\.\d+)*)(.*)$")


@functools.lru_cache(maxsize=4096)  # rules compare the same few versions per object
def parse_version(s: str) -> tuple[int, ...]:
    """Parse a version string into a tuple of integers, tolerantly.

    Accepted forms: an optional leading ``v``/``V``, then dot-separated integers, then any suffix,
    which is ignored except for a ``.postN``/``postN`` suffix, whose number is appended. A local
    version label (``+cu128``) and distro/pre-release suffixes (``-ubuntu22.04``, ``rc1``,
    ``-distroless``) are dropped. Leading/trailing whitespace is ignored.

    Examples: ``"v0.8.5"`` -> ``(0, 8, 5)``; ``"0.8.5.post1"`` -> ``(0, 8, 5, 1)``;
    ``"2.46.0+cu124"`` -> ``(2, 46, 0)``; ``"v1.17.8-ubuntu20.04"`` -> ``(1, 17, 8)``;
    ``"570.124.06"`` -> ``(570, 124, 6)``.

    Raises ``ValueError`` when the string does not start with a number (after an optional ``v``).
    """
    text = s.strip()
    match = _VERSION_RE.match(text)
    if match is None:
        raise ValueError(f"not a version: {s!r}")
    numbers = tuple(int(p) for p in match.group(1).split("."))
    rest = match.group(2)
    post = re.match(r"^\.?post(\d+)", rest)
    if post is not None:
        numbers = (*numbers, int(post.group(1)))
    return numbers


def is_version(s: str) -> bool:
    """Does :func:`parse_version` read *s* (``1.34``, ``v0.8.5``; not ``latest``)?"""
    return _VERSION_RE.match(s.strip()) is not None
