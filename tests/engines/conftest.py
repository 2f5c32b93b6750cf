"""Tests against the real engines of the optional ``engines`` extra (vLLM, Ray).

Every test here is marked ``engines``. A test that needs a package calls
:func:`engine_module`: when the package is not importable the test is skipped, unless
``GPUSTRATA_REQUIRE_ENGINES=1`` (CI sets it after installing ``.[dev,engines]``), in
which case it fails and says what is missing, so a broken install never passes as
"skipped".

vLLM runs on this CPU-only machine with:

* ``VLLM_TARGET_DEVICE=cpu``: ``vllm/platforms/__init__.py``
  (``resolve_current_platform_cls_qualname``) then selects ``CpuPlatform`` outright
  instead of probing NVML; without it no plugin activates (no GPU, the PyPI wheel is
  not a ``+cpu`` build) and vLLM falls back to ``UnspecifiedPlatform``.
* ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1``: configs are local files; nothing
  may reach the Hub.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

REQUIRE_ENV = "GPUSTRATA_REQUIRE_ENGINES"
ENGINE_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
HERE = Path(__file__).resolve().parent

for _key, _value in ENGINE_ENV.items():
    os.environ.setdefault(_key, _value)


def engines_required() -> bool:
    """True when CI demands the engines (a missing package is then a failure)."""
    return os.environ.get(REQUIRE_ENV, "") == "1"


def engine_module(name: str) -> ModuleType:
    """Import an engine package, or skip (fail with ``GPUSTRATA_REQUIRE_ENGINES=1``)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = (
            f"{name} is not importable ({exc}); install the extra: "
            'pip install -c constraints.txt -e ".[dev,engines]"'
        )
        if engines_required():
            pytest.fail(f"{REQUIRE_ENV}=1 but {message}", pytrace=False)
        pytest.skip(message)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test in this directory ``engines`` and ``slow`` (importing vLLM or
    starting Ray alone takes tens of seconds)."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.engines)
            item.add_marker(pytest.mark.slow)


_TALLY = pytest.StashKey[dict[str, list[int]]]()


@pytest.fixture(scope="session")
def crosscheck_tally(request: pytest.FixtureRequest) -> dict[str, list[int]]:
    """Grid points compared / differing per cross-check, reported in the terminal summary."""
    return request.config.stash.setdefault(_TALLY, {})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many grid points each cross-check compared against the real engine."""
    tally = terminalreporter.config.stash.get(_TALLY, {})
    if not tally:
        return
    terminalreporter.section("engine cross-checks")
    for name, (compared, differing) in sorted(tally.items()):
        terminalreporter.write_line(f"{name}: {compared} grid points compared, {differing} differ")
