"""The one error style of every ``gpustrata`` command.

A user error is one line on stderr, ``gpustrata: <message>``, and exit 2 (exit 1 is
kept for a mandatory finding). Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gpustrata.core.errors import GpustrataError
from gpustrata.core.terminal import printable

__all__ = ["report_error", "run_parser", "user_error"]


def user_error(message: str, exit_code: int = 2) -> int:
    """Print ``gpustrata: <message>`` on stderr; return the exit code. Each line is made
    printable (control characters escaped, URI credentials redacted: core/terminal.py)."""
    text = "\n".join(printable(line) for line in message.splitlines() or [""])
    print(f"gpustrata: {text}", file=sys.stderr)
    return exit_code


def report_error(exc: GpustrataError) -> int:
    """Print a :class:`GpustrataError` in the one style; return its exit code."""
    return user_error(str(exc), exc.exit_code)


def run_parser(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse *argv*, run the chosen command's ``func(args)`` and map errors to exit codes.

    Run as the ``gpustrata`` process itself (*argv* ``None``: the command line), pydantic's
    plugin discovery is turned off unless the user set ``PYDANTIC_DISABLE_PLUGINS``: it scans
    the entry points of every installed distribution (about 20 ms of a small ``check``'s
    start, issue 35) for observability plugins that no command's output depends on.
    ``PYDANTIC_DISABLE_PLUGINS=`` (empty) loads them again.
    """
    if argv is None:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except GpustrataError as exc:
        return report_error(exc)
    except BrokenPipeError:
        return 0
    return code
