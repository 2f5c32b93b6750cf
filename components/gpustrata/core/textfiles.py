"""Read untrusted text files: regular files only, UTF-8, no binary data; errors name the
file and line.

A FIFO, a device (``/dev/zero``), a socket or a broken link is refused without being
read (opened non-blocking, checked with ``fstat``); data is read in 1 MiB chunks and
refused at the first chunk with a NUL byte, so ``/dev/zero`` on stdin ends at once.
Used for manifests and policy configs (``check``) and for stack files (``plan``).
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import Any

from gpustrata.core.errors import InputError

__all__ = [
    "TextFileError",
    "decode_text",
    "file_kind",
    "read_chunks",
    "read_text_file",
    "special_file_error",
    "too_large",
]


class TextFileError(InputError):
    """An input that is not readable text: ``name:line: reason`` (exit 2)."""

    def __init__(self, name: str, reason: str, line: int | None = None) -> None:
        self.name, self.reason, self.line = name, reason, line
        super().__init__(f"{name}:{line}: {reason}" if line is not None else f"{name}: {reason}")


_CHUNK = 1 << 20


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def special_file_error(path: Path, why: str) -> TextFileError:
    """The error for a path that is not a regular file (*why* says what it is)."""
    return TextFileError(
        str(path),
        f"{why}; gpustrata reads only regular files (a pipe or device may never "
        "end): remove it, or pass its content on stdin with -",
    )


def read_chunks(read: Any, name: str, max_bytes: int | None = None) -> bytes:
    """Read to the end in chunks, refusing binary data at its first chunk (``/dev/zero``)
    and, when *max_bytes* is given, more than that many bytes.

    What is reported is what reading it all would report: a byte that is not UTF-8
    (read so far) before the NUL bytes.
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            break
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise TextFileError(name, too_large(max_bytes))
        chunks.append(chunk)
        if b"\x00" in chunk:
            data = b"".join(chunks)
            try:
                codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=False)
            except UnicodeDecodeError:
                decode_text(data, name)  # raises, naming the byte
            _refuse_nul(data.decode("utf-8-sig", errors="replace"), name)
    return b"".join(chunks)


def read_text_file(path: Path, max_bytes: int | None = None) -> str:
    """Read a regular file; FIFOs, devices, sockets and broken links are refused unopened.

    Opened non-blocking and checked with ``fstat`` on the open descriptor, so a path
    swapped for a FIFO after the check cannot block the run. A file over *max_bytes*
    (when given) is refused by its size before any of it is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if not path.exists():
            if path.is_symlink():
                raise special_file_error(
                    path, "a symbolic link to nothing (or a link loop)"
                ) from None
            raise TextFileError(str(path), "no such file or directory") from None
        raise TextFileError(str(path), f"cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise special_file_error(path, file_kind(mode))
        size = os.fstat(fd).st_size
        if max_bytes is not None and size > max_bytes:
            raise TextFileError(str(path), f"{size:,} bytes, {too_large(max_bytes)}")
        os.set_blocking(fd, True)
        try:
            data = read_chunks(file.read, str(path), max_bytes)  # a growing file stops too
        except OSError as exc:
            raise TextFileError(str(path), f"cannot read ({exc.strerror})") from None
    return decode_text(data, str(path))


def too_large(max_bytes: int) -> str:
    """Why an input over *max_bytes* is refused, with the fix."""
    return (
        f"over the {max_bytes:,} bytes gpustrata reads from one input of this kind: is it "
        "the right file? Split it, or check its parts one by one"
    )


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text (a BOM is dropped) without NUL bytes; a :class:`TextFileError` naming
    the line otherwise."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TextFileError(
            name, f"not UTF-8 text (byte {exc.start}); is it a binary file?", line
        ) from None
    _refuse_nul(text, name)
    return text


def _refuse_nul(text: str, name: str) -> None:
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise TextFileError(name, "binary input (contains NUL bytes), not YAML or JSON", line)
