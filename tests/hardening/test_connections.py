"""Connections to ``oip serve`` cannot be held: raw sockets on 127.0.0.1 that send nothing, half a head, a body that
stalls, a head too large or with too many fields, or bytes that begin no request, against a server started with
one-second timeouts (``--header-timeout 1 --body-timeout 1 --keep-alive-timeout 1``) and ``--max-connections 600``.
Each is answered or closed once its timeout is over (a client that waited 30 s for that fails), and normal requests
are answered while they are held."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.support import procfs
from tests.support.iris_requests import iris_answers, normal_requests
from tests.support.metrics_scrape import scrape
from tests.support.servers import OipServer, oip_serve, wait_for

MiB = 1 << 20
TIMEOUTS = ("--header-timeout", "1", "--body-timeout", "1", "--keep-alive-timeout", "1")
FULL_LINE = "the worker holds 600 connections, its limit (OIP_MAX_CONNECTIONS)"
PARTIAL_HEAD = b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(*TIMEOUTS, "--max-connections", "600", workers=1, log_level="warning") as served:
        yield served


def _connect(server: OipServer, timeout: float = 30) -> socket.socket:
    port = int(server.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection (socket.timeout if it never does), and the
    seconds that took."""
    started, received = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started


def test_a_connection_that_sends_nothing_is_closed(server: OipServer) -> None:
    with _connect(server) as sock:
        received, seconds = _until_closed(sock)
    assert received == b""
    assert seconds > 0.5  # held until the header timeout


def test_half_a_head_gets_408_and_the_connection_closed(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD)
        received, seconds = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert received.endswith(b'{"error": "the request\'s head took longer than 1.0 s"}')
    assert seconds > 0.5


def test_505_sockets_holding_partial_heads_are_all_closed(server: OipServer) -> None:
    files = server.open_files()
    with ExitStack() as stack, normal_requests(server.url) as answered:
        sockets = [stack.enter_context(_connect(server)) for _ in range(505)]
        for sock in sockets:
            sock.sendall(PARTIAL_HEAD)
        held = time.monotonic()
        wait_for(lambda: server.open_files() - files >= 500, "the server did not accept them all", timeout=30)
        answers = [_until_closed(sock) for sock in sockets]
        closed = time.monotonic()
    assert all(received.startswith(b"HTTP/1.1 408 ") for received, _ in answers)
    wait_for(lambda: server.open_files() - files < 10, "the server kept their files open", timeout=30)
    assert answered.between(held, closed), "no normal request was answered while the heads were held"


def test_a_body_that_stops_arriving_is_cut_off(server: OipServer) -> None:
    """5,000,000 bytes declared, 1,000 sent: the connection is closed after the body timeout, and a normal request
    is answered while it is held."""
    with normal_requests(server.url) as answered, _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + b"Content-Length: 5000000\r\n\r\n" + b"[" * 1000)
        held = time.monotonic()
        received, seconds = _until_closed(sock)
    assert received == b"" or received.startswith(b"HTTP/1.1 408 ")
    assert seconds > 0.5  # held until the body timeout
    assert answered.between(held, held + seconds), "no normal request was answered while the body was held"


def test_a_head_over_32_kib_gets_431(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + b"X-Big: " + b"a" * 40_000 + b"\r\nContent-Length: 0\r\n\r\n")
        received, _ = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert received.endswith(b'{"error": "the request\'s head is longer than 32768 bytes"}')


def test_more_than_100_header_fields_get_431(server: OipServer) -> None:
    """The body sent in the same packet as the head is read past, not handed to uvicorn's body callback (which
    raises on a request it never began): the refusal is not logged as an invalid request."""
    fields = b"".join(b"X-Field-%d: 1\r\n" % n for n in range(101))
    invalid = server.output().count("Invalid HTTP request")
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + fields + b"Content-Length: 2\r\n\r\n{}")
        received, _ = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 ")
    assert received.endswith(b'{"error": "the request has more than 100 header fields"}')
    assert server.output().count("Invalid HTTP request") == invalid, server.output()


def test_a_64_mb_header_is_cut_off_as_it_arrives(server: OipServer) -> None:
    """5.4 s of the server's CPU and 241 MB when httptools parsed it whole; now refused after 32 KiB or so."""
    cpu, peak = server.cpu_seconds(), server.peak_rss()
    sent = 0
    with normal_requests(server.url) as answered, _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + b"X-Huge: ")
        piece = b"a" * (64 * 1024)
        try:
            while sent < 64 * MiB:
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert sent < 16 * MiB  # the server closed the connection long before the end
    assert server.cpu_seconds() - cpu < 1
    assert server.peak_rss() - peak < 32 * MiB
    assert answered.times


def test_bytes_that_begin_no_request_do_not_keep_a_connection(server: OipServer) -> None:
    """After an answer, empty lines (which stop uvicorn's keep-alive timer) have until the keep-alive and header
    timeouts are over."""
    with _connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"live":true}'):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        closed = False
        try:
            for _ in range(150):  # 30 s of empty lines, unless the server closes the connection first
                sock.sendall(b"\r\n")
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        received, _ = _until_closed(sock)
        seconds = time.monotonic() - started
    assert received == b"" and closed, "the empty lines kept the connection open"
    assert seconds > 1  # the keep-alive and header timeouts, one second each


def test_connections_beyond_the_cap_wait_in_the_backlog_until_one_goes() -> None:
    """600 idle connections (held: a server of its own, whose header timeout does not close them meanwhile) fill
    ``--max-connections 600``: a 601st connection is not accepted (it waits in the listening socket's accept queue,
    where the kernel reports it), the worker says so once, naming the setting, and the request is answered once an
    idle connection goes. No request is refused: a connection refused and closed would come back at once."""
    with (
        oip_serve(
            "--header-timeout", "60", "--max-connections", "600", workers=1, log_level="warning", metrics=True
        ) as server,
        ExitStack() as stack,
    ):
        port = int(server.url.rsplit(":", 1)[1])
        # A request the event loop answers before counting: under uvloop the loop's first connection opens the file
        # libuv keeps in reserve for running out of them (the readiness probe's was answered by another thread).
        iris_answers(server.url)
        files = server.open_files()
        idle = [stack.enter_context(_connect(server)) for _ in range(600)]
        # all accepted (give or take a connection of the readiness probe that closes meanwhile)
        wait_for(lambda: server.open_files() - files >= 590, "the server did not accept them all", timeout=30)
        wait_for(lambda: procfs.accept_queue(port) == 0, "the server left connections in its backlog", timeout=30)
        with _connect(server) as waiting:
            waiting.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            wait_for(lambda: procfs.accept_queue(port) == 1, "the 601st connection was not left waiting", timeout=30)
            wait_for(lambda: FULL_LINE in server.output(), "the worker did not say it was full", timeout=30)
            assert server.open_files() - files <= 600
            idle.pop().close()  # one goes: the waiting connection is accepted and answered
            received, _ = _until_closed(waiting)
        assert received.startswith(b"HTTP/1.1 200 "), received
        assert _rejected(server) == 0
        assert server.output().count(FULL_LINE) == 1, server.output()
        stack.close()  # the idle connections go
        wait_for(lambda: server.open_files() - files < 10, "the server kept their files open", timeout=30)
        iris_answers(server.url)
    assert idle


def _rejected(server: OipServer) -> float:
    return scrape(f"http://127.0.0.1:{server.metrics_port}/metrics").value(
        "nv_inference_request_failure", model="iris", version="1", reason="REJECTED"
    )
