"""``JoinedWrites``: a connection's transport that sends a response's head and its body in one write.

uvicorn writes an answer in two calls, its status line and headers at ``http.response.start`` and its body at
``http.response.body``: two system calls and two TCP segments for an answer that fits in one, the second of which
the client reads apart. ``JoinedWrites`` holds a write until the next one and sends the two joined; what is held
when the event loop's turn ends (a head whose body comes later: a streamed answer) is sent then, so nothing waits
past the turn that wrote it. ``flush`` sends it at once (the protocol calls it as an answer completes); ``close``
and ``write_eof`` send it first; ``abort`` drops it, as it drops what the transport holds. Every other call goes to
the transport (handler/cli/connections.py makes one for each connection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class JoinedWrites(asyncio.Transport):
    """``transport``, whose writes are joined in twos on ``loop``'s turn (see the module's docstring)."""

    __slots__ = ("held", "loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.transport, self.loop = transport, loop
        self.held: bytes | bytearray | memoryview | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self.held
        if held is None:
            self.held = data
            self.loop.call_soon(self.flush)
        else:
            self.held = None
            self.transport.write(b"".join((held, data)))

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Send what is held, if the transport is still open."""
        held = self.held
        if held is not None:
            self.held = None
            if not self.transport.is_closing():
                self.transport.write(held)

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.held = None
        self.transport.abort()

    def can_write_eof(self) -> bool:
        return self.transport.can_write_eof()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.transport.get_protocol()

    def is_reading(self) -> bool:
        return self.transport.is_reading()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + (len(self.held) if self.held is not None else 0)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.transport.get_write_buffer_limits()
