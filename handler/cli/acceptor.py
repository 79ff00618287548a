"""``Acceptor``: a worker's listening socket, every waiting connection accepted on each turn of the event loop.

An event loop's own server (``loop.create_server``) takes one connection per turn under uvloop: libuv accepts one
connection each time the listening socket is readable, and the next one a turn later. A loop saturated by a
sudden load turns slowly, so connections wait in the kernel's backlog for seconds, and a health check or a request
on a new connection waits behind all of them, even while the worker answers refusals at once on the connections it
has. ``Acceptor`` reads the listening socket itself (``loop.add_reader``): each time it is readable it accepts what
waits there, up to the backlog, and hands each connection to the protocol with ``loop.connect_accepted_socket``, as
asyncio's selector loop accepts up to the backlog at a time. A refused request then costs its connection one turn,
not its place in a queue of connections.

A worker holding ``limit`` open connections (OIP_MAX_CONNECTIONS) accepts no more until one closes, as Tomcat's
``maxConnections`` and gunicorn's ``worker_connections`` hold theirs: a new connection waits in the listening
socket's backlog, where another worker sharing the socket may take it, at no cost to this one. Accepting one to
answer it 503 and close it would not shed anything: a client that reconnects at once (a load generator, a pool)
comes back on the next turn, and the accepting, the new protocol and the refusal, over and over, take the loop's
time from the requests it holds. While full, the acceptor looks again every ``FULL_S``; it logs a warning naming the
setting when it finds itself full, at most once every ``SAY_FULL_S``.

The worker's server (handler/cli/worker.py) keeps ``Acceptor`` among uvicorn's ``servers``: ``close`` stops
accepting and closes the socket in this process (other workers sharing it keep accepting), ``wait_closed`` waits for
the connections being handed over.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import Callable, Collection

logger = logging.getLogger("uvicorn.error")

#: Seconds accepting pauses after an error other than an empty queue or an aborted connection (a process out of
#: file descriptors, EMFILE, most often): the connections stay queued, as asyncio's selector loop leaves them,
#: instead of failing on every turn.
RETRY_S = 1.0
#: Seconds between two looks at a worker that holds its limit of connections.
FULL_S = 0.01
#: Seconds between two warnings that the worker holds its limit of connections.
SAY_FULL_S = 60.0


class Acceptor:
    """Accepts connections on ``sock`` for ``protocol_factory``, at most ``backlog`` a turn, while ``connections``
    (the worker's open ones, uvicorn's ``server_state.connections``: the protocols whose ``connection_made`` has
    run) and those being handed over are fewer than ``limit``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.Protocol], backlog: int,
                 connections: Collection[object] = (), limit: int | None = None) -> None:  # fmt: skip
        self.loop, self.sock, self.protocol_factory, self.backlog = loop, sock, protocol_factory, max(1, backlog)
        self.connections, self.limit = connections, limit
        self.handing: set[asyncio.Task[object]] = set()
        #: The connections being handed over: each accepted socket until its protocol is made, then that protocol
        #: until its hand-over ends (a turn or more after its ``connection_made`` counts it among ``connections``).
        self.pending: set[object] = set()
        self.closed = False
        self.said_full = -math.inf  # when the last warning that the worker is full was logged (the loop's clock)
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self.accept)

    def room(self) -> int:
        """How many connections may be accepted now: the backlog, or fewer when the limit is that close."""
        if self.limit is None:
            return self.backlog
        connections = self.connections
        pending = sum(1 for each in self.pending if each not in connections)
        return min(self.backlog, self.limit - len(connections) - pending)

    def accept(self) -> None:
        """Every connection waiting, up to the room there is, each handed to a new protocol on this loop."""
        room = self.room()
        if room <= 0:
            now = self.loop.time()
            if len(self.connections) >= self.limit and now - self.said_full >= SAY_FULL_S:  # type: ignore[operator]
                self.said_full = now
                logger.warning(
                    "the worker holds %s connections, its limit (OIP_MAX_CONNECTIONS): new connections wait in the "
                    "listening socket's backlog until one closes",
                    self.limit,
                )
            self.pause(FULL_S)
            return
        for _ in range(room):
            try:
                conn, _address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                logger.warning("accepting connections pauses %s s: %s", RETRY_S, exc.strerror or exc)
                self.pause(RETRY_S)
                return
            self.pending.add(conn)
            task = self.loop.create_task(self.hand_over(conn))
            self.handing.add(task)
            task.add_done_callback(self.handing.discard)

    def pause(self, seconds: float) -> None:
        """Leave the waiting connections in the backlog for ``seconds``."""
        self.loop.remove_reader(self.sock.fileno())
        self.loop.call_later(seconds, self.resume)

    def resume(self) -> None:
        if not self.closed:
            self.loop.add_reader(self.sock.fileno(), self.accept)

    async def hand_over(self, conn: socket.socket) -> None:
        """``conn`` under a transport of this loop; a connection reset meanwhile is closed without a word."""
        pending = self.pending
        made: list[asyncio.Protocol] = []

        def protocol() -> asyncio.Protocol:
            made.append(self.protocol_factory())
            pending.add(made[0])
            pending.discard(conn)
            return made[0]

        try:
            await self.loop.connect_accepted_socket(protocol, conn)
        except OSError:
            conn.close()
        finally:
            pending.discard(conn)
            if made:
                pending.discard(made[0])

    def close(self) -> None:
        """Stop accepting and close the listening socket in this process."""
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()

    async def wait_closed(self) -> None:
        """Once the connections accepted before ``close`` are handed over."""
        if self.handing:
            await asyncio.wait(set(self.handing))
