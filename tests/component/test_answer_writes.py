"""``oip serve`` writes an answer's head and body joined (handler/cli/joined_writes.py): an interim ``100 Continue``
still reaches the client before it sends its body, pipelined requests get their answers whole and in order, and an
answer that closes its connection arrives whole before the end of the stream. Raw sockets on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from tests.support.raw_answers import RawAnswers
from tests.support.servers import OipServer, oip_serve

PATIENCE_S = 60
BODY = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[5.1,3.5,1.4,0.2]}]}'


def _request(headers: bytes = b"") -> bytes:
    return (
        b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n" % len(BODY)
        + headers
        + b"\r\n"
    )


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(workers=1) as served:
        yield served


def _answer(answers: RawAnswers) -> tuple[bytes, dict[str, object]]:
    """The next answer's head and its JSON body."""
    head, body = answers.next().split(b"\r\n\r\n", 1)
    return head, json.loads(body)


def _labels(answer: dict[str, object]) -> object:
    outputs = answer["outputs"]
    assert isinstance(outputs, list)
    return next(output["data"] for output in outputs if output["name"] == "label")


def test_an_interim_100_continue_comes_before_the_body_is_sent(server: OipServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as sock:
        answers = RawAnswers(sock)
        sock.sendall(_request(b"Expect: 100-continue\r\n"))
        assert answers.until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(BODY)
        head, answer = _answer(answers)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert _labels(answer) == [0]


def test_pipelined_requests_get_whole_answers_in_order(server: OipServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as sock:
        answers = RawAnswers(sock)
        sock.sendall((_request() + BODY) * 3)
        for _ in range(3):
            head, answer = _answer(answers)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert _labels(answer) == [0]


def test_an_answer_that_closes_its_connection_arrives_whole_before_the_end(server: OipServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE_S) as sock:
        answers = RawAnswers(sock)
        sock.sendall(_request(b"Connection: close\r\n") + BODY)
        head, answer = _answer(answers)
        assert b"connection: close" in head.lower()
        assert _labels(answer) == [0]
        assert sock.recv(1) == b"", "closed once answered"
