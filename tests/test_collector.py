"""gpustrata.core.collector: fewer collections inside a block, the collector as it was after."""

from __future__ import annotations

import gc

import pytest

from gpustrata.core.collector import YOUNG_THRESHOLD, fewer_collections, no_automatic_collections


def test_blocks_freeze_what_exists_and_restore_the_collector() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with fewer_collections():
        frozen = gc.get_freeze_count()
        assert frozen > 0  # the modules and everything alive now
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        built = [[i] for i in range(1000)]  # tracked containers made inside the block
        with fewer_collections():  # a nested block freezes them too
            assert gc.get_freeze_count() >= frozen + len(built)
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)  # still the outer's
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_raising_block_restores_the_collector() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise ValueError
    except ValueError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_automatic_collections_pause_and_resume() -> None:
    assert gc.isenabled()
    with no_automatic_collections():
        assert not gc.isenabled()
        with no_automatic_collections():  # nested: the outer block still decides
            assert not gc.isenabled()
        assert not gc.isenabled()
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # explicit collections still run
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with no_automatic_collections():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    try:
        with no_automatic_collections():
            raise ValueError
    except ValueError:
        pass
    assert gc.isenabled()
