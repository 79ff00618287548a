"""A request a model's adaptive admission refuses is answered 503 before its body is read: a real ``oip serve``
(one worker) with a saturated model answers a request whose body never comes, at once, as soon as its headers are in.

Requests are ordered by what the server reports (``nv_inference_pending_request_count``); the gate's queueing target
is 1 ms, so a request with two ahead of it is refused whatever the machine's speed.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support import onnx_models, overload_models
from tests.support.metrics_scrape import scrape
from tests.support.servers import OipServer, oip_serve

BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    root: Path = tmp_path_factory.mktemp("before-body")
    onnx_models.save(overload_models.slow(512, 1000), root, "gated")  # no config: the adaptive admission's
    with oip_serve(
        "--model-repository", str(root), env={"OIP_ADMISSION_TARGET_MS": "1"}, workers=1, metrics=True
    ) as served:
        yield served


def _until_pending(server: OipServer, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")
        try:
            if metrics.value("nv_inference_pending_request_count", model="gated", version="1") == count:
                return
        except KeyError:
            pass
    pytest.fail(f"the server never reported {count} requests to gated in progress")


def test_a_refused_request_is_answered_before_its_body_is_sent(server: OipServer) -> None:
    url = f"{server.url}/v2/models/gated/infer"
    assert httpx.post(url, json=BODY, timeout=120).status_code == 200  # its run time measured
    with ThreadPoolExecutor(2) as pool:
        running = [pool.submit(httpx.post, url, json=BODY, timeout=120) for _ in range(2)]
        _until_pending(server, 2)
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as client:
            head = "POST /v2/models/gated/infer HTTP/1.1\r\nHost: oip\r\nContent-Type: application/json\r\n"
            client.sendall(f"{head}Content-Length: 1048576\r\n\r\n".encode())  # and no body at all
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = client.recv(65536)  # the server's answer, with the body still unsent
                if not chunk:
                    break
                answer += chunk
        status, *headers = answer.split(b"\r\n\r\n")[0].decode().split("\r\n")
        assert status.startswith("HTTP/1.1 503"), answer
        assert any(line.lower().startswith("retry-after: ") for line in headers)
        assert [future.result().status_code for future in running] == [200, 200]
