"""Triton's queue policy, the per-worker admission bound and the gRPC deadline, on a real ``oip serve`` (one worker,
REST and gRPC) driven by tritonclient over both transports, with a slow onnxruntime model (tests/overload_models.py).

A request's fate is read from its answer and from Triton's statistics extension (``execution_count``: the runs the
model made), so "never runs" is a count. Orders are read from the order answers arrive in, never from their times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests import overload_models, servers
from tests.servers import OipServer

#: Triton 2.51's words (tritonserver answered them so: docs/protocol.md "Overload and deadlines").
QUEUE_FULL = "Exceeds maximum queue size"
TIMEOUT_EXPIRED = "Request timeout expired"

MODELS = {
    # A run of about a second; one queued request at most.
    "full": overload_models.config("full", 1, "dynamic_batching { default_queue_policy { max_queue_size: 1 } }"),
    "reject": overload_models.config(
        "reject", 1, "dynamic_batching { default_queue_policy { default_timeout_microseconds: 100000 } }"
    ),
    "override": overload_models.config(
        "override",
        1,
        "dynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 "
        "allow_timeout_override: true } }",
    ),
    "delay": overload_models.config(
        "delay",
        1,
        "dynamic_batching { default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 60000000 "
        "allow_timeout_override: true } }",
    ),
    "priority": overload_models.config(
        "priority",
        1,
        "dynamic_batching { priority_levels: 2 default_priority_level: 2 "
        "priority_queue_policy { key: 2 value { max_queue_size: 1 } } }",
    ),
    "batching": overload_models.config("batching", 1, "dynamic_batching { }"),
    "plain": overload_models.config("plain", 0),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    root = overload_models.repository(tmp_path_factory.mktemp("overload"), MODELS, k=3000)
    with servers.oip_serve(
        "--model-repository", str(root), "--log-level", "warning", "--max-inflight", "4", grpc=True, workers=1
    ) as served:
        yield served


def _x() -> np.ndarray:
    return np.ones((1, 1), np.float32)


def http_infer(server: OipServer, model: str, **options: Any) -> Any:
    client = triton_http.InferenceServerClient(server.address, network_timeout=120)
    item = triton_http.InferInput("x", [1, 1], "FP32")
    item.set_data_from_numpy(_x())
    try:
        return client.infer(model, [item], **options)
    finally:
        client.close()


def grpc_infer(server: OipServer, model: str, **options: Any) -> Any:
    assert server.grpc is not None
    client = triton_grpc.InferenceServerClient(server.grpc)
    item = triton_grpc.InferInput("x", [1, 1], "FP32")
    item.set_data_from_numpy(_x())
    try:
        return client.infer(model, [item], **options)
    finally:
        client.close()


class Requests:
    """Requests sent one after another (each once the previous one has reached the server's socket and a moment
    more), answered in whatever order; the order of their answers is recorded."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(8)
        self.finished: list[str] = []
        self.lock = threading.Lock()

    def send(self, label: str, call: Callable[[], Any], settle: float = 0.15) -> Future[Any]:
        def run() -> Any:
            try:
                return call()
            finally:
                with self.lock:
                    self.finished.append(label)

        future = self.pool.submit(run)
        time.sleep(settle)  # lets the request reach the server before the next one is sent: an order, not a speed
        return future

    def close(self) -> None:
        self.pool.shutdown(wait=True)


@pytest.fixture
def requests() -> Iterator[Requests]:
    sent = Requests()
    yield sent
    sent.close()


def statistics(server: OipServer, model: str) -> dict[str, Any]:
    document = httpx.get(f"{server.url}/v2/models/{model}/stats", timeout=10).json()
    return document["model_stats"][0]


def error_of(future: Future[Any]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        future.result(timeout=120)
    return caught.value


def test_a_request_over_max_queue_size_is_refused_at_once_in_tritons_words(server: OipServer, requests: Requests):
    running = requests.send("running", lambda: http_infer(server, "full"))
    queued = requests.send("queued", lambda: http_infer(server, "full"))
    refused = requests.send("refused", lambda: http_infer(server, "full", request_id="r-1"))
    over_grpc = requests.send("over gRPC", lambda: grpc_infer(server, "full"))
    http_error, grpc_error = error_of(refused), error_of(over_grpc)
    assert (http_error.status(), http_error.message()) == ("503", f"[request id: r-1] {QUEUE_FULL}")
    assert grpc_error.status() == "StatusCode.UNAVAILABLE"
    assert grpc_error.message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    assert running.result(timeout=120).as_numpy("y").tolist() == [[1.0]]
    assert queued.result(timeout=120).as_numpy("y").tolist() == [[1.0]]
    assert requests.finished[:2] == ["refused", "over gRPC"]  # answered while the first request still ran
    counted = statistics(server, "full")
    assert counted["execution_count"] == 2 and counted["inference_stats"]["fail"]["count"] == 2


def test_a_request_whose_queue_timeout_passes_is_answered_then_and_never_runs(server: OipServer, requests: Requests):
    running = requests.send("running", lambda: http_infer(server, "reject"))
    late = requests.send("late", lambda: http_infer(server, "reject"))
    late_grpc = requests.send("late over gRPC", lambda: grpc_infer(server, "reject"))
    assert (error_of(late).status(), error_of(late).message()) == ("503", TIMEOUT_EXPIRED)
    assert (error_of(late_grpc).status(), error_of(late_grpc).message()) == ("StatusCode.UNAVAILABLE", TIMEOUT_EXPIRED)
    running.result(timeout=120)
    assert requests.finished == ["late", "late over gRPC", "running"]  # at its timeout, not after the run
    assert statistics(server, "reject")["execution_count"] == 1


def test_a_request_may_shorten_the_queue_timeout_where_the_policy_allows_it(server: OipServer, requests: Requests):
    running = requests.send("running", lambda: http_infer(server, "override"))
    short_http = requests.send("short", lambda: http_infer(server, "override", timeout=50_000))
    short_grpc = requests.send("short over gRPC", lambda: grpc_infer(server, "override", timeout=50_000))
    longer = requests.send("longer", lambda: http_infer(server, "override", timeout=600_000_000))
    assert error_of(short_http).message() == TIMEOUT_EXPIRED
    assert error_of(short_grpc).message() == TIMEOUT_EXPIRED
    running.result(timeout=120)
    longer.result(timeout=120)  # a timeout over the default is the default's: it waited and ran
    assert statistics(server, "override")["execution_count"] == 2


def test_delay_moves_a_timed_out_request_behind_those_that_have_not(server: OipServer, requests: Requests):
    requests.send("running", lambda: http_infer(server, "delay"))
    delayed = requests.send("delayed", lambda: http_infer(server, "delay", timeout=50_000))
    on_time = requests.send("on time", lambda: grpc_infer(server, "delay"))
    delayed.result(timeout=120)
    on_time.result(timeout=120)
    assert requests.finished == ["running", "on time", "delayed"]
    assert statistics(server, "delay")["execution_count"] == 3


def test_higher_priority_requests_go_first_and_each_level_has_its_own_queue(server: OipServer, requests: Requests):
    requests.send("running", lambda: http_infer(server, "priority"))
    low = requests.send("low", lambda: http_infer(server, "priority"))
    full = requests.send("low, level full", lambda: grpc_infer(server, "priority", priority=2))
    high = requests.send("high", lambda: grpc_infer(server, "priority", priority=1))
    beyond = requests.send("beyond the levels: default", lambda: http_infer(server, "priority", priority=9))
    assert error_of(full).message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    assert error_of(beyond).message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    high.result(timeout=120)
    low.result(timeout=120)
    assert requests.finished == ["low, level full", "beyond the levels: default", "running", "high", "low"]


def test_bad_timeout_and_priority_parameters_are_refused(server: OipServer) -> None:
    body = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
        "parameters": {"priority": -1},
    }
    answer = httpx.post(f"{server.url}/v2/models/batching/infer", json=body, timeout=60)
    assert answer.status_code == 400
    assert answer.json()["error"] == "Unable to parse 'priority': expected an unsigned integer, got -1"
    body["parameters"] = {"timeout": "soon"}
    answer = httpx.post(f"{server.url}/v2/models/plain/infer", json=body, timeout=60)
    assert answer.status_code == 400 and "Unable to parse 'timeout'" in answer.json()["error"]


def test_a_grpc_deadline_that_passes_in_the_queue_drops_the_request(server: OipServer, requests: Requests):
    before = statistics(server, "batching")["execution_count"]
    running = requests.send("running", lambda: grpc_infer(server, "batching"))
    gone = requests.send("gone", lambda: grpc_infer(server, "batching", client_timeout=0.3))
    error = error_of(gone)
    assert error.status() == "StatusCode.DEADLINE_EXCEEDED"
    running.result(timeout=120)
    assert statistics(server, "batching")["execution_count"] == before + 1  # the dropped request never ran


def test_a_timeout_stops_the_run_of_a_model_without_a_queue(server: OipServer) -> None:
    before = statistics(server, "plain")
    with pytest.raises(InferenceServerException) as caught:
        http_infer(server, "plain", timeout=100_000)
    assert (caught.value.status(), caught.value.message()) == ("503", TIMEOUT_EXPIRED)
    after = statistics(server, "plain")
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] + 1
    assert after["inference_count"] == before["inference_count"]


def test_requests_over_the_admission_bound_get_503_with_retry_after(server: OipServer, requests: Requests):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}

    def post() -> httpx.Response:
        return httpx.post(f"{server.url}/v2/models/plain/infer", json=body, timeout=120)

    admitted = [requests.send(f"admitted {n}", post) for n in range(4)]
    refused = requests.send("refused", post)
    refused_grpc = requests.send("refused over gRPC", lambda: grpc_infer(server, "plain"))
    answer = refused.result(timeout=120)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "OIP_MAX_INFLIGHT" in answer.json()["error"]
    assert error_of(refused_grpc).status() == "StatusCode.UNAVAILABLE"
    # Saturated, the server still answers health, metadata and statistics.
    assert httpx.get(f"{server.url}/v2/health/ready", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/v2/models/plain", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/v2/models/stats", timeout=10).status_code == 200
    assert server.grpc is not None
    client = triton_grpc.InferenceServerClient(server.grpc)
    assert client.is_server_live() and client.get_model_metadata("plain").name == "plain"
    client.close()
    assert [future.result(timeout=120).status_code for future in admitted] == [200] * 4
    assert requests.finished[:2] == ["refused", "refused over gRPC"]


def test_the_slow_model_answers_its_input(tmp_path: Path) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(overload_models.slow(64, 4).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[2.0], [3.0]], np.float32)
    assert session.run(None, {"x": x})[0].tolist() == [[2.0], [3.0]]


def test_a_chunked_raw_request_to_a_dynamic_batching_model_is_answered_as_its_unchunked_twin(server: OipServer):
    body = np.array([2.5], np.float32).tobytes()
    headers = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}
    url = f"{server.url}/v2/models/batching/infer"
    whole = httpx.post(url, content=body, headers=headers, timeout=60)
    chunked = httpx.post(url, content=iter([body[:1], body[1:]]), headers=headers, timeout=60)
    assert whole.status_code == chunked.status_code == 200, chunked.text
    length = int(chunked.headers["inference-header-content-length"])
    assert length == int(whole.headers["inference-header-content-length"])
    assert chunked.content[length:] == whole.content[length:] == body  # batch 1: [[2.5]]
