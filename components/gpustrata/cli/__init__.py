"""The ``gpustrata`` command: one argparse tree for every sub-command (:mod:`.app`).

:func:`main` loads the tree when called, so that importing one command's module (such
as :mod:`.check`, which the policy pack's users run on its own) stays light.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script (see :func:`gpustrata.cli.app.main`)."""
    from gpustrata.cli.app import main as app_main

    return app_main(argv)
