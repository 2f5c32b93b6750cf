"""Asynchronous scheduling (session 20): which published runs are priced with it."""

from __future__ import annotations

import re

from gpustrata.catalog.serving import load_serving_calibration
from gpustrata.vllm.calibration import NOT_STATED, sized_point
from gpustrata.vllm.scheduling import ASYNC_SCHEDULING_SINCE, async_scheduling_default


def test_the_default_turned_on_in_0_14_0() -> None:
    assert ASYNC_SCHEDULING_SINCE == "0.14.0"
    assert not async_scheduling_default("0.13.0")[0]
    assert not async_scheduling_default("0.10.1.1")[0]
    assert async_scheduling_default("0.14.0")[0]
    assert async_scheduling_default("0.19.0")[0]
    # Not a release (an image's "nightly" tag): the reference release's default, said so.
    on, why = async_scheduling_default("nightly")
    assert on == async_scheduling_default(None)[0] and "not a release" in why


def test_a_run_stating_no_release_predates_async_scheduling() -> None:
    """Runs that state no release are priced without asynchronous scheduling because each
    is dated before v0.14.0 (its wheel is of 2026-01-18) in its notes or quote; a run added
    without such a date must state its release instead."""
    points = load_serving_calibration()
    for p in points:
        est = sized_point(p)[2]
        if p.vllm_version == NOT_STATED:
            dates = re.findall(r"\b(20\d\d)-(\d\d)", f"{p.notes} {p.quote}")
            assert dates and all((int(y), int(m)) < (2026, 1) for y, m in dates), p.id
            assert not est.async_scheduling, p.id
        else:
            assert est.async_scheduling == async_scheduling_default(p.vllm_version)[0], p.id
