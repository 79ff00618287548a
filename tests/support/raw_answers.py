"""``RawAnswers``: the HTTP/1.1 answers on one raw socket, read as a test asks for them."""

from __future__ import annotations

import re
import socket

CONTENT_LENGTH = re.compile(rb"(?i)content-length: *(\d+)")


class RawAnswers:
    """What comes on ``sock``, kept across answers (a pipelined answer's bytes wait for the next ``next``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.received = sock, b""

    def until(self, marker: bytes) -> bytes:
        """Everything up to and with ``marker`` (an interim answer's head, say)."""
        while marker not in self.received:
            self._more()
        found, self.received = self.received.split(marker, 1)
        return found + marker

    def next(self) -> bytes:
        """The next answer: its head and a body of its content-length (none without one)."""
        while b"\r\n\r\n" not in self.received:
            self._more()
        head = self.received.split(b"\r\n\r\n", 1)[0]
        length = CONTENT_LENGTH.search(head)
        size = len(head) + 4 + (int(length[1]) if length else 0)
        while len(self.received) < size:
            self._more()
        answer, self.received = self.received[:size], self.received[size:]
        return answer

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"closed after {self.received!r}"
        self.received += chunk
