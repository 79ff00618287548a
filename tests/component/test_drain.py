"""SIGTERM drains ``oip serve`` as a load balancer expects: the HTTP and gRPC ports refuse new connections at once,
requests in flight on both finish, readiness answers false on a kept-alive gRPC channel and HTTP connection (or the
connection is closed), and the server exits 0;
with one worker and with two. Through a real ``oip serve`` process tree and real signals."""

from __future__ import annotations

import http.client
import os
import queue
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.support.iris_requests import half_sent_request
from tests.support.procfs import listening, socket_inodes, workers
from tests.support.servers import OipServer, oip_serve, wait_for


@pytest.fixture(params=["1", "2"], ids=["one-worker", "two-workers"])
def served(request: pytest.FixtureRequest, iris_repository: Path) -> Iterator[OipServer]:
    env = {**os.environ, "OIP_LOG_LEVEL": "info"}
    args = ("--model-repository", str(iris_repository), "--drain-timeout", "60")
    with oip_serve(*args, env=env, grpc=True, workers=int(request.param)) as server:
        yield server


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    except ConnectionRefusedError:
        return True
    return False


def _ready(connection: http.client.HTTPConnection) -> int | str:
    """The status of ``GET /v2/health/ready`` on a kept-alive connection ("closed" when the server closed it)."""
    try:
        connection.request("GET", "/v2/health/ready")
        response = connection.getresponse()
        response.read()
    except (http.client.RemoteDisconnected, ConnectionError):
        return "closed"
    return response.status


def _iris_inputs() -> list[object]:
    import tritonclient.grpc as triton_grpc

    tensor = triton_grpc.InferInput("input", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.array([[6.7, 3.0, 5.2, 2.3]], np.float32))
    return [tensor]


def test_sigterm_refuses_new_connections_at_once_and_drains_every_transport(served: OipServer) -> None:
    import tritonclient.grpc as triton_grpc
    from tritonclient.utils import InferenceServerException

    assert served.grpc_port is not None
    supervisor = served.pid
    serving = wait_for(lambda: workers(supervisor) or {supervisor}, "no serving process")
    held = listening(served.port) | listening(served.grpc_port)
    assert listening(served.port) and listening(served.grpc_port), "each port's listening socket is seen"
    posted, rest = half_sent_request(served.port)
    kept_alive = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    assert _ready(kept_alive) == 200
    client = triton_grpc.InferenceServerClient(str(served.grpc))
    answers: queue.Queue[object] = queue.Queue()
    client.start_stream(lambda result, error: answers.put(error or result))
    try:
        client.async_stream_infer("iris", _iris_inputs())  # a gRPC stream in flight: answered once
        first = answers.get(timeout=60)
        assert not isinstance(first, Exception), first
        assert client.is_server_ready()

        served.child.popen.send_signal(signal.SIGTERM)
        # Every process of the server has let its listening sockets go: the ports refuse, nothing waits in a backlog.
        wait_for(
            lambda: not held & set().union(*(socket_inodes(pid) for pid in {supervisor, *serving})),
            "a process of the server kept a listening socket open after SIGTERM",
        )
        assert _refused(served.port)
        assert _refused(served.grpc_port)
        # A load balancer polling on a kept-alive HTTP connection is told not ready (400), or finds it closed once
        # the worker has stopped lingering (handler/cli/worker.py, LINGER_S).
        assert _ready(kept_alive) in (400, "closed")
        # A kept-alive gRPC channel is told the server is not ready (or is refused the call).
        try:
            ready = client.is_server_ready(client_timeout=10)
        except InferenceServerException:
            ready = False
        assert ready is False
        # Both requests in flight are answered.
        client.async_stream_infer("iris", _iris_inputs())
        second = answers.get(timeout=60)
        assert not isinstance(second, Exception), second
        posted.sendall(rest)
        posted.settimeout(60)
        answer = posted.recv(65536).decode(errors="replace")
        assert answer.startswith("HTTP/1.1 200"), answer
    finally:
        client.stop_stream()
        client.close()
        posted.close()
        kept_alive.close()
    assert served.child.popen.wait(timeout=120) == 0, served.child.text()[-3000:]
