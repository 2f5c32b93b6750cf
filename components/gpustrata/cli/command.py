"""How a ``gpustrata`` sub-command is wired: its parser, its help and the function it runs.

A command's words live once, in the docstring of the function that runs it (as click and
typer read theirs): the first paragraph is its line in ``gpustrata --help``, the second the
top of its own ``--help`` and of its section in docs/reference/cli.md. :func:`add_command`
is the one place a sub-command is added; :func:`.errors.run_parser` calls what it sets.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["add_command"]


def add_command(
    sub: Any, name: str, run: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add sub-command *name* that runs ``run(args)`` to the sub-command parser *sub*.

    Its help is ``run``'s docstring: a summary paragraph, then a description paragraph
    (each one line of text however the source wraps it). Returns its parser, for the
    arguments.
    """
    paragraphs = inspect.cleandoc(run.__doc__ or "").split("\n\n")
    if len(paragraphs) != 2:
        raise ValueError(f"{run.__qualname__}: its docstring needs a summary and a description")
    summary, description = (" ".join(p.split()) for p in paragraphs)
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description)
    parser.set_defaults(func=run)
    return parser
