"""``oip serve`` answers a probe's requests (health, server and model metadata, model readiness) in the threads that
accept its connections and keep them (handler/cli/acceptor.py, handler/cli/kept_probes.py): byte for byte what the
app answers on the event loop, the date aside; its access log line as uvicorn's; counted among the requests a
worker serves. Raw sockets on 127.0.0.1, so that each request's bytes are known."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest

from tests.support.raw_answers import RawAnswers
from tests.support.servers import OipServer, oip_serve, wait_for

PATIENCE_S = 60
DATE = re.compile(rb"date: [^\r]*\r\n")


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(workers=1, access_log=True) as served:
        yield served


def _connect(server: OipServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S)


#: An inference request: a connection that sends one first is the event loop's from then on.
INFER = (
    b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 78\r\n\r\n"
    b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'
)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/health/live",
        "/v2/health/ready",
        "/v2",
        "/v2/models/iris",
        "/v2/models/iris/versions/1",
        "/v2/models/iris/ready",
        "/v2/models/iris/versions/1/ready",
    ],
)
def test_the_threads_answers_are_the_apps(server: OipServer, path: str) -> None:
    """On one connection the accepting thread answers the first request and the kept connections' thread the
    second; on another, after an inference request, the app answers on the event loop: the same bytes but for the
    date."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    with _connect(server) as sock:
        answers = RawAnswers(sock)
        sock.sendall(request)
        first = answers.next()
        sock.sendall(request)
        second = answers.next()
    with _connect(server) as sock:
        answers = RawAnswers(sock)
        sock.sendall(INFER)
        assert answers.next().startswith(b"HTTP/1.1 200 OK\r\n")
        sock.sendall(request)
        apps = answers.next()
    assert DATE.sub(b"", first) == DATE.sub(b"", second) == DATE.sub(b"", apps)
    assert DATE.sub(b"", first).startswith(b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\n")


def test_a_client_that_asks_for_close_gets_it(server: OipServer) -> None:
    closing = b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n"
    for request in (b"GET /v2/health/live HTTP/1.0\r\n\r\n", closing):
        with _connect(server) as sock:
            sock.sendall(request)
            answer = RawAnswers(sock).next()
            assert sock.recv(4096) == b""  # closed after the answer
        assert b"\r\nconnection: close\r\n" in answer
        assert answer.endswith(b'{"live":true}')


def test_pipelined_health_checks_are_answered_in_order(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n\r\nGET /v2/health/ready HTTP/1.1\r\n\r\n")
        answers = RawAnswers(sock)
        assert answers.next().endswith(b'{"live":true}')
        assert answers.next().endswith(b'{"ready":true}')


def test_another_method_on_the_health_path_is_the_apps_to_answer(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /v2/health/ready HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert RawAnswers(sock).next().startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")


def test_each_health_check_is_logged_as_uvicorn_logs_a_request(server: OipServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /v2/health/ready?from=a-new-connection HTTP/1.1\r\n\r\n")
        RawAnswers(sock).next()
        port = sock.getsockname()[1]
    with _connect(server) as sock:
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n")
        RawAnswers(sock).next()
        mine = sock.getsockname()[1]
    wait_for(lambda: f'127.0.0.1:{mine} - "GET /v2/health/live HTTP/1.1" 200' in server.output(), "no access line")
    assert f'127.0.0.1:{port} - "GET /v2/health/ready?from=a-new-connection HTTP/1.1" 200' in server.output()
