"""``oip serve`` in a child process for the limit probes, with what the probes read of it from ``/proc``: resident
memory now and at its peak, CPU time and open file descriptors. One worker, so that the child is the server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from tests.conftest import free_port

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
    """``oip serve --workers 1`` on 127.0.0.1 (the demo repository unless ``args`` say otherwise), until it answers."""
    port, grpc_port = free_port(), free_port() if grpc else 0
    command = [sys.executable, "-m", "handler.cli", "serve", "--port", str(port), "--workers", "1",
               "--grpc-port", str(grpc_port), "--no-access-log", "--log-level", "warning", *args]  # fmt: skip
    with subprocess.Popen(command, env={**os.environ, **(env or {})}, stderr=subprocess.DEVNULL) as process:
        server = OipServer(f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}" if grpc else None, process.pid)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{server.url}/v2/health/ready", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("oip serve did not start")
                time.sleep(0.1)
            yield server
        finally:
            process.terminate()
            process.wait(timeout=30)


def iris_answers(url: str) -> float:
    """Seconds one normal iris request takes; it must be answered 200."""
    started = time.perf_counter()
    response = httpx.post(f"{url}/v2/models/iris/infer", json=IRIS_REQUEST, timeout=30)
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


@contextmanager
def normal_requests(url: str) -> Iterator[list[float]]:
    """Normal iris requests, one after another while the block runs: the list of their times in seconds (one more
    is made after the block, so that it is never empty)."""
    times: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            times.append(iris_answers(url))
            time.sleep(0.01)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield times
    finally:
        stop.set()
        thread.join(timeout=30)
        times.append(iris_answers(url))
