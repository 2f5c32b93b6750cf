"""The cyclic garbage collector around one large, short-lived computation (issue 18).

Reading a cluster dump builds millions of small dicts and lists that live until the
check ends; evaluating it adds the view's cached pod, container and engine readings.
With CPython's default thresholds (a collection of the youngest generation every 700
net allocations of container objects) the collector ran about 900 times during a check
of 5,000 objects, and each of its full collections walked every object of the input
again: 1.4 s of a 7.8 s check, none of which freed anything (the input and the caches
are alive until the report is written).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "fewer_collections", "no_automatic_collections"]

YOUNG_THRESHOLD: Final = 20_000
"""Net container allocations between two collections of the youngest generation inside
:func:`fewer_collections` (CPython's default is 700): a check of 5,000 objects is
collected about 30 times instead of about 900."""

_LOCK = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] = (0, 0, 0)
_paused = 0
_was_enabled = True


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with the objects that exist when it starts out of the collector's
    scans (:func:`gc.freeze`: the input read before it, the interpreter's modules) and
    the youngest generation collected every :data:`YOUNG_THRESHOLD` allocations.

    Garbage cycles made inside the block are still collected, only less often; the
    frozen objects return to the oldest generation when the outermost block ends. Blocks
    nest: a nested block freezes what the outer one built (a check reads its input in
    one block and evaluates it in another), and only the outermost one restores the
    thresholds, which are process-wide, as the collector is.
    """
    global _depth, _saved
    with _LOCK:
        _depth += 1
        if _depth == 1:
            _saved = gc.get_threshold()
            gc.set_threshold(max(_saved[0], YOUNG_THRESHOLD), *_saved[1:])
        gc.freeze()  # a nested block freezes what the outer one built (the input read)
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()


@contextmanager
def no_automatic_collections() -> Iterator[None]:
    """Run the block with the collector's automatic collections off (:func:`gc.disable`);
    :func:`gc.collect` still works, and the caller runs it where the block's cyclic
    garbage must go.

    For a block that makes much acyclic garbage (freed by reference counting) and
    collects its own cycles at known points: the pack's AnalyzeStack, where pulumi-policy
    deserialises every resource again for each stack policy and each policy's release
    runs one collection. Blocks nest and may overlap across threads (the setting is
    process-wide); the collector is enabled again, if it was, when the last one ends.
    """
    global _paused, _was_enabled
    with _LOCK:
        _paused += 1
        if _paused == 1:
            _was_enabled = gc.isenabled()
            gc.disable()
    try:
        yield
    finally:
        with _LOCK:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()
