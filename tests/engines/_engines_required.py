"""Skip (or, with ``GPUSTRATA_REQUIRE_ENGINES=1``, fail) when an engine is not installed.

The semantics of ``tests/engines/conftest.py``'s ``engine_module``, importable under a
name no other test directory uses (``from conftest import ...`` resolves to whichever
conftest pytest imported last when several directories are collected together).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

REQUIRE_ENV = "GPUSTRATA_REQUIRE_ENGINES"


def require_engine(name: str) -> None:
    """Skip the test unless *name* is importable; fail instead when engines are required."""
    if importlib.util.find_spec(name) is not None:
        return
    message = (
        f"{name} is not importable; install the extra: "
        'pip install -c constraints.txt -e ".[dev,engines]"'
    )
    if os.environ.get(REQUIRE_ENV, "") == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {message}", pytrace=False)
    pytest.skip(message)
