"""Text that is safe to print on a terminal or in a log: what the input controls (object
names, values quoted in messages) cannot move the cursor, forge a line or reorder text.

Every character Python does not count as printable is written as its ``repr`` escape:
C0 and C1 controls and DEL (``\\x1b``, ``\\x85``), line breaks and tabs (``\\n``, ``\\t``),
bidi overrides and isolates and zero-width characters (``\\u202e``, ``\\u200b``, format
characters all). JSON and SARIF need none of this: their encoders escape controls
themselves. Error messages (:mod:`gpustrata.core.errors`) use the same function.

Credentials in URIs (``s3://KEY:SECRET@bucket``) are never printed: :func:`redact_userinfo`
is the one redaction, applied by :func:`printable` and to every finding and not-evaluated
reason (``gpustrata_policies.evaluate``), so JSON and SARIF carry none either.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

__all__ = [
    "clipped",
    "has_userinfo",
    "printable",
    "quoted",
    "redact_userinfo",
    "yaml_spelling",
]

# scheme://userinfo@host, userinfo of RFC 3986 section 3.2.1's characters (unreserved,
# %-escapes, sub-delims but the quote, ':'); greedy up to the last '@' of the authority, so
# 's3://a@b@host' hides 'a@b'.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[A-Za-z0-9._~%!$&()*+,;=:@-]+@")


def has_userinfo(text: str) -> bool:
    """Does *text* hold a URI with credentials before its host (``s3://KEY:SECRET@b``)?"""
    return "@" in text and _USERINFO.search(text) is not None


def redact_userinfo(text: str) -> str:
    """*text* with the userinfo of every URI in it replaced by ``***``
    (``s3://KEY:SECRET@bucket/m`` -> ``s3://***@bucket/m``)."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


def clipped(text: str, limit: int = 60) -> str:
    """*text* cut to *limit* characters (``...`` marks the cut): input quoted in a message
    (a key, a name, a value) never makes the message longer than that."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def printable(text: object) -> str:
    """``str(text)`` on one line, with every non-printable character escaped and URI
    credentials redacted (:func:`redact_userinfo`)."""
    s = redact_userinfo(str(text))
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def yaml_spelling(value: object) -> str:
    """An input value as YAML writes it, never a Python repr: ``null`` (not ``None``),
    ``true``, ``.nan``, ``.inf``, binary data by its size, a mapping or list by its kind."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, (bytes, bytearray)):
        return f"binary data ({len(value)} bytes)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def quoted(value: object) -> str:
    """:func:`yaml_spelling`, with text in single quotes (``'abc'``, ``null``, ``7``)."""
    return f"'{value}'" if isinstance(value, str) else yaml_spelling(value)
