"""The catalogued engine flags of a release equal what vLLM's own ``vllm serve`` accepts.

``catalog/data/vllm-flags.txt`` is extracted from each release's source by
``tools/vllm_flags.py`` (``ast``, no import). For the installed vLLM the option strings of
its real ``vllm serve`` parser (``ServeSubcommand.subparser_init``) are the truth: the
catalogue's set for that release and the extractor's run over the installed package's
own source must both equal them.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import engine_module

from gpustrata.catalog.vllm_releases import accepted_flags

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.engines, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="module")
def real_flags() -> tuple[str, frozenset[str]]:
    """(installed vLLM version, the option strings its ``vllm serve`` parser accepts)."""
    vllm: Any = engine_module("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    assert isinstance(serve, argparse.ArgumentParser)
    return str(vllm.__version__), frozenset(serve._option_string_actions)


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_flags_tool", ROOT / "tools/vllm_flags.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_catalogue_equals_the_real_parser(real_flags: tuple[str, frozenset[str]]) -> None:
    version, real = real_flags
    sets = accepted_flags(version)
    if sets is None or len(sets) != 1:
        pytest.skip(f"vLLM {version} is not a catalogued release")
    ours = sets[0].flags
    assert ours == real, (
        f"catalogued flags of {version} differ from vllm serve's: "
        f"missing {sorted(real - ours)}, extra {sorted(ours - real)}"
    )


def test_extractor_on_the_installed_source(real_flags: tuple[str, frozenset[str]]) -> None:
    """The extractor, run over the installed package's source files, finds the same set."""
    _, real = real_flags
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    tool = _tool()
    read, listing = tool.tree_reader(Path(spec.origin).parent.parent)
    result = tool.extract(read, listing)
    assert not result.warnings
    assert frozenset(result.flags) == real, (
        f"missing {sorted(real - result.flags)}, extra {sorted(result.flags - real)}"
    )
