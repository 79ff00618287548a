"""Iris requests to a served demo iris model: a repository of it alone, one request that must be answered 200 (or
whether it is), a stream of them while something else holds the server with when each was answered, and one left
in flight."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from handler.config.settings import DEMO_REPOSITORY

IRIS_ROW = [6.7, 3.0, 5.2, 2.3]
IRIS_REQUEST = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": IRIS_ROW}]}


def iris_repository(root: Path) -> Path:
    """``root`` holding the demo iris model alone (each worker loads the repository: it stays small)."""
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    return root


def iris_answered(url: str, timeout: float = 30) -> bool:
    """Whether one iris request is answered 200 within ``timeout`` (False when the connection fails)."""
    try:
        return httpx.post(f"{url}/v2/models/iris/infer", json=IRIS_REQUEST, timeout=timeout).status_code == 200
    except httpx.TransportError:
        return False


def half_sent_request(port: int) -> tuple[socket.socket, bytes]:
    """An iris request to 127.0.0.1:``port`` whose head and half its body are sent, in flight until the rest is;
    the connection, and the rest of the body."""
    body = json.dumps(IRIS_REQUEST).encode()
    connection = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST /v2/models/iris/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection.sendall(head + body[: len(body) // 2])
    return connection, body[len(body) // 2 :]


def iris_answers(url: str) -> float:
    """One normal iris request, which must be answered 200; when it was answered (``time.monotonic``)."""
    response = httpx.post(f"{url}/v2/models/iris/infer", json=IRIS_REQUEST, timeout=30)
    assert response.status_code == 200, response.text
    return time.monotonic()


@dataclass
class Answered:
    """When each normal request made while a block ran was answered (``time.monotonic``)."""

    times: list[float] = field(default_factory=list)

    def between(self, start: float, end: float) -> int:
        """How many were answered after ``start`` and before ``end``: while something else held the server."""
        return sum(start < at < end for at in self.times)


@contextmanager
def normal_requests(url: str) -> Iterator[Answered]:
    """Normal iris requests, one after another while the block runs, each answered 200 (one more after the block,
    so that they are never none)."""
    answered = Answered()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            answered.times.append(iris_answers(url))
            stop.wait(0.01)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield answered
    finally:
        stop.set()
        thread.join(timeout=30)
        answered.times.append(iris_answers(url))
