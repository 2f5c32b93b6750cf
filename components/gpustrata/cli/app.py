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
import os
import sys
from collections.abc import Sequence

from gpustrata import __version__
from gpustrata.cli import capacity, check, completion, init, plan, profile, size
from gpustrata.cli.errors import run_parser

__all__ = ["build_parser", "main"]


EXIT_CODES = """exit codes:
  0  done: no mandatory finding
  1  a mandatory finding (plan: or a deploy blocker)
  2  unusable input: one line naming the file, line, key, value and fix

Each command's --help says what it prints. Shell completion: gpustrata completion bash|zsh|fish.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script (answers shell completion when the shell asks)."""
    parser = build_parser()
    if argv is None and "_ARGCOMPLETE" in os.environ:  # the completion script calling back
        import argcomplete

        argcomplete.autocomplete(parser)
    return run_parser(parser, argv)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``gpustrata`` argparse tree (also the source of the CLI reference page)."""
    parser = argparse.ArgumentParser(
        prog="gpustrata",
        description="LLM inference on GPUs in Kubernetes: plan, render and check all three "
        "layers (nodes, KubeRay, vLLM) from one typed stack.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpustrata {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")
    plan.register(sub)
    capacity.register(sub)
    size.register(sub)
    check.register_commands(sub)
    profile.register(sub)
    init.register(sub)
    completion.register(sub)
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
