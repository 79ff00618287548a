"""A worker's listening socket (handler/cli/acceptor.py): a thread of its own accepts every connection waiting and
hands it to the event loop, under uvloop as under asyncio's own loop, so that a new connection is not left in the
kernel's backlog while a saturated loop turns slowly; a new connection's health check is answered by that thread
while the loop is busy."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
import uvloop
from uvicorn.server import ServerState

from handler.cli.acceptor import RETRY_S, Acceptor
from handler.cli.connections import ConnectionLimits
from handler.cli.probes import Probes
from handler.cli.worker import WorkerServer
from tests.support import procfs

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
#: Connections queued before the acceptor starts.
WAITING = 64
#: Seconds a test's client waits for an answer before it fails (a failure, not a measure).
PATIENCE_S = 60
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


async def until(condition: Callable[[], bool]) -> None:
    """Once ``condition`` holds, looked at every millisecond while the loop turns."""
    while not condition():
        await asyncio.sleep(0.001)


async def closed(made: list[asyncio.BaseTransport], acceptor: Acceptor) -> None:
    """The acceptor closed, and the connections it handed over."""
    acceptor.close()
    await acceptor.wait_closed()
    for transport in made:
        transport.close()
    await asyncio.sleep(0)


def test_every_waiting_connection_is_taken(loop: asyncio.AbstractEventLoop) -> None:
    sock = listening()
    clients = queued(sock, WAITING)
    made: list[asyncio.BaseTransport] = []

    async def run() -> int:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, lambda: Counted(made), 8)
        await until(lambda: len(made) == WAITING)
        await closed(made, acceptor)
        return len(made)

    try:
        assert loop.run_until_complete(run()) == WAITING
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
    """A limit of 5 open connections and 8 waiting: 5 are taken and the others stay in the listening socket's
    accept queue; two that go let two more in, and the eighth still waits there. The worker says it is full once."""
    sock = listening()
    port = sock.getsockname()[1]
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
        await until(lambda: bool(lines))  # the thread found no room
        await until(lambda: not acceptor.pending)
        seen.extend((len(connections), len(made), procfs.accept_queue(port)))
        for transport in made[:2]:
            transport.close()
        await until(lambda: len(made) == 7 and not acceptor.pending)
        seen.extend((len(connections), len(made), procfs.accept_queue(port)))
        await closed(made, acceptor)

    try:
        loop.run_until_complete(run())
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
        for client in clients:
            client.close()
    assert seen == [5, 5, 3, 5, 7, 1]
    assert lines == [  # once, though it was found full again after the two went
        "the worker holds 5 connections, its limit (OIP_MAX_CONNECTIONS): new connections wait in the listening "
        "socket's backlog until one closes"
    ]


def test_a_pass_takes_at_most_the_backlog_and_the_room_the_limit_leaves(loop: asyncio.AbstractEventLoop) -> None:
    connections: set[asyncio.Protocol] = {asyncio.Protocol() for _ in range(3)}
    unlimited = Acceptor(loop, listening(), asyncio.Protocol, 8)
    limited = Acceptor(loop, listening(), asyncio.Protocol, 8, connections, 5)
    try:
        assert (unlimited.room(), limited.room()) == (8, 2)
    finally:
        unlimited.close()
        limited.close()


def test_a_connection_made_is_counted_once_while_its_hand_over_ends(loop: asyncio.AbstractEventLoop) -> None:
    """A protocol whose ``connection_made`` has run is among the open connections before its hand-over ends: it
    takes one place of the limit, not two."""
    connections: set[asyncio.Protocol] = set()
    sock = listening()
    acceptor = Acceptor(loop, sock, asyncio.Protocol, 1024, connections, 5)
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
        await until(lambda: server.started and len(server.server_state.connections) == WAITING)
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
    clients: list[socket.socket] = []
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("uvicorn.error").addHandler(handler)
    made: list[asyncio.BaseTransport] = []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def run() -> dict[str, object]:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, lambda: Counted(made), 8)
        clients.extend(socket.socket() for _ in range(3))  # connected once no file descriptor is left
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        fillers = []
        try:
            while True:
                fillers.append(open(os.devnull))  # noqa: SIM115 (closed below)
        except OSError:
            pass
        for client in clients:
            client.connect(sock.getsockname())
        await until(lambda: bool(lines))
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


def ask(port: int, request: bytes) -> bytes:
    """``request`` on a new connection, and everything answered until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


def test_a_new_connections_health_check_is_answered_while_the_event_loop_is_blocked(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The loop is held by a callback that waits until the health check has its answer: the acceptor's thread
    answered it. A connection asking anything else is handed over, its bytes unread, once the loop turns again."""
    from handler.config.settings import DEMO_REPOSITORY
    from handler.rest.probe_answers import ProbeAnswers
    from handler.runtime.container import build_dataplane
    from tests.conftest import make_settings

    health = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY)), eager_load=True)
    limits = ConnectionLimits(10, 30, 8192, 100, 5)
    served = ServerState()
    served.default_headers = [(b"server", b"uvicorn")]
    sock = listening()
    port = sock.getsockname()[1]
    other = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)
    other.sendall(b"GET /v2/models/iris/config HTTP/1.1\r\nConnection: close\r\n\r\n")
    answers: list[bytes] = []
    answered = threading.Event()

    def health_check() -> None:
        answers.append(ask(port, b"GET /v2/health/ready HTTP/1.1\r\nConnection: close\r\n\r\n"))
        answered.set()

    class Reads(asyncio.Protocol):
        def __init__(self) -> None:
            self.read = b""

        def data_received(self, data: bytes) -> None:
            self.read += data

    protocols: list[Reads] = []

    def made() -> Reads:
        protocols.append(Reads())
        return protocols[-1]

    async def run() -> list[bytes]:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, made, 8, (), None, Probes(health, served, limits))
        client = threading.Thread(target=health_check)
        client.start()
        assert answered.wait(PATIENCE_S), "the health check was not answered while the loop was held"
        handed_while_held = len(protocols)
        client.join()
        await until(lambda: bool(protocols) and bool(protocols[0].read))
        acceptor.close()
        await acceptor.wait_closed()
        return [str(handed_while_held).encode(), protocols[0].read]

    try:
        handed_while_held, read = loop.run_until_complete(run())
    finally:
        other.close()
    assert answers == [
        b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-length: 14\r\ncontent-type: application/json\r\n"
        b'connection: close\r\n\r\n{"ready":true}'
    ]
    assert handed_while_held == b"0"
    assert read == b"GET /v2/models/iris/config HTTP/1.1\r\nConnection: close\r\n\r\n"
