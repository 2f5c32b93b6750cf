"""The ``gpustrata`` command: one argparse tree for every subcommand (:mod:`.main`)."""

from gpustrata.cli.app import main

__all__ = ["main"]
