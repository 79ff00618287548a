"""A worker's listening socket (handler/cli/acceptor.py): every connection waiting is taken within a few turns of
the event loop, under uvloop as under asyncio's own loop, so that a new connection is not left in the kernel's
backlog while a saturated loop turns slowly."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
import uvloop

from handler.cli.acceptor import FULL_S, RETRY_S, Acceptor
from handler.cli.worker import WorkerServer

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
#: Connections queued before the acceptor starts, and the loop's turns they are all taken in: a socket taking one
#: connection a turn (libuv's) is far from done after TURNS.
WAITING = 64
TURNS = 12
ROOT = Path(__file__).resolve().parents[2]


class Counted(asyncio.Protocol):
    """A protocol that records its connection."""

    def __init__(self, made: list[asyncio.BaseTransport]) -> None:
        self.made = made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made.append(transport)


@pytest.fixture(params=sorted(LOOPS))
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = LOOPS[request.param]()
    yield event_loop
    event_loop.close()


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    return sock


def queued(sock: socket.socket, count: int) -> list[socket.socket]:
    """``count`` clients connected to ``sock``: each handshake done by the kernel, none accepted yet."""
    return [socket.create_connection(sock.getsockname()) for _ in range(count)]


async def turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def taken(made: list[asyncio.BaseTransport], acceptor: Acceptor) -> int:
    """How many connections ``acceptor`` handed over in ``TURNS`` turns; the acceptor closed after them."""
    await turns(TURNS)
    count = len(made)
    acceptor.close()
    await acceptor.wait_closed()
    for transport in made:
        transport.close()
    await turns(2)
    return count


def test_every_waiting_connection_is_taken_within_a_few_turns(loop: asyncio.AbstractEventLoop) -> None:
    sock = listening()
    clients = queued(sock, WAITING)
    made: list[asyncio.BaseTransport] = []

    async def run() -> int:
        return await taken(made, Acceptor(asyncio.get_running_loop(), sock, lambda: Counted(made), 1024))

    try:
        assert loop.run_until_complete(run()) == WAITING
    finally:
        for client in clients:
            client.close()


def test_one_turn_takes_at_most_the_backlog(loop: asyncio.AbstractEventLoop) -> None:
    sock = listening()
    clients = queued(sock, 20)
    made: list[asyncio.BaseTransport] = []
    acceptor = Acceptor(loop, sock, lambda: Counted(made), 8)
    try:
        acceptor.accept()
        assert len(acceptor.handing) == 8
        assert loop.run_until_complete(taken(made, acceptor)) == 20
    finally:
        for client in clients:
            client.close()


class Open(asyncio.Protocol):
    """A protocol among ``connections`` from ``connection_made`` to ``connection_lost``, as uvicorn's are."""

    def __init__(self, connections: set[asyncio.Protocol], transports: list[asyncio.BaseTransport]) -> None:
        self.connections, self.transports = connections, transports

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connections.add(self)
        self.transports.append(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)


def test_a_worker_at_its_connection_limit_leaves_connections_waiting_until_one_goes(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A limit of 5 open connections and 8 waiting: 5 are taken and the others stay in the backlog however many
    turns pass; two that go let two more in, and the eighth still waits. The worker says it is full once."""
    sock = listening()
    clients = queued(sock, 8)
    connections: set[asyncio.Protocol] = set()
    made: list[asyncio.BaseTransport] = []
    seen: list[int] = []
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("uvicorn.error").addHandler(handler)

    async def run() -> None:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, lambda: Open(connections, made), 1024, connections, 5)
        await turns(TURNS)
        seen.extend((len(connections), len(made)))
        for transport in made[:2]:
            transport.close()
        while len(made) < 7:  # accepting looks again FULL_S after it found no room
            await asyncio.sleep(FULL_S)
        await turns(TURNS)
        while acceptor.pending:  # the last hand-overs end
            await asyncio.sleep(0)
        await asyncio.sleep(2 * FULL_S)  # accepting looks again, and finds no room
        seen.extend((len(connections), len(made)))
        await taken(made, acceptor)

    try:
        loop.run_until_complete(run())
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
        for client in clients:
            client.close()
    assert seen == [5, 5, 5, 7]
    assert lines == [  # once, though it was found full again after the two went
        "the worker holds 5 connections, its limit (OIP_MAX_CONNECTIONS): new connections wait in the listening "
        "socket's backlog until one closes"
    ]


def test_a_connection_made_is_counted_once_while_its_hand_over_ends(loop: asyncio.AbstractEventLoop) -> None:
    """A protocol whose ``connection_made`` has run is among the open connections before its hand-over ends: it
    takes one place of the limit, not two."""
    connections: set[asyncio.Protocol] = set()
    acceptor = Acceptor(loop, listening(), asyncio.Protocol, 1024, connections, 5)
    protocol = asyncio.Protocol()
    acceptor.pending.add(protocol)
    assert acceptor.room() == 4
    connections.add(protocol)
    assert acceptor.room() == 4
    acceptor.close()


def test_a_closed_acceptor_takes_nothing_more(loop: asyncio.AbstractEventLoop) -> None:
    sock = listening()
    address = sock.getsockname()
    made: list[asyncio.BaseTransport] = []
    acceptor = Acceptor(loop, sock, lambda: Counted(made), 8)
    assert not acceptor.closed
    acceptor.close()
    acceptor.close()  # a second close (uvicorn's shutdown after the drain's) is nothing
    assert acceptor.closed
    assert sock.fileno() == -1
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address).close()
    loop.run_until_complete(acceptor.wait_closed())
    assert made == []


def test_the_worker_server_listens_through_acceptors(loop: asyncio.AbstractEventLoop) -> None:
    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(app, lifespan="off", log_config=None, http="h11", ws="none")
    server = WorkerServer(config)
    sock = listening()
    clients = queued(sock, WAITING)

    async def run() -> tuple[list[type], int]:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0)
        await turns(TURNS)
        kinds, connected = [type(listener) for listener in server.servers], len(server.server_state.connections)
        server.should_exit = True
        await serving
        return kinds, connected

    try:
        kinds, connected = loop.run_until_complete(run())
    finally:
        for client in clients:
            client.close()
    assert kinds == [Acceptor]
    assert connected == WAITING


def out_of_file_descriptors() -> None:
    """Run in a process of its own (``python -c``): accepting while the process has no file descriptor left, then
    once it has; prints what was seen as JSON."""
    sock = listening()
    clients = queued(sock, 3)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("uvicorn.error").addHandler(handler)
    made: list[asyncio.BaseTransport] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def run() -> dict[str, object]:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, lambda: Counted(made), 8)
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        fillers = []
        try:
            while True:
                fillers.append(open(os.devnull))  # noqa: SIM115 (closed below)
        except OSError:
            pass
        await turns(TURNS)
        seen = {"made_while_full": len(made), "lines": list(lines)}
        for filler in fillers:
            filler.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        while len(made) < 3:  # accepting resumes RETRY_S after the refusal
            await asyncio.sleep(0.05)
        seen["made_after"] = len(made)
        acceptor.close()
        return seen

    print(json.dumps(asyncio.run(run())))
    for client in clients:
        client.close()


def test_a_process_out_of_file_descriptors_pauses_accepting_and_resumes() -> None:
    command = [sys.executable, "-c", "from tests.unit.test_acceptor import out_of_file_descriptors as f; f()"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    assert seen["made_while_full"] == 0
    assert seen["lines"] == [f"accepting connections pauses {RETRY_S} s: Too many open files"]
    assert seen["made_after"] == 3
