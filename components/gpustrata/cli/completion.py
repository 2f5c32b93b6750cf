"""``gpustrata completion bash|zsh|fish``: the shell's completion script for gpustrata.

The script comes from argcomplete (a maintained library for argparse trees): it calls
``gpustrata`` back with ``_ARGCOMPLETE`` set, and :func:`gpustrata.cli.app.main` answers
with the sub-commands, flags and choices of the one argparse tree, so completion never
drifts from the parser.
"""

from __future__ import annotations

import argparse
from typing import Any

from gpustrata.cli.command import add_command

__all__ = ["SHELLS", "completion_command", "register"]

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    """Add ``completion`` to the ``gpustrata`` sub-command parser."""
    completion = add_command(sub, "completion", completion_command)
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")


def completion_command(args: argparse.Namespace) -> int:
    """print the shell completion script (bash, zsh or fish)

    Print the completion script of SHELL. Load it now with `eval "$(gpustrata completion bash)"`
    (zsh: the same with zsh; fish: `gpustrata completion fish | source`), or save it where your
    shell reads completions. Exit 0.
    """
    from argcomplete.shell_integration import shellcode

    print(shellcode(["gpustrata"], shell=args.shell), end="")
    return 0
