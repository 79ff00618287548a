"""Connections to ``oip serve`` cannot be held: raw sockets on 127.0.0.1 that send nothing, half a head, a body that
stalls, a head too large or with too many fields, or bytes that begin no request, against a server started with
one-second timeouts (``--header-timeout 1 --body-timeout 1 --keep-alive-timeout 1``) and ``--max-connections 600``.
Each is answered or closed within a few seconds, and a normal request meanwhile is answered at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.hardening.oip_process import OipServer, iris_answers, normal_requests, oip_serve

MiB = 1 << 20
TIMEOUTS = ("--header-timeout", "1", "--body-timeout", "1", "--keep-alive-timeout", "1")
PARTIAL_HEAD = b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(*TIMEOUTS, "--max-connections", "600") as served:
        yield served


def _connect(server: OipServer, timeout: float = 5) -> socket.socket:
    port = int(server.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and the seconds that took."""
    started, received = time.perf_counter(), b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.perf_counter() - started


def test_a_connection_that_sends_nothing_is_closed(server: OipServer) -> None:
    with _connect(server) as sock:
        received, seconds = _until_closed(sock)
    assert received == b""
    assert 0.5 < seconds < 3


def test_half_a_head_gets_408_and_the_connection_closed(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD)
        received, seconds = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert received.endswith(b'{"error": "the request\'s head took longer than 1.0 s"}')
    assert 0.5 < seconds < 3


def test_505_sockets_holding_partial_heads_are_all_closed(server: OipServer) -> None:
    files = server.open_files()
    with ExitStack() as stack, normal_requests(server.url) as times:
        sockets = [stack.enter_context(_connect(server)) for _ in range(505)]
        for sock in sockets:
            sock.sendall(PARTIAL_HEAD)
        time.sleep(0.3)
        assert server.open_files() - files >= 500  # all held for now
        answers = [_until_closed(sock) for sock in sockets]
    assert all(received.startswith(b"HTTP/1.1 408 ") for received, _ in answers)
    assert max(seconds for _, seconds in answers) < 3
    assert server.open_files() - files < 10
    assert max(times) < 1


def test_a_body_that_stops_arriving_is_cut_off(server: OipServer) -> None:
    """5,000,000 bytes declared, 1,000 sent: the connection is closed after the body timeout."""
    with normal_requests(server.url) as times, _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + b"Content-Length: 5000000\r\n\r\n" + b"[" * 1000)
        received, seconds = _until_closed(sock)
    assert received == b"" or received.startswith(b"HTTP/1.1 408 ")
    assert 0.5 < seconds < 3
    assert max(times) < 1


def test_a_head_over_32_kib_gets_431(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + b"X-Big: " + b"a" * 40_000 + b"\r\nContent-Length: 0\r\n\r\n")
        received, seconds = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert received.endswith(b'{"error": "the request\'s head is longer than 32768 bytes"}')
    assert seconds < 1


def test_more_than_100_header_fields_get_431(server: OipServer) -> None:
    fields = b"".join(b"X-Field-%d: 1\r\n" % n for n in range(101))
    with _connect(server) as sock:
        sock.sendall(PARTIAL_HEAD + fields + b"Content-Length: 0\r\n\r\n")
        received, _ = _until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 ")
    assert received.endswith(b'{"error": "the request has more than 100 header fields"}')


def test_a_64_mb_header_is_cut_off_as_it_arrives(server: OipServer) -> None:
    """5.4 s of the server's CPU and 241 MB when httptools parsed it whole; now refused after 32 KiB or so."""
    cpu, peak = server.cpu_seconds(), server.peak_rss()
    sent = 0
    with normal_requests(server.url) as times, _connect(server) as sock:
        started = time.perf_counter()
        sock.sendall(PARTIAL_HEAD + b"X-Huge: ")
        piece = b"a" * (64 * 1024)
        try:
            while sent < 64 * MiB:
                sock.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        seconds = time.perf_counter() - started
    assert sent < 16 * MiB  # the server closed the connection long before the end
    assert seconds < 2
    assert server.cpu_seconds() - cpu < 1
    assert server.peak_rss() - peak < 32 * MiB
    assert max(times) < 1


def test_bytes_that_begin_no_request_do_not_keep_a_connection(server: OipServer) -> None:
    """After an answer, empty lines (which stop uvicorn's keep-alive timer) have until the keep-alive and header
    timeouts are over."""
    with _connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"live":true}'):
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 ")
        started = time.perf_counter()
        try:
            for _ in range(40):
                sock.sendall(b"\r\n")
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass
        received, _ = _until_closed(sock)
        seconds = time.perf_counter() - started
    assert received == b""
    assert 1 < seconds < 4


def test_open_connections_beyond_the_cap_get_503_until_they_go(server: OipServer) -> None:
    with ExitStack() as stack:
        idle = [stack.enter_context(_connect(server)) for _ in range(600)]
        time.sleep(0.3)
        response = httpx.post(f"{server.url}/v2/models/iris/infer", json={}, timeout=10)
        assert response.status_code == 503
        threads = [threading.Thread(target=_until_closed, args=(sock,)) for sock in idle]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
    assert iris_answers(server.url) < 1
