"""Normal iris requests for the limit probes: one that must be answered 200, and a stream of them while something
else holds the server, with when each was answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

IRIS_ROW = [6.7, 3.0, 5.2, 2.3]
IRIS_REQUEST = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": IRIS_ROW}]}


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
