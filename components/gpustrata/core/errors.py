"""Errors for bad input: each names the file, the config path, the bad value and the fix."""

from __future__ import annotations

from dataclasses import dataclass

from gpustrata.core.terminal import printable


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, at one place.

    ``path`` is the config path (``gpustrata:stack.models[1].engine.block_size``);
    ``message`` quotes the bad value and ends with the fix.
    """

    path: str
    message: str
    line: int | None = None

    def render(self, file: str | None) -> str:
        """One line: ``file:line: path: message`` (parts that are unknown are left out)."""
        where = file or ""
        if file and self.line is not None:
            where = f"{file}:{self.line}"
        parts = [p for p in (where, self.path) if p]
        # User text must not add lines or control the terminal.
        return printable(": ".join([*parts, self.message]))


class GpustrataError(Exception):
    """Base class of every error gpustrata reports to a user (never shown as a traceback)."""

    exit_code = 2


class StackError(GpustrataError):
    """A stack file or stack config that cannot be used; nothing has been registered."""

    def __init__(self, problems: list[Problem], file: str | None = None) -> None:
        self.problems = problems
        self.file = file
        super().__init__(self.render())

    @classmethod
    def from_rendered(cls, text: str) -> StackError:
        """Rebuild an error from its rendered lines (after crossing the Pulumi runtime)."""
        return cls([Problem("", line) for line in text.splitlines() if line.strip()])

    def render(self) -> str:
        """All problems, one line each."""
        return "\n".join(p.render(self.file) for p in self.problems)


class InputError(GpustrataError):
    """An unreadable input that is not a stack (a manifest, a flag value, a missing file)."""
