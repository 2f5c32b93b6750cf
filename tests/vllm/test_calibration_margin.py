"""The SLO margin (session 20): the error held out by publisher, read from
catalog/data/serving-margin.yaml, which benchmarks/bench_serving_loso.py --write-margin
writes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpustrata.catalog import packaged
from gpustrata.catalog.packaged import CatalogError
from gpustrata.catalog.serving import load_serving_calibration, load_serving_margin
from gpustrata.vllm.calibration import measured_margin, point_publisher


@pytest.fixture
def fresh() -> Iterator[None]:
    """The margin read again, before and after a test that replaces the file's text."""
    load_serving_margin.cache_clear()
    measured_margin.cache_clear()
    yield
    load_serving_margin.cache_clear()
    measured_margin.cache_clear()


def test_the_margin_is_the_files_held_out_medians() -> None:
    f = load_serving_margin()
    # size and plan judge the SLOs on the simulation: its held-out error is the margin ...
    m = measured_margin("simulation")
    assert (m.tpot, m.ttft) == (f.errors["tpot"].median, f.errors["ttft"].median)
    assert "held out by publisher" in m.explanation and f.date in m.explanation
    assert 0 < m.tpot < 1 and 0 < m.ttft < 1
    # ... and the closed form's where it is the verdict (a plan whose simulation ran nothing).
    assert f.closed_form
    c = measured_margin("closed form")
    assert (c.tpot, c.ttft) == (f.closed_form["tpot"].median, f.closed_form["ttft"].median)


def test_the_margin_was_measured_on_the_calibration_file_as_it_is() -> None:
    """Every point of serving-calibration.yaml, and no other, was held out once: a point
    added since the margin was measured asks for the benchmark to be run again."""
    points = load_serving_calibration()
    f = load_serving_margin()
    assert sorted(f.points) == sorted(p.id for p in points)
    assert sorted(f.publishers) == sorted({point_publisher(p) for p in points})
    assert f.errors["tpot"].points <= len(f.points)
    assert "--write-margin" in f.command


def _text(monkeypatch: pytest.MonkeyPatch, text: str | None) -> None:
    real = packaged.packaged_text

    def fake(path: str) -> str:
        if path != "data/serving-margin.yaml":
            return real(path)
        if text is None:
            raise FileNotFoundError(path)
        return text

    monkeypatch.setattr(packaged, "packaged_text", fake)


_HEAD = (
    "command: python benchmarks/bench_serving_loso.py --write-margin\n"
    "date: '2026-12-05'\nmethod: m\npublishers: [a, b]\npoints: [p, q]\n"
)
"""A margin file's fields before its errors."""


@pytest.mark.usefixtures("fresh")
def test_a_missing_margin_file_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _text(monkeypatch, None)
    with pytest.raises(CatalogError, match=r"serving-margin\.yaml: cannot be read"):
        measured_margin("simulation")


@pytest.mark.usefixtures("fresh")
def test_a_margin_file_without_ttft_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _text(monkeypatch, _HEAD + "errors:\n  tpot: {median: 0.1, points: 1}\n")
    with pytest.raises(CatalogError, match=r"serving-margin\.yaml: invalid(.|\n)*lacks ttft"):
        measured_margin("simulation")


@pytest.mark.usefixtures("fresh")
def test_each_model_gets_its_own_error_and_the_closed_form_falls_back_to_the_simulators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The simulation's verdict keeps the simulator's held-out error, the closed form's
    its own; a file without closed-form figures gives the simulator's for both, saying so."""
    head = _HEAD + (
        "errors:\n  tpot: {median: 0.08, points: 2}\n  ttft: {median: 0.15, points: 2}\n"
    )
    _text(
        monkeypatch,
        head + "closed_form:\n  tpot: {median: 0.12, points: 2}\n"
        "  ttft: {median: 0.21, points: 1}\n",
    )
    c = measured_margin("closed form")
    assert (c.tpot, c.ttft) == (0.12, 0.21)
    assert c.explanation.startswith("the closed form's") and "TTFT 21% over 1" in c.explanation
    s = measured_margin("simulation")
    assert (s.tpot, s.ttft) == (0.08, 0.15) and s.explanation.startswith("the simulator's")
    load_serving_margin.cache_clear()
    measured_margin.cache_clear()
    _text(monkeypatch, head)
    c = measured_margin("closed form")
    assert (c.tpot, c.ttft) == (0.08, 0.15) and c.explanation.startswith("the simulator's")


@pytest.mark.usefixtures("fresh")
def test_a_closed_form_without_ttft_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _text(
        monkeypatch,
        _HEAD + "errors:\n  tpot: {median: 0.1, points: 1}\n  ttft: {median: 0.1, points: 1}\n"
        "closed_form:\n  tpot: {median: 0.1, points: 1}\n",
    )
    with pytest.raises(CatalogError, match=r"closed_form lacks ttft"):
        measured_margin("simulation")
