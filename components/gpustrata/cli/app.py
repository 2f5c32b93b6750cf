"""The `gpustrata` command: one argparse tree for every sub-command.

Each ``cli`` module adds its sub-commands (:mod:`.plan`: plan, render, schema;
:mod:`.capacity`: capacity; :mod:`.size`: size; :mod:`.check`: check, explain;
:mod:`.profile`: profile); this
module assembles them.
Exit codes: 0 fine, 1 a mandatory finding, 2 unusable input (named with file and path),
printed in one style by :mod:`.errors`. Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpustrata import __version__
from gpustrata.cli import capacity, check, plan, profile, size
from gpustrata.cli.errors import run_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    return run_parser(build_parser(), argv)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``gpustrata`` argparse tree (also the source of the CLI reference page)."""
    parser = argparse.ArgumentParser(
        prog="gpustrata",
        description="LLM inference on GPUs in Kubernetes: plan, render and check all three "
        "layers (nodes, KubeRay, vLLM) from one typed stack.",
    )
    parser.add_argument("--version", action="version", version=f"gpustrata {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")
    plan.register(sub)
    capacity.register(sub)
    size.register(sub)
    check.register_commands(sub)
    profile.register(sub)
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
