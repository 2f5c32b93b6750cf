"""The shipped serving constants come from the held-out benchmark's own fit (session 21):
benchmarks/fit_serving_model.py writes serving-fit.yaml from bench_serving_loso.py's
``fit_all``, which starts where every fold starts (benchmarks/data/serving-fit-start.yaml).

The fit itself takes minutes (it simulates every point hundreds of times), so these tests
check what the file must be for its values, not the search that found them."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
import yaml

from gpustrata.catalog.serving import load_serving_calibration, load_serving_fit
from gpustrata.vllm.calibration import CONSTANT_NAMES, OPTIONAL_CONSTANT_NAMES, default_constants
from tests._scripts import ROOT, load_script


@pytest.fixture(scope="module")
def fit_script() -> ModuleType:
    return load_script("benchmarks/fit_serving_model.py", "fit_serving_model")


def test_the_shipped_file_is_the_scripts_document_for_its_values(fit_script: ModuleType) -> None:
    """Each constant's entry (value, the points it is fitted on, its explanation) is what the
    script writes for the shipped values: nothing edited by hand, no stale point list."""
    points = list(load_serving_calibration())
    doc = fit_script.document(default_constants(), points, 0.0)
    shipped = load_serving_fit()
    assert set(doc["constants"]) == set(CONSTANT_NAMES) | set(OPTIONAL_CONSTANT_NAMES)
    for name, entry in doc["constants"].items():
        c = shipped.constants[name]
        assert (entry["value"], entry["fitted_on"], entry["explanation"]) == (
            c.value,
            c.fitted_on,
            c.explanation,
        ), name


def test_the_fit_covers_every_calibration_point() -> None:
    """A point added since the fit asks for a refit (and a new --write-margin run)."""
    method = load_serving_fit().method
    found = re.search(r"(\d+) points of (\d+) publishers", method)
    assert found, method
    assert int(found.group(1)) == len(load_serving_calibration())


def test_every_fit_starts_from_the_fixed_start_not_from_the_shipped_fit() -> None:
    """The folds and the shipped fit start from the same fixed values, so refitting the
    shipped constants cannot carry a held-out publisher into its own fold's start."""
    loso = load_script("benchmarks/bench_serving_loso.py", "bench_serving_loso")
    start = yaml.safe_load((ROOT / "benchmarks/data/serving-fit-start.yaml").read_text())
    s = loso._start()
    for name, value in start["constants"].items():
        assert getattr(s, name) == value, name
    # Each generation's memory efficiency starts at the shared value.
    assert s.memory_efficiency_sm80 == s.memory_efficiency_sm90 == s.memory_efficiency
    shipped = default_constants()
    assert any(getattr(shipped, n) != getattr(s, n) for n in CONSTANT_NAMES)
