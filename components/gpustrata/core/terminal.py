"""Text that is safe to print on a terminal or in a log: what a manifest controls (object
names, values quoted in messages) cannot move the cursor, forge a line or reorder text.

C0 controls (line breaks included), DEL and C1 controls become ``\\xNN`` escapes; bidi
overrides and isolates, and zero-width characters, become ``\\uNNNN`` escapes. JSON and
SARIF need none of this: their encoders escape control characters themselves.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0 (tab and line breaks too: one field, one line), DEL, C1
    "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"  # bidi marks/overrides, zero-width
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``str(text)`` with every control, bidi and zero-width character escaped."""
    s = str(text)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s
