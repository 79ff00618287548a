"""``oip serve --workers N``'s supervisor under failure: a stuck worker is replaced, a crash loop backs off and
stops, workers end with a killed supervisor, ``--max-requests`` replaces workers without dropping a request.
Through a real ``oip serve`` process tree, real signals, and what the server reports (its log, ``/proc``)."""

# covers: handler/runtime/heartbeat.py
# covers: handler/runtime/parent.py

from __future__ import annotations

import os
import re
import signal
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.iris_requests import IRIS_REQUEST, iris_answered
from tests.support.procfs import group_alive, listening, workers
from tests.support.servers import HeldPort, OipServer, launch, oip_serve, serve_command, wait_for


@contextmanager
def supervised(repository: Path, *args: str, metrics: bool = False, level: str = "info") -> Iterator[OipServer]:
    """``oip serve --workers 2 ARGS`` at log level ``level``, until an inference is answered."""
    env = {**os.environ, "OIP_LOG_LEVEL": level}
    with oip_serve("--model-repository", str(repository), *args, env=env, workers=2, metrics=metrics,
                   probe=lambda server: iris_answered(server.url)) as server:  # fmt: skip
        yield server


def _two_workers(server: OipServer) -> set[int]:
    """The two workers, once both serve: a worker is timed from its first heartbeat, sent once it serves."""
    wait_for(lambda: server.child.text().count("Application startup complete") >= 2, "both workers serving")
    return wait_for(lambda: found if len(found := workers(server.pid)) == 2 else set(), "two workers")


def test_a_stopped_worker_is_aborted_and_replaced_after_its_timeout(iris_repository: Path) -> None:
    with supervised(iris_repository, "--worker-timeout", "2", level="debug") as server:
        first = _two_workers(server)
        victim = min(first)
        # a worker is timed from its first heartbeat, which comes after its startup's last line
        wait_for(lambda: f"Worker [{victim}] sent its first heartbeat" in server.child.text(), "a first heartbeat")
        os.kill(victim, signal.SIGSTOP)
        wait_for(lambda: f"Worker [{victim}] sent no heartbeat" in server.child.text(), "no heartbeat line",
                 detail=lambda: server.child.text()[-2000:])  # fmt: skip
        now = wait_for(lambda: found if len(found := workers(server.pid)) == 2 and victim not in found else set(),
                       f"worker {victim} was not killed and replaced")  # fmt: skip
        assert first - {victim} <= now, "a worker that kept beating was replaced too"
        assert all(iris_answered(server.url) for _ in range(20))
        assert server.child.text().count("sent no heartbeat") == 1


def test_the_workers_and_the_metrics_process_end_with_a_killed_supervisor(iris_repository: Path) -> None:
    with supervised(iris_repository, metrics=True) as server:
        assert server.metrics_port is not None
        wait_for(lambda: len(workers(server.pid)) == 3, "two workers and the metrics process")
        os.kill(server.pid, signal.SIGKILL)
        wait_for(lambda: not group_alive(server.pid), "a process of the server outlived its supervisor")
        assert not listening(server.port) and not listening(server.metrics_port)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_a_crash_loop_backs_off_and_stops_with_one_line_per_death(iris_repository: Path) -> None:
    """Every worker killed as soon as it is seen: each early death doubles the delay before the next start (from
    0.1 s, at most 10 s), and the tenth stops ``oip serve`` with exit code 1."""
    with HeldPort() as port:
        command = serve_command("--model-repository", str(iris_repository), "--port", str(port.port),
                                "--workers", "2")  # fmt: skip
        child = launch("oip serve", command, env={**os.environ, "OIP_LOG_LEVEL": "info", "OIP_METRICS_PORT": "0"})
        killed: set[int] = set()

        def kill_every_new_worker() -> bool:
            if not child.running():
                return True
            for pid in workers(child.pid) - killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            return False

        try:
            wait_for(kill_every_new_worker, "oip serve did not stop", timeout=600, detail=lambda: child.text()[-2000:])
        finally:
            status = child.stop()
    text = child.text()
    assert status == 1, text[-3000:]
    delays = re.findall(r"was killed by SIGKILL [\d.]+ s after it started: starting another in ([\d.]+) s", text)
    assert delays == ["0.1", "0.2", "0.4", "0.8", "1.6", "3.2", "6.4", "10.0", "10.0"], text[-3000:]
    assert text.count("was killed by SIGKILL") == 10
    assert re.search(r"was killed by SIGKILL .*the 10th early death within \d+ s: stopping", text), text[-3000:]


def test_max_requests_replaces_workers_without_dropping_a_request(iris_repository: Path) -> None:
    with supervised(iris_repository, "--max-requests", "50", "--max-requests-jitter", "10") as server:
        first = _two_workers(server)

        def fresh_connection_infer(_: int) -> int:
            with httpx.Client() as client:
                return client.post(f"{server.url}/v2/models/iris/infer", json=IRIS_REQUEST, timeout=60).status_code

        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(fresh_connection_infer, range(500)))
        assert statuses.count(200) == 500, {status: statuses.count(status) for status in set(statuses)}
        # The first two workers could answer at most 120 requests before asking for their replacement.
        assert "answered its --max-requests: starting its replacement" in server.child.text()
        wait_for(lambda: not first <= workers(server.pid), "no worker was replaced",
                 detail=lambda: server.child.text()[-2000:])  # fmt: skip
        assert "keeps serving" not in server.child.text()


def test_health_checks_answered_as_connections_are_accepted_count_toward_max_requests(iris_repository: Path) -> None:
    """A health check on a new connection is answered by the worker's accepting thread, not its app; it is a
    request served all the same, as gunicorn counts every request toward ``--max-requests``."""
    with supervised(iris_repository, "--max-requests", "20", "--max-requests-jitter", "1") as server:
        first = _two_workers(server)
        for _ in range(100):
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
                sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n")
                assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
        wait_for(lambda: not first <= workers(server.pid), "no worker was replaced",
                 detail=lambda: server.child.text()[-2000:])  # fmt: skip
        assert "answered its --max-requests: starting its replacement" in server.child.text()


def test_with_one_worker_a_stuck_event_loop_ends_the_process_with_70(tmp_path: Path) -> None:
    """No supervisor with one worker: a model run on the event loop (``OIP_INLINE_RUN_MS=inf``) for longer than
    ``--worker-timeout`` stops the loop's beats, and the watchdog thread ends the process with 70 and the threads'
    tracebacks, for systemd or Kubernetes to restart it."""
    from tests.support import overload_models

    repository = overload_models.repository(tmp_path / "slow", {"slow": overload_models.config("slow")})
    env = {**os.environ, "OIP_LOG_LEVEL": "info", "OIP_INLINE_RUN_MS": "inf"}
    with oip_serve("--model-repository", str(repository), "--worker-timeout", "0.5", env=env, workers=1) as server:
        body = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
        with pytest.raises(httpx.TransportError):  # the process ends before it answers
            httpx.post(f"{server.url}/v2/models/slow/infer", json=body, timeout=600)
        assert server.child.popen.wait(timeout=600) == 70
    text = server.child.text()
    assert "The event loop has not run for" in text and "OIP_WORKER_TIMEOUT" in text
    assert "most recent call first" in text  # faulthandler's traceback of the stuck thread
