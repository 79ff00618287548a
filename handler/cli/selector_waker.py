"""``SelectorWaker``: a socket pair that wakes a thread waiting in a selector, from any thread."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class SelectorWaker:
    """Wakes the thread that waits in ``selector`` (its own end is registered there for reading)."""

    def __init__(self, selector: selectors.BaseSelector) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        selector.register(self.reader, selectors.EVENT_READ)

    def wake(self) -> None:
        """Make the selector's next ``select`` return (from any thread)."""
        with contextlib.suppress(OSError):
            self.writer.send(b"\0")

    def woken(self, fileobj: object) -> bool:
        """Whether ``fileobj``, ready in the selector, is this waker's end: then what woke it is read."""
        if fileobj is not self.reader:
            return False
        with contextlib.suppress(BlockingIOError):
            self.reader.recv(4096)
        return True

    def stop(self, thread: threading.Thread) -> None:
        """Wake ``thread``, which sees it is to stop, and wait for it to end; then close the pair."""
        self.wake()
        thread.join()
        self.reader.close()
        self.writer.close()
