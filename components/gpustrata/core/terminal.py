"""Text that is safe to print on a terminal or in a log: what the input controls (object
names, values quoted in messages) cannot move the cursor, forge a line or reorder text.

Every character Python does not count as printable is written as its ``repr`` escape:
C0 and C1 controls and DEL (``\\x1b``, ``\\x85``), line breaks and tabs (``\\n``, ``\\t``),
bidi overrides and isolates and zero-width characters (``\\u202e``, ``\\u200b``, format
characters all). JSON and SARIF need none of this: their encoders escape controls
themselves. Error messages (:mod:`gpustrata.core.errors`) use the same function.
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: object) -> str:
    """``str(text)`` on one line, with every non-printable character escaped."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
