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
        pieces = chunk.split(b"\n")
        last = pieces.pop()  # the start of the next line: empty when the chunk ends with a newline
        if pieces:
            first = pieces[0]  # the end of the line the chunks before began
            if dropped or len(pending) + len(first) > limit:
                yield OverlongLine(dropped + len(pending) + len(first))
            elif pending:
                pending += first
                yield bytes(pending)
            else:
                yield first
            pending.clear()
            dropped = 0
            if len(pieces) > 1:
                whole = pieces[1:]
                if max(map(len, whole)) <= limit:
                    yield from whole
                else:
                    yield from (piece if len(piece) <= limit else OverlongLine(len(piece)) for piece in whole)
        if dropped or len(pending) + len(last) > limit:
            dropped += len(pending) + len(last)
            pending.clear()
        else:
            pending += last
    if dropped:
        yield OverlongLine(dropped)
    elif pending:
        yield bytes(pending)
