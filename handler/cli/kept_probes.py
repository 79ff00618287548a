"""``KeptProbes``: the connections on which a client polls a worker's probes, kept by a thread of their own.

Once the accepting thread (handler/cli/acceptor.py) has answered a probe's request on a connection the client keeps
alive, the connection comes here: this thread waits for its next request and answers it as the accepting thread
would (handler/cli/probes.py), until the client sends anything else, which goes to the event loop unread, or the
connection stays idle ``OIP_KEEP_ALIVE_TIMEOUT`` seconds, after which it is closed, as uvicorn closes one. A thread
apart from the accepting one, so that a probe waits for no pass over a sudden load's new connections: with the
event loop past its capacity, each socket call of a thread other than the loop's waits up to Python's switch
interval for the interpreter, and a pass over a few hundred new connections takes hundreds of milliseconds.

An error of its own is logged and the thread goes on.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Final

from handler.cli.probes import Probes
from handler.cli.selector_waker import SelectorWaker

logger = logging.getLogger("uvicorn.error")

#: Seconds the thread pauses after an error of its own.
RETRY_S: Final = 1.0


class KeptProbes:
    """Keeps connections for ``probes`` (see the module's docstring); ``hand_over`` gives one to the event loop,
    ``drop`` closes one the loop never had."""

    def __init__(self, probes: Probes, hand_over: Callable[[list[socket.socket]], None],
                 drop: Callable[[socket.socket], None]) -> None:  # fmt: skip
        self.probes, self.hand_over, self.drop = probes, hand_over, drop
        self.idle_s = probes.limits.keep_alive_timeout
        self.closed = False
        self.selector = selectors.DefaultSelector()
        self.waker = SelectorWaker(self.selector)
        #: Connections given by ``keep`` and not yet waited on (the accepting thread adds, this one takes).
        self.incoming: list[socket.socket] = []
        self.lock = threading.Lock()
        #: Whether the thread has ended (after ``close``): what ``keep`` is given then goes to the loop at once.
        self.ended = False
        #: The connections waited on, each until when it may stay idle.
        self.kept: dict[socket.socket, float] = {}
        self.thread = threading.Thread(target=self.run, name="oip-probes", daemon=True)
        self.thread.start()

    def keep(self, conn: socket.socket) -> None:
        """Wait for ``conn``'s next request (from any thread); once the thread has ended, ``conn`` goes to the loop."""
        with self.lock:
            ended = self.ended
            if not ended:
                self.incoming.append(conn)
        if ended:
            self.hand_over([conn])
        else:
            self.waker.wake()

    def run(self) -> None:
        """Until ``close``: answer the kept connections' probes, hand anything else to the loop, close the idle."""
        try:
            while not self.closed:
                try:
                    self.turn()
                except Exception:
                    logger.exception("answering kept probes: the thread goes on after %s s", RETRY_S)
                    time.sleep(RETRY_S)
        finally:
            with self.lock:
                left, self.incoming, self.ended = [*self.kept, *self.incoming], [], True
            self.kept.clear()
            if left:
                self.hand_over(left)
            self.selector.close()

    def turn(self) -> None:
        """Wait for a request on a kept connection (or a new one to keep, or the first idle deadline), and act on
        what came."""
        with self.lock:
            incoming, self.incoming = self.incoming, []
        until = time.monotonic() + self.idle_s
        for conn in incoming:
            self.kept[conn] = until
            self.selector.register(conn, selectors.EVENT_READ)
        now = time.monotonic()
        wait = max(0.0, min(self.kept.values()) - now) if self.kept else None
        for key, _ in self.selector.select(wait):
            conn = key.fileobj
            if self.waker.woken(conn):
                continue
            assert isinstance(conn, socket.socket)
            self.selector.unregister(conn)
            del self.kept[conn]
            kept = self.probes.serve(conn, self.probes.peek(conn))
            if kept:
                self.kept[conn] = time.monotonic() + self.idle_s
                self.selector.register(conn, selectors.EVENT_READ)
            elif kept is None:
                self.hand_over([conn])
            else:
                self.drop(conn)
        now = time.monotonic()
        for conn in [conn for conn, until in self.kept.items() if until <= now]:
            self.selector.unregister(conn)
            del self.kept[conn]
            self.drop(conn)

    def close(self) -> None:
        """Stop; the connections kept go to the event loop."""
        if self.closed:
            return
        self.closed = True
        self.waker.stop(self.thread)
