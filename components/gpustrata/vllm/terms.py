"""Units and derived figures: a number with its working, GiB/GB formatting, the planner's error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "GB",
    "GIB",
    "CapacityError",
    "Term",
    "gb",
    "gib",
    "largest_passing",
]


GIB = 1 << 30
GB = 10**9


class CapacityError(ValueError):
    """An engine setting the capacity planner cannot evaluate (vLLM would refuse it too).

    ``setting`` names the engine setting (``tensor_parallel_size``, ``kv_cache_dtype``
    ...), so callers can map it to a flag or a config path.
    """

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        super().__init__(message)


@dataclass(frozen=True)
class Term:
    """One derived number and how it was derived (a formula with its inputs and source)."""

    value: int | float
    explanation: str

    def as_dict(self) -> dict[str, int | float | str]:
        """``{"value": ..., "explanation": ...}`` for JSON output."""
        return {"value": self.value, "explanation": self.explanation}


def gib(n: float) -> str:
    """Format bytes as GiB with two decimals."""
    return f"{n / GIB:.2f} GiB"


def gb(n: float) -> str:
    """Format bytes as GB (10^9) with one decimal."""
    return f"{n / GB:.1f} GB"


def largest_passing(test: Callable[[int], bool], high: int) -> int:
    """The largest n in 1..*high* with ``test(n)``, 0 when none (binary search: *test*
    holds up to some n and fails above it)."""
    low, best = 1, 0
    while low <= high:
        mid = (low + high) // 2
        if test(mid):
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best
