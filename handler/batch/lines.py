"""The lines of a JSON Lines stream, none held longer than a limit: a longer line is not loaded (its bytes are
counted and dropped as they come) and stands in the stream as an ``OverlongLine``, which its row reports as an
error. File iteration and botocore's ``iter_lines`` would hold a line whole, however long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

#: Bytes read at a time.
CHUNK_BYTES: Final = 1 << 20


class OverlongLine(bytes):
    """A line that was longer than the limit: empty, with the bytes it had (``size``)."""

    size: int

    def __new__(cls, size: int) -> OverlongLine:
        line = super().__new__(cls)
        line.size = size
        return line


def read_chunks(read: Callable[[int], bytes], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """``read(size)`` until it gives nothing: a file's (or an S3 body's) bytes, ``size`` at a time."""
    while chunk := read(size):
        yield chunk


def bounded_lines(chunks: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """The ``\\n``-separated lines of a byte stream, without their newline (a last line without one too); a line
    of more than ``limit`` bytes is an ``OverlongLine``."""
    pending = bytearray()  # the start of the current line, while it is within the limit
    dropped = 0  # bytes of the current line once it is over the limit (none kept)
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = (len(chunk) if end < 0 else end) - start
            if dropped or len(pending) + piece > limit:
                dropped += len(pending) + piece
                pending.clear()
            elif end < 0:
                pending += chunk[start:]
            elif pending:
                pending += chunk[start:end]
            if end < 0:
                break
            if dropped:
                yield OverlongLine(dropped)
            elif pending:
                yield bytes(pending)
            else:
                yield chunk[start:end]
            pending.clear()
            dropped = 0
            start = end + 1
    if dropped:
        yield OverlongLine(dropped)
    elif pending:
        yield bytes(pending)
