"""Helpers shared by the benchmarks: timing and a server process on 127.0.0.1."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx


def p50_ms(function: Callable[[], object], repeat: int, warmup: int = 20) -> float:
    """Median wall time of ``function`` in milliseconds."""
    for _ in range(warmup):
        function()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


@contextmanager
def oip_server(port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """``oip serve`` in a child process (no access log) until it is live, yielding its base URL
    (tests/support/servers.py: its output in a file, shown when it fails to start)."""
    from tests.support.servers import environment, http_ok, running, serve_command

    url = f"http://127.0.0.1:{port}"
    command = serve_command("--port", str(port), "--no-access-log", "--log-level", "warning")
    with running("oip serve", command, lambda _: http_ok(f"{url}/v2/health/live"), env=environment(env)):
        yield url


def wait_until_live(url: str, process: subprocess.Popen[bytes], what: str = "server") -> None:
    """Poll ``url``'s ``/v2/health/live`` until it answers 200; RuntimeError if ``process`` exits or 60 s pass."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/v2/health/live", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.1)
