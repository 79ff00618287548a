"""``Acceptor``: a worker's listening socket, read by a thread of its own that hands each connection to the event loop.

An event loop's own server (``loop.create_server``) takes one connection per turn under uvloop, and a loop
saturated by a sudden load turns every few milliseconds: connections would wait in the kernel's backlog, and a
health check on a new connection several turns more before the app answered it. ``Acceptor``'s thread accepts
every connection waiting, up to the backlog at a time, and waits for each one's first bytes (at most
``FIRST_BYTES_S``). A probe's request there (health, metadata: handler/cli/probes.py) is answered by the thread
itself, as Triton's HTTP threads answer them whatever its models are doing, and a connection the client keeps alive
goes on to a thread that answers its next probes (handler/cli/kept_probes.py), so that a load balancer or a
dashboard polling on one connection is answered apart from the event loop throughout. Every other connection, and
a kept one at its first other request, goes to the event loop (``loop.call_soon_threadsafe``), under a transport
made by ``loop.connect_accepted_socket``, its bytes unread.

A worker holding ``limit`` open connections (OIP_MAX_CONNECTIONS) accepts no more until one closes, as Tomcat's
``maxConnections`` and gunicorn's ``worker_connections`` hold theirs: a new connection waits in the listening
socket's backlog, where another worker sharing the socket may take it, at no cost to this one. Accepting one to
answer it 503 and close it would not shed anything: a client that reconnects at once (a load generator, a pool)
comes back at once, and the accepting, the new protocol and the refusal, over and over, take the loop's time from
the requests it holds. While full, the thread looks again every ``FULL_S``; it logs a warning naming the setting
when it finds itself full, at most once every ``SAY_FULL_S``. An error of its own is logged and the thread goes on.

The worker's server (handler/cli/worker.py) keeps ``Acceptor`` among uvicorn's ``servers``: ``close`` stops the
thread and closes the socket in this process (other workers sharing it keep accepting), ``wait_closed`` waits for
the connections being handed over.
"""

from __future__ import annotations

import asyncio
import logging
import math
import selectors
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from handler.cli import held_calls
from handler.cli.selector_waker import SelectorWaker

if TYPE_CHECKING:  # imported by the worker where httptools is installed
    from handler.cli.kept_probes import KeptProbes
    from handler.cli.probes import Probes

logger = logging.getLogger("uvicorn.error")

#: Seconds accepting pauses after an error other than an empty queue or an aborted connection (a process out of
#: file descriptors, EMFILE, most often): the connections stay queued, as asyncio's selector loop leaves them,
#: instead of failing on every turn.
RETRY_S = 1.0
#: Seconds between two looks at a worker that holds its limit of connections.
FULL_S = 0.01
#: Seconds between two warnings that the worker holds its limit of connections.
SAY_FULL_S = 60.0
#: Seconds a new connection's first bytes are waited for in the thread before it goes to the event loop without
#: them (a pool that opens connections ahead of its requests): the client's bytes come right after its handshake.
FIRST_BYTES_S = 0.05


class Acceptor:
    """Accepts connections on ``sock`` for ``protocol_factory``, at most ``backlog`` at a time, while ``connections``
    (the worker's open ones, uvicorn's ``server_state.connections``: the protocols whose ``connection_made`` has
    run) and those being handed over are fewer than ``limit``; ``probes`` answers a probe's requests."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.Protocol], backlog: int,
                 connections: Collection[object] = (), limit: int | None = None,
                 probes: Probes | None = None) -> None:  # fmt: skip
        self.loop, self.sock, self.protocol_factory, self.backlog = loop, sock, protocol_factory, max(1, backlog)
        self.connections, self.limit, self.probes = connections, limit, probes
        self.handing: set[asyncio.Task[object]] = set()
        #: The connections accepted and not yet open: each accepted socket until its protocol is made, then that
        #: protocol until its hand-over ends (a turn or more after its ``connection_made`` counts it among
        #: ``connections``). Both threads change it, under ``lock``.
        self.pending: set[object] = set()
        self.lock = threading.Lock()
        self.closed = False
        self.said_full = -math.inf  # when the last warning that the worker is full was logged (time.monotonic)
        sock.setblocking(False)
        self.selector = selectors.DefaultSelector()  # made here, so that a process out of files fails to start
        self.waker = SelectorWaker(self.selector)
        self.outgoing: list[socket.socket] = []  # the thread's connections for the loop, sent off once a pass
        self.kept: KeptProbes | None = None
        if probes is not None:
            from handler.cli.kept_probes import KeptProbes

            self.kept = KeptProbes(probes, self.send, self.drop)
        self.thread = threading.Thread(target=self.run, name="oip-acceptor", daemon=True)
        self.thread.start()

    def room(self) -> int:
        """How many connections may be accepted now: the backlog, or fewer when the limit is that close."""
        if self.limit is None:
            return self.backlog
        connections = self.connections
        with self.lock:
            pending = sum(1 for each in self.pending if each not in connections)
        return min(self.backlog, self.limit - len(connections) - pending)

    # The thread

    def run(self) -> None:
        """Until ``close``: accept, wait for first bytes, answer probes, hand the rest to the loop."""
        selector = self.selector
        held: dict[socket.socket, float] = {}  # connections waiting for their first bytes: until when
        paused_until: float | None = None  # accepting paused (full, or an error) until then; None: listening
        selector.register(self.sock, selectors.EVENT_READ)
        try:
            while not self.closed:
                now = time.monotonic()
                if paused_until is not None and now >= paused_until:
                    selector.register(self.sock, selectors.EVENT_READ)
                    paused_until = None
                waits = [until - now for until in held.values()]
                if paused_until is not None:
                    waits.append(paused_until - now)
                try:
                    ready = selector.select(max(0.0, min(waits)) if waits else None)
                    for key, _ in ready:
                        if key.fileobj is self.sock:
                            pause = self.accept(selector, held)
                            if pause:
                                selector.unregister(self.sock)
                                paused_until = time.monotonic() + pause
                        elif not self.waker.woken(key.fileobj):  # a held connection's first bytes
                            conn = key.fileobj
                            assert isinstance(conn, socket.socket)
                            selector.unregister(conn)
                            del held[conn]
                            self.first_bytes(conn, self.probes.peek(conn))
                    now = time.monotonic()
                    for conn in [conn for conn, until in held.items() if until <= now]:
                        selector.unregister(conn)
                        del held[conn]
                        self.hand_over_soon(conn)
                    self.send_off()
                except Exception:
                    logger.exception("accepting connections: the accepting thread goes on after %s s", RETRY_S)
                    time.sleep(RETRY_S)
        finally:
            for conn in held:
                self.hand_over_soon(conn)
            self.send_off()
            selector.close()

    def accept(self, selector: selectors.BaseSelector, held: dict[socket.socket, float]) -> float:
        """Every connection waiting, up to the room there is, each held for its first bytes; the seconds accepting
        pauses for (0: none)."""
        room = self.room()
        if room <= 0:
            now = time.monotonic()
            if len(self.connections) >= self.limit and now - self.said_full >= SAY_FULL_S:  # type: ignore[operator]
                self.said_full = now
                logger.warning(
                    "the worker holds %s connections, its limit (OIP_MAX_CONNECTIONS): new connections wait in the "
                    "listening socket's backlog until one closes",
                    self.limit,
                )
            return FULL_S
        until = time.monotonic() + FIRST_BYTES_S
        for _ in range(room):
            try:
                conn = held_calls.accept(self.sock)  # keeping the interpreter: see held_calls.py
            except (BlockingIOError, InterruptedError):
                return 0.0
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                logger.warning("accepting connections pauses %s s: %s", RETRY_S, exc.strerror or exc)
                return RETRY_S
            with self.lock:
                self.pending.add(conn)
            if self.probes is None:
                self.hand_over_soon(conn)
                continue
            data = self.probes.peek(conn)  # under load a client's first bytes are often there already
            if data is None:
                held[conn] = until
                selector.register(conn, selectors.EVENT_READ)
            else:
                self.first_bytes(conn, data)
        return 0.0

    def first_bytes(self, conn: socket.socket, data: bytes | None) -> None:
        """``conn``'s waiting bytes, peeked (empty: it has closed; None: none yet, it goes to the loop): a probe's
        request is answered here and the connection kept for the next one (``KeptProbes``); anything else goes to
        the loop."""
        assert self.probes is not None and self.kept is not None
        kept = self.probes.serve(conn, data)
        if kept is False:
            self.drop(conn)
        elif kept:
            self.kept.keep(conn)
        else:
            self.hand_over_soon(conn)

    def drop(self, conn: socket.socket) -> None:
        """Close ``conn``, which the loop never had."""
        with self.lock:
            self.pending.discard(conn)
        conn.close()

    def hand_over_soon(self, conn: socket.socket) -> None:
        """``conn`` to the event loop, with the others of this pass of the thread (``send_off``)."""
        self.outgoing.append(conn)

    def send_off(self) -> None:
        """The connections to hand over, to the event loop in one call (closed when the loop is)."""
        if not self.outgoing:
            return
        outgoing, self.outgoing = self.outgoing, []
        self.send(outgoing)

    def send(self, outgoing: list[socket.socket]) -> None:
        """``outgoing`` to the event loop in one call, from any thread (closed when the loop is). The loop makes each
        non-blocking: a socket call of this thread waits for the interpreter while the loop is busy."""
        try:
            self.loop.call_soon_threadsafe(self.take, outgoing)
        except RuntimeError:
            with self.lock:
                self.pending.difference_update(outgoing)
            for conn in outgoing:
                conn.close()

    # The event loop

    def take(self, conns: list[socket.socket]) -> None:
        for conn in conns:
            task = self.loop.create_task(self.hand_over(conn))
            self.handing.add(task)
            task.add_done_callback(self.handing.discard)

    async def hand_over(self, conn: socket.socket) -> None:
        """``conn`` under a transport of this loop; a connection reset meanwhile is closed without a word."""
        pending, lock = self.pending, self.lock
        made: list[asyncio.Protocol] = []

        def protocol() -> asyncio.Protocol:
            made.append(self.protocol_factory())
            with lock:
                pending.add(made[0])
                pending.discard(conn)
            return made[0]

        try:
            conn.setblocking(False)
            await self.loop.connect_accepted_socket(protocol, conn)
        except OSError:
            conn.close()
        finally:
            with lock:
                pending.discard(conn)
                if made:
                    pending.discard(made[0])

    def close(self) -> None:
        """Stop accepting and close the listening socket in this process; the connections the thread held go to the
        loop."""
        if self.closed:
            return
        self.closed = True
        self.waker.stop(self.thread)
        if self.kept is not None:
            self.kept.close()
        self.sock.close()

    async def wait_closed(self) -> None:
        """Once the connections accepted before ``close`` are handed over."""
        await asyncio.sleep(0)  # the hand-overs the thread scheduled as it ended
        if self.handing:
            await asyncio.wait(set(self.handing))
