"""``bounded_lines`` gives the lines a plain split of the whole stream gives, however the stream is cut into chunks,
a line longer than the limit as an ``OverlongLine`` of its size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from handler.batch.lines import OverlongLine, bounded_lines


def _expected(text: bytes, limit: int) -> list[tuple[str, int | bytes]]:
    lines = text.split(b"\n")
    if lines[-1] == b"":  # a newline at the end closes the last line; nothing follows it
        lines.pop()
    return [("long", len(line)) if len(line) > limit else ("line", line) for line in lines]


@given(st.binary(max_size=80).map(lambda b: b.replace(b"\r", b"\n")), st.data(), st.integers(0, 12))
def test_lines_are_those_of_the_whole_stream(text: bytes, data: st.DataObject, limit: int) -> None:
    text = bytes(byte if byte % 3 else 10 for byte in text)  # plenty of newlines
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if b > a]
    found = [
        ("long", line.size) if isinstance(line, OverlongLine) else ("line", bytes(line))
        for line in bounded_lines(iter(chunks), limit)
    ]
    assert found == _expected(text, limit)
