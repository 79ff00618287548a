"""``oip serve`` in a child process for the limit probes, with what the probes read of it from ``/proc``: resident
memory now and at its peak, CPU time and open file descriptors. One worker, so that the child is the server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from tests.support import servers

IRIS_ROW = [6.7, 3.0, 5.2, 2.3]
IRIS_REQUEST = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": IRIS_ROW}]}


@dataclass(frozen=True)
class OipServer:
    url: str  # http://127.0.0.1:port
    grpc: str | None  # 127.0.0.1:port
    pid: int

    def _status(self, key: str) -> int:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(key)

    def rss(self) -> int:
        """Resident memory now, in bytes."""
        return self._status("VmRSS")

    def peak_rss(self) -> int:
        """The most resident memory so far, in bytes."""
        return self._status("VmHWM")

    def cpu_seconds(self) -> float:
        """User and system CPU time so far."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


@contextmanager
def oip_serve(*args: str, grpc: bool = False, env: dict[str, str] | None = None) -> Iterator[OipServer]:
    """``oip serve --workers 1`` on 127.0.0.1 (the demo repository unless ``args`` say otherwise), until it is ready."""
    with servers.oip_serve("--log-level", "warning", *args, grpc=grpc, workers=1, env=env) as server:
        yield OipServer(server.url, server.grpc, server.pid)


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
