"""Progress for long work (several stacks, placement checks): visible on a terminal, quiet in CI.

One :class:`Progress` covers a known number of steps::

    with Progress(len(stacks), "plan") as progress:
        for name in stacks:
            with progress.step(name):
                ...

Where it writes (always stderr by default, so stdout stays machine-readable):

- ``live``: an interactive terminal that is not CI. One status line, rewritten in place
  (``\\r`` + erase to end of line), cleared when the work ends, so nothing is left behind
  in the scrollback. Colour (dim step counter) unless ``NO_COLOR`` is set
  (https://no-color.org: any non-empty value).
- ``off``: anything else (a pipe, a file, ``CI`` set as GitHub Actions, GitLab and most CI
  systems do, or ``TERM=dumb``). Nothing is written.
- ``lines``: only when a caller asks for it; one line per finished step with its time, for
  work long enough that a silent log would look hung.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Literal, TextIO

__all__ = ["Mode", "Progress", "choose_mode"]

Mode = Literal["auto", "live", "lines", "off"]

_FALSY = {"", "0", "false", "no", "off"}
_DIM = "\x1b[2m"
_RESET = "\x1b[0m"
_ERASE_LINE = "\x1b[K"


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in _FALSY


def choose_mode(stream: TextIO, env: Mapping[str, str] | None = None) -> Mode:
    """``live`` on an interactive terminal outside CI, else ``off``."""
    env = os.environ if env is None else env
    if _truthy(env.get("CI")) or env.get("TERM") == "dumb":
        return "off"
    isatty = getattr(stream, "isatty", None)
    return "live" if isatty is not None and isatty() else "off"


class Progress:
    """Progress over ``total`` steps of a job called ``label``.

    Args:
        total: number of steps expected (shown as ``[i/total]``).
        label: what the steps are part of, e.g. ``"plan"``.
        stream: where to write (default ``sys.stderr``).
        mode: ``"auto"`` (default: :func:`choose_mode`), ``"live"``, ``"lines"`` or ``"off"``.
        env: environment to read ``CI``, ``NO_COLOR`` and ``TERM`` from (default os.environ).
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        mode: Mode = "auto",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        env = os.environ if env is None else env
        self.mode: Mode = choose_mode(self.stream, env) if mode == "auto" else mode
        self.color = self.mode == "live" and not env.get("NO_COLOR")
        self.done = 0
        self._shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Show ``name`` while the block runs; count it as done when the block finishes."""
        index = self.done + 1
        self._live(f"{self._counter(index)} {self.label} {name} ...")
        started = time.monotonic()
        try:
            yield
        finally:
            self.done = index
            elapsed = time.monotonic() - started
            if self.mode == "lines":
                self._write(f"{self._counter(index)} {self.label} {name}: {elapsed:.1f} s\n")

    def close(self) -> None:
        """Clear the live line (a no-op in the other modes); safe to call twice."""
        if self._shown:
            self._write("\r" + _ERASE_LINE)
            self._shown = False

    def _counter(self, index: int) -> str:
        text = f"[{index}/{self.total}]"
        return f"{_DIM}{text}{_RESET}" if self.color else text

    def _live(self, text: str) -> None:
        if self.mode != "live":
            return
        width = shutil.get_terminal_size(fallback=(80, 24)).columns
        visible = text.replace(_DIM, "").replace(_RESET, "")
        if len(visible) >= width:  # a wrapped line cannot be rewritten in place
            text = visible[: max(width - 2, 1)] + "…"
        self._write("\r" + text + _ERASE_LINE)
        self._shown = True

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
