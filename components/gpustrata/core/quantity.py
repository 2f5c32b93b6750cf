"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``) as exact fractions."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Final

__all__ = [
    "ZERO",
    "exact_sum",
    "exceeds",
    "format_bytes",
    "format_cores",
    "kubelet_reserved",
    "parse_number",
    "parse_quantity",
]

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    # Decimal SI suffixes are powers of 1000, binary (IEC) ones powers of 1024
    # (k8s.io/apimachinery pkg/api/resource/suffix.go).
    **{p: Fraction(1000) ** n for n, p in enumerate("kMGTPE", 1)},
    **{f"{p}i": Fraction(1024) ** n for n, p in enumerate("KMGTPE", 1)},
}
# Far beyond any resource (an exabyte is 1e18) and still instant to compute.
_MAX_EXPONENT = 64
# k8s.io/apimachinery/pkg/api/resource/quantity.go: sign, digits, optional fraction, suffix.
_QUANTITY = re.compile(
    r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


# Whole numbers as manifests write them (a GPU count, replicas), made once: Fractions are
# immutable, and the rules parse the same few tens of thousands of times.
_SMALL = tuple(Fraction(n) for n in range(1025))

ZERO: Final = _SMALL[0]
"""``Fraction(0)``, made once (a start value for sums, a default for absent counts)."""


def exact_sum(values: Iterable[Fraction | int]) -> Fraction:
    """``sum(values, Fraction(0))``, faster: whole values are added as ints (each Fraction
    addition makes a new Fraction, a few times slower), the rest as Fractions; exact."""
    whole = 0
    rest: Fraction | None = None
    for value in values:
        if value.denominator == 1:
            whole += value.numerator
        else:
            rest = Fraction(value) if rest is None else rest + value
    if rest is None:
        return _SMALL[whole] if 0 <= whole <= 1024 else Fraction(whole)
    return rest + whole if whole else rest


def exceeds(a: Fraction | int, b: Fraction | int) -> bool:
    """``a > b``, exactly, on the integers of the two fractions (Fraction's own comparison
    first asks ``isinstance(b, numbers.Rational)``, an abstract-class check, each time)."""
    return a.numerator * b.denominator > b.numerator * a.denominator


def parse_quantity(value: object) -> Fraction | None:
    """Parse a quantity; ``None`` when *value* is not one (bools, garbage, unknowns)."""
    if value is None:  # most often: the field is absent
        return None
    if isinstance(value, str):  # manifests hold plain JSON scalars, mostly strings
        return _parse_text(value)
    return _plain_number(value)


def _plain_number(value: object) -> Fraction | None:
    """A value that is not text as an exact fraction: ints and finite floats; ``None`` for
    bools, NaN/inf (YAML ``.nan`` / ``.inf``) and anything else."""
    if type(value) is int:  # the exact type first: the common case, and bool is an int
        return _SMALL[value] if 0 <= value <= 1024 else Fraction(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value)) if math.isfinite(value) else None
    return None


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction | None:
    # A cluster repeats a few quantities ("1", "16Gi") thousands of times; Fractions are
    # immutable, so one parse serves them all.
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    sign, number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        power = int(exponent[1:])
        if abs(power) > _MAX_EXPONENT:
            return None  # "1e999999999" would take minutes to expand; no real quantity
        amount *= Fraction(10) ** power
    else:
        amount *= _SUFFIX[suffix or ""]
    return -amount if sign == "-" else amount


_NUMBER = re.compile(r"^\s*[+-]?(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*$")


def parse_number(value: object) -> Fraction | None:
    """A plain number (``2``, ``0.5``, ``"1e3"``, no unit suffix) as an exact fraction;
    ``None`` for anything else: bools, NaN/inf, units, or an exponent so large that
    expanding it would take minutes (``"1e10000000"``)."""
    if not isinstance(value, str):
        return _plain_number(value)
    match = _NUMBER.match(value)
    if match is None or (match.group(2) and abs(int(match.group(2))) > _MAX_EXPONENT):
        return None
    return Fraction(value.strip())


def format_bytes(amount: Fraction | int) -> str:
    """Render a byte count the way people write it in manifests (``1Gi``, ``64Mi``)."""
    value = Fraction(amount)
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIX[suffix]
        if value >= unit and (value / unit).denominator == 1:
            return f"{value / unit}{suffix}"
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIX[suffix]
        if value >= unit:
            return f"{float(value / unit):.1f}{suffix}"
    return f"{int(value)}"


def kubelet_reserved(
    system: Mapping[str, object],
    kube: Mapping[str, object],
    eviction_hard: Mapping[str, object],
    name: str,
    capacity: Fraction,
) -> Fraction:
    """What the kubelet keeps from Pods of a node's *capacity* of resource *name* (``cpu``
    in cores, ``memory`` in bytes): systemReserved + kubeReserved, and for memory the hard
    eviction threshold ``memory.available`` (a quantity or a percentage of capacity).
    Allocatable is capacity less this; the planner's defaults and rule K005 both use it."""
    total = Fraction(0)
    for section in (system, kube):
        total += parse_quantity(section.get(name)) or 0
    if name == "memory":
        raw = eviction_hard.get("memory.available")
        if isinstance(raw, str) and raw.lstrip("<").endswith("%"):
            total += capacity * Fraction(raw.lstrip("<")[:-1]) / 100
        elif raw is not None:
            total += parse_quantity(str(raw).lstrip("<")) or 0
    return total


def format_cores(value: Fraction) -> str:
    """CPU cores as people read them: at most two decimals, no trailing zeros (``3.42``)."""
    return f"{float(value):.2f}".rstrip("0").rstrip(".")
