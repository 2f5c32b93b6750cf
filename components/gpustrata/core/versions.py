"""The one version grammar: ``v0.8.5``, ``0.8.5.post1``, ``2.46.0+cu124``, ``570.124.06``."""

from __future__ import annotations

import functools
import re

__all__ = [
    "compare_versions",
    "is_version",
    "pad_version",
    "parse_version",
    "version_satisfies",
]

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


def pad_version(v: tuple[int, ...], n: int) -> tuple[int, ...]:
    """*v* padded with zeros to *n* parts: ``(1, 2), 3`` -> ``(1, 2, 0)``."""
    return v + (0,) * (n - len(v))


def compare_versions(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """-1, 0 or 1 as parsed version *a* is below, equal to or above *b* (missing parts 0)."""
    if len(a) != len(b):  # most comparisons are of equal lengths: nothing to pad
        n = max(len(a), len(b))
        a, b = pad_version(a, n), pad_version(b, n)
    return (a > b) - (a < b)


def version_satisfies(version: str, specifier: str) -> bool:
    """Return whether ``version`` satisfies a PEP 440-style ``specifier`` (comma-separated).

    Supports ``==``, ``!=`` (both with a trailing ``.*`` wildcard), ``>=``, ``<=``, ``>``, ``<``
    and ``~=``. Extras and environment markers are not accepted here; pass only the specifier part
    (``">=0.8.5"``, ``"==0.22.0"``, ``"!=2.44.*,>=2.43.0"``). An empty specifier is satisfied by any
    version. Raises ``ValueError`` on an operator it does not know.
    """
    v = parse_version(version)
    for raw in specifier.split(","):
        clause = raw.strip()
        if not clause:
            continue
        m = re.match(r"^(==|!=|>=|<=|~=|>|<)\s*(.+)$", clause)
        if m is None:
            raise ValueError(f"unsupported version specifier clause {clause!r}")
        op, target = m.group(1), m.group(2).strip()
        if target.endswith(".*"):
            prefix = parse_version(target[:-2])
            in_prefix = v[: len(prefix)] == prefix
            if op == "==" and not in_prefix:
                return False
            if op == "!=" and in_prefix:
                return False
            if op not in ("==", "!="):
                raise ValueError(f"wildcard only allowed with == or !=: {clause!r}")
            continue
        t = parse_version(target)
        c = compare_versions(v, t)
        ok = {
            "==": c == 0,
            "!=": c != 0,
            ">=": c >= 0,
            "<=": c <= 0,
            ">": c > 0,
            "<": c < 0,
        }.get(op)
        if op == "~=":
            upper = (*t[:-2], t[-2] + 1) if len(t) >= 2 else (t[0] + 1,)
            ok = c >= 0 and compare_versions(v, upper) < 0
        if not ok:
            return False
    return True
