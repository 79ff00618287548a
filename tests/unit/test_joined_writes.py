"""handler/cli/joined_writes.py: a response's head and body leave in one write; nothing held waits past the event
loop's turn; close sends what is held and abort drops it. On a transport that records its writes, and on a real
connection (a socket pair under the loop's own transport)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from handler.cli.joined_writes import JoinedWrites

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Recorded(asyncio.Transport):
    """A transport that keeps what is written to it, call by call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[object] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closing, "written after close"
        self.calls.append(bytes(data))

    def close(self) -> None:
        self.calls.append("close")
        self.closing = True

    def abort(self) -> None:
        self.calls.append("abort")
        self.closing = True

    def write_eof(self) -> None:
        self.calls.append("eof")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _turn(loop: asyncio.AbstractEventLoop) -> None:
    """Run the callbacks the loop has ready (one turn's end for what was written before it)."""
    loop.run_until_complete(asyncio.sleep(0))


def test_a_head_and_its_body_leave_in_one_write(loop: asyncio.AbstractEventLoop) -> None:
    recorded = Recorded()
    joined = JoinedWrites(recorded, loop)
    joined.write(HEAD)
    assert joined.get_write_buffer_size() == len(HEAD)
    joined.write(b"{}")
    assert recorded.calls == [HEAD + b"{}"]
    joined.write(HEAD)
    joined.flush()  # as the protocol does when the answer completes
    assert recorded.calls == [HEAD + b"{}", HEAD]
    _turn(loop)
    assert recorded.calls == [HEAD + b"{}", HEAD], "nothing held: the turn's end writes nothing"


def test_a_head_alone_leaves_at_the_turns_end(loop: asyncio.AbstractEventLoop) -> None:
    recorded = Recorded()
    joined = JoinedWrites(recorded, loop)
    joined.writelines([HEAD])
    assert recorded.calls == []
    _turn(loop)
    assert recorded.calls == [HEAD]


@pytest.mark.parametrize(
    ("end", "calls"),
    [("close", [HEAD, "close"]), ("write_eof", [HEAD, "eof"]), ("abort", ["abort"])],
)
def test_what_is_held_goes_before_close_and_is_dropped_by_abort(
    loop: asyncio.AbstractEventLoop, end: str, calls: list[object]
) -> None:
    recorded = Recorded()
    joined = JoinedWrites(recorded, loop)
    joined.write(HEAD)
    getattr(joined, end)()
    _turn(loop)
    assert recorded.calls == calls


def test_on_a_real_connection(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's own transport over a socket pair: a head held at a turn's end reaches the peer; a head and body
    arrive whole; what close finds held arrives before the end of the stream."""
    ours, peer = socket.socketpair()
    with peer:
        transport, _ = loop.run_until_complete(loop.connect_accepted_socket(asyncio.Protocol, ours))
        joined = JoinedWrites(transport, loop)  # type: ignore[arg-type]
        joined.write(HEAD)
        _turn(loop)
        assert peer.recv(1024) == HEAD
        joined.write(HEAD)
        joined.write(b"{}")
        joined.write(b"last")
        joined.close()
        _turn(loop)
        received = b""
        while chunk := peer.recv(1024):
            received += chunk
        assert received == HEAD + b"{}" + b"last"
