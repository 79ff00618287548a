"""The byte budgets of REST bodies against ``oip serve`` on 127.0.0.1: a body over the request budget is refused by
its Content-Length before it is read (413), a body that would take the bytes in flight over the process's budget is
refused while another request's body is held half-sent (503 with Retry-After), and ``oip serve`` takes bodies over
Lambda's 6 MB by default. Ordered by what the server answers, never by sleeping."""

# covers: handler/inference/byte_budget.py

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.support.iris_requests import IRIS_REQUEST, iris_answers, normal_requests
from tests.support.servers import OipServer, oip_serve, wait_for

MiB = 1 << 20
REQUEST_BUDGET = 2 * MiB
INFLIGHT_BUDGET = 1 * MiB
#: An iris request padded with JSON whitespace to this many bytes: more than half the in-flight budget.
HELD_BYTES = 700_000


def _padded(size: int) -> bytes:
    body = json.dumps(IRIS_REQUEST).encode()
    return body + b" " * (size - len(body))


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    env = {"OIP_MAX_REQUEST_BYTES": str(REQUEST_BUDGET), "OIP_MAX_INFLIGHT_BYTES": str(INFLIGHT_BUDGET)}
    with oip_serve(env=env, workers=1, log_level="warning") as served:
        yield served


class HalfSent:
    """A request whose head and first ``sent`` body bytes are on the wire, the rest held back by the test."""

    def __init__(self, url: str, body: bytes, sent: int) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.socket = socket.create_connection((host, int(port)), timeout=60)
        head = (
            "POST /v2/models/iris/infer HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        self.socket.sendall(head.encode() + body[:sent])
        self.rest = body[sent:]

    def finish(self) -> bytes:
        """Send the rest of the body; the whole answer."""
        self.socket.sendall(self.rest)
        return self.answer()

    def answer(self) -> bytes:
        """Everything the server sends until it closes the connection (``Connection: close``)."""
        answer = b""
        while chunk := self.socket.recv(65536):
            answer += chunk
        self.socket.close()
        return answer


def _status_line(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]


def test_a_body_over_the_request_budget_is_refused_by_its_content_length(server: OipServer) -> None:
    """Only the head is sent: the answer comes before any of the body."""
    cpu, peak = server.cpu_seconds(), server.peak_rss()
    answer = HalfSent(server.url, b" " * (3 * MiB), 0).answer()
    assert _status_line(answer) == b"HTTP/1.1 413 Request Entity Too Large"
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
        "error": f"request body of {3 * MiB} bytes is over the limit of {REQUEST_BUDGET} bytes one request may "
        "bring into memory (OIP_MAX_REQUEST_BYTES); nothing was read"
    }
    assert server.peak_rss() - peak < MiB and server.cpu_seconds() - cpu < 0.5


def test_bodies_over_the_bytes_in_flight_get_503_while_one_is_held(server: OipServer) -> None:
    body = _padded(HELD_BYTES)
    assert httpx.post(f"{server.url}/v2/models/iris/infer", content=body, timeout=30).status_code == 200
    held = HalfSent(server.url, body, HELD_BYTES // 2)
    try:

        def refused() -> httpx.Response | None:
            """The answer to a second such body, once it is refused (before A's hold it is answered 200)."""
            answer = httpx.post(f"{server.url}/v2/models/iris/infer", content=body, timeout=30)
            assert answer.status_code in (200, 503), answer.text
            return answer if answer.status_code == 503 else None

        with normal_requests(server.url):
            answer = wait_for(refused, "a body over the bytes in flight refused while another is held")
        assert answer.headers["retry-after"] == "1"
        error = answer.json()["error"]
        held_now = re.fullmatch(
            f"a request body would bring {HELD_BYTES} bytes into memory while requests in flight hold "
            rf"(\d+) of the {INFLIGHT_BUDGET} bytes this server allows \(OIP_MAX_INFLIGHT_BYTES\); retry shortly",
            error,
        )
        assert held_now, error
        # the held body, and at most one of the normal requests running beside it
        assert HELD_BYTES <= int(held_now[1]) <= HELD_BYTES + len(json.dumps(IRIS_REQUEST)), error
        iris_answers(server.url)  # a small request still fits beside the held one
    finally:
        finished = held.finish()
    assert _status_line(finished) == b"HTTP/1.1 200 OK"
    assert httpx.post(f"{server.url}/v2/models/iris/infer", content=body, timeout=30).status_code == 200


def test_oip_serve_takes_bodies_over_lambdas_6_mb_by_default() -> None:
    body = _padded(7 * MiB)
    with oip_serve(workers=1, log_level="warning") as served:
        answer = httpx.post(f"{served.url}/v2/models/iris/infer", content=body, timeout=60)
        assert answer.status_code == 200, answer.text
        refused = HalfSent(served.url, b" " * (65 * MiB), 0).answer()
    assert _status_line(refused) == b"HTTP/1.1 413 Request Entity Too Large"
    assert b"over the limit of 67108864 bytes" in refused
