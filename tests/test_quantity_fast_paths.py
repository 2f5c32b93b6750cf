"""The exact-arithmetic fast paths of issue 18 give the values the plain Fraction code gave."""

from __future__ import annotations

import enum
import math
from fractions import Fraction

import pytest

from gpustrata.core.quantity import ZERO, exact_sum, exceeds, parse_number, parse_quantity
from gpustrata_policies.rules.k008_gpu_rollout_fits.rule import _resolve


class _Count(enum.IntEnum):
    TWO = 2


@pytest.mark.parametrize(
    "values",
    [
        [],
        [Fraction(1)],
        [Fraction(1, 2), Fraction(1, 2)],
        [Fraction(3), Fraction(1, 3), 2, Fraction(-7, 6)],
        [Fraction(2000), Fraction(5000)],
        [Fraction(-4), Fraction(1)],
    ],
)
def test_exact_sum_is_the_fraction_sum(values: list[Fraction | int]) -> None:
    got = exact_sum(values)
    assert got == sum(values, Fraction(0)) and type(got) is Fraction


def test_exact_sum_reads_a_generator_once() -> None:
    assert exact_sum(Fraction(n, 4) for n in range(5)) == Fraction(10, 4)


@pytest.mark.parametrize("value", [0, 1, 8, 1024, 1025, 10**20, -3, _Count.TWO])
def test_whole_numbers_parse_to_equal_fractions(value: int) -> None:
    for parse in (parse_quantity, parse_number):
        got = parse(value)
        assert got == Fraction(int(value)) and type(got) is Fraction


def test_bools_and_str_subclasses_keep_their_meaning() -> None:
    class Text(str):
        pass

    assert parse_quantity(True) is None and parse_number(False) is None
    assert parse_quantity(None) is None and parse_number(None) is None
    assert parse_quantity(Text("16Gi")) == 16 * 2**30
    assert ZERO == 0 and type(ZERO) is Fraction


@pytest.mark.parametrize("replicas", [1, 3, 4, 7, 10])
@pytest.mark.parametrize("pct", ["25", "33.3", "0", "100", "150", "-25"])
def test_rolling_update_percentages_round_as_kubernetes_does(replicas: int, pct: str) -> None:
    scaled = Fraction(pct) / 100 * replicas
    assert _resolve(f"{pct}%", replicas, True) == math.ceil(scaled)
    assert _resolve(f"{pct}%", replicas, False) == math.floor(scaled)


def test_unreadable_percentages_stay_unreadable() -> None:
    assert _resolve("x%", 4, True) is None and _resolve("%", 4, False) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Fraction(3, 2), 1),
        (Fraction(1, 2), Fraction(1, 3)),
        (Fraction(-1, 2), Fraction(-1, 3)),
        (Fraction(2), 2),
        (1, Fraction(3, 2)),
        (Fraction(10**30 + 1, 10**30), 1),
    ],
)
def test_exceeds_is_greater_than(a: Fraction | int, b: Fraction | int) -> None:
    assert exceeds(a, b) is (a > b) and exceeds(b, a) is (b > a)
