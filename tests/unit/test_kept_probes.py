"""A connection on which a client polls probes (handler/cli/kept_probes.py): after the accepting thread answers its
first request, a thread of its own answers the next ones while the event loop is held; the first request of another
kind goes to the loop with its bytes unread; an idle one is closed after the keep-alive timeout, as uvicorn closes
one, and never reaches the loop; one given once the thread has ended goes to the loop."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from uvicorn.server import ServerState

from handler.cli.acceptor import Acceptor
from handler.cli.connections import ConnectionLimits
from handler.cli.kept_probes import KeptProbes
from handler.cli.probes import Probes
from handler.config.settings import DEMO_REPOSITORY
from handler.rest.probe_answers import ProbeAnswers
from handler.runtime.container import build_dataplane
from tests.conftest import make_settings
from tests.support.raw_answers import RawAnswers
from tests.unit.test_acceptor import LOOPS, PATIENCE_S, listening, until

#: What the thread answers, in the order a poller asks them.
POLLED = ["/v2/health/ready", "/v2/models/iris", "/v2/health/live", "/v2/models/iris/ready", "/v2"]
OTHER = b"GET /v2/models/iris/config HTTP/1.1\r\nHost: a\r\n\r\n"


@pytest.fixture(params=sorted(LOOPS))
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = LOOPS[request.param]()
    yield event_loop
    event_loop.close()


@pytest.fixture(scope="module")
def answers() -> ProbeAnswers:
    return ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY)), eager_load=True)


class Reads(asyncio.Protocol):
    def __init__(self) -> None:
        self.read = b""

    def data_received(self, data: bytes) -> None:
        self.read += data


def probes(answers: ProbeAnswers, keep_alive_timeout: float) -> Probes:
    served = ServerState()
    served.default_headers = [(b"server", b"uvicorn")]
    return Probes(answers, served, ConnectionLimits(10, 30, 8192, 100, keep_alive_timeout))


def answer_on(sock: socket.socket, request: bytes) -> bytes:
    """``request`` on ``sock``, and its answer (a head and a body of its content-length)."""
    sock.sendall(request)
    return RawAnswers(sock).next()


def test_a_connection_polling_probes_is_answered_while_the_event_loop_is_held(
    loop: asyncio.AbstractEventLoop, answers: ProbeAnswers
) -> None:
    """The loop is held by a callback until the client has polled five probes on one connection: none reached the
    loop. Its next request, of another kind, does once the loop turns again, its bytes unread."""
    sock = listening()
    port = sock.getsockname()[1]
    polled: list[bytes] = []
    done = threading.Event()
    client = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)

    def poll() -> None:
        for path in POLLED:
            polled.append(answer_on(client, f"GET {path} HTTP/1.1\r\nHost: a\r\n\r\n".encode()))
        done.set()
        client.sendall(OTHER)

    protocols: list[Reads] = []

    def made() -> Reads:
        protocols.append(Reads())
        return protocols[-1]

    async def run() -> tuple[int, bytes]:
        acceptor = Acceptor(asyncio.get_running_loop(), sock, made, 8, (), None, probes(answers, 5))
        poller = threading.Thread(target=poll)
        poller.start()
        assert done.wait(PATIENCE_S), f"the probes were not answered while the loop was held: {polled}"
        made_while_held = len(protocols)
        poller.join()
        await until(lambda: bool(protocols) and protocols[0].read == OTHER)
        acceptor.close()
        await acceptor.wait_closed()
        return made_while_held, protocols[0].read

    try:
        made_while_held, read = loop.run_until_complete(run())
    finally:
        client.close()
    assert made_while_held == 0
    assert read == OTHER
    for path, answer in zip(POLLED, polled, strict=True):
        status, body = answers.answer(path)  # type: ignore[misc]
        assert answer == (
            b"HTTP/1.1 %d OK\r\nserver: uvicorn\r\ncontent-length: %d\r\ncontent-type: application/json\r\n\r\n%s"
            % (status, len(body), body)
        )


def test_an_idle_kept_connection_is_closed_after_the_keep_alive_timeout(
    loop: asyncio.AbstractEventLoop, answers: ProbeAnswers
) -> None:
    sock = listening()
    port = sock.getsockname()[1]
    protocols: list[Reads] = []

    def made() -> Reads:
        protocols.append(Reads())
        return protocols[-1]

    async def run() -> bytes:
        prober = probes(answers, 0.2)
        acceptor = Acceptor(asyncio.get_running_loop(), sock, made, 8, (), None, prober)
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as client:
            answer = await asyncio.to_thread(answer_on, client, b"GET /v2/health/live HTTP/1.1\r\n\r\n")
            assert answer.endswith(b'{"live":true}')
            after = await asyncio.to_thread(client.recv, 4096)  # the server closes it: b""
        await until(lambda: not acceptor.pending)
        acceptor.close()
        await acceptor.wait_closed()
        return after

    assert loop.run_until_complete(run()) == b""
    assert protocols == []


def test_a_connection_kept_after_the_thread_ended_goes_to_the_loop(answers: ProbeAnswers) -> None:
    """A worker stopping: the accepting thread may still hand over a connection it answered as the kept probes'
    thread ends; that connection goes to the loop rather than waiting for a thread that is gone."""
    handed: list[list[socket.socket]] = []
    dropped: list[socket.socket] = []
    kept = KeptProbes(probes(answers, 5), handed.append, dropped.append)
    kept.close()
    assert kept.ended and not kept.thread.is_alive()
    one, other = socket.socketpair()
    with one, other:
        kept.keep(one)
        assert handed == [[one]]
        assert dropped == []
