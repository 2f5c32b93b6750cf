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
from pathlib import Path
from typing import Any

import pytest
from _scripts import load_script
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
    return load_script("tools/vllm_flags.py", "vllm_flags_tool")


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


@pytest.fixture(scope="module")
def real_serve_parser() -> tuple[str, argparse.ArgumentParser]:
    """(installed vLLM version, its real ``vllm serve`` parser)."""
    vllm: Any = engine_module("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    serve = ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    assert isinstance(serve, argparse.ArgumentParser)
    return str(vllm.__version__), serve


def test_catalogued_prefix_fact_is_the_real_parsers(
    real_serve_parser: tuple[str, argparse.ArgumentParser],
) -> None:
    from gpustrata.catalog.vllm_releases import accepts_abbreviations
    from gpustrata_policies.view.objects import K8sObject
    from gpustrata_policies.view.vllm_args import vllm_engine

    version, serve = real_serve_parser
    fact = accepts_abbreviations(version)
    if fact is None:
        pytest.skip(f"vLLM {version}: no catalogued prefix fact")
    assert serve.allow_abbrev is (fact.value == 1.0)
    real = serve.parse_args(["m", "--max-model", "4k"])  # what `vllm serve` makes of it
    pod = K8sObject(
        {
            "kind": "Pod",
            "spec": {
                "containers": [
                    {"name": "c", "image": f"vllm/vllm-openai:v{version}",
                     "args": ["--model", "m", "--max-model", "4k"]}
                ]
            },
        }
    )  # fmt: skip
    engine = vllm_engine(next(pod.containers()))
    assert engine is not None and engine.get_int("max_model_len") == real.max_model_len
