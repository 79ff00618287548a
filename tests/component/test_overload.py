"""Triton's queue policy, the per-worker admission bound and the gRPC deadline, on a real ``oip serve`` (one worker,
REST and gRPC, a metrics port) driven by tritonclient over both transports.

Nothing here depends on a machine's speed. A request is held by the dynamic batcher, not by a slow run: the held
models wait an hour for a batch to form (``max_queue_delay_microseconds``), so a request stays in the server until
the test sends the request that fills the batch (``release``), at priority level 1 so that it goes first even when
level 2's queue is full. A model without a queue runs a ``Loop`` that never ends by itself
(tests/support/overload_models.py ``forever``). Requests are sent one after another once the server reports the previous
one in progress (``nv_inference_pending_request_count``, read as tests/component/test_failure_reasons.py reads
it), never after a sleep. A request's fate is read from its answer and from Triton's statistics extension
(``execution_count``: the runs the model made), so "never runs" is a count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.component.test_failure_reasons import _metrics, _until_pending
from tests.support import onnx_models, overload_models, servers
from tests.support.servers import OipServer

#: Triton 2.51's words (tritonserver answered them so: docs/protocol.md "Overload and deadlines").
QUEUE_FULL = "Exceeds maximum queue size"
TIMEOUT_EXPIRED = "Request timeout expired"
PENDING = "nv_inference_pending_request_count"
#: The largest batch of a held model: a batch goes when its rows reach it, else after an hour.
LARGEST = 4
#: Two priority levels, 2 the default; level 1 has a policy of its own with no bound and no timeout.
LEVELS = "priority_levels: 2 default_priority_level: 2 priority_queue_policy { key: 1 value { } }"


def held(name: str, policy: str = "", largest: int = LARGEST, levels: str = LEVELS) -> str:
    """A config.pbtxt whose batches wait an hour to form (``largest`` rows send one at once)."""
    batching = f"dynamic_batching {{ max_queue_delay_microseconds: 3600000000 {levels} {policy} }}"
    return overload_models.config(name, largest, batching)


MODELS = {
    "full": held("full", "default_queue_policy { max_queue_size: 1 }"),
    "reject": held("reject", "default_queue_policy { default_timeout_microseconds: 100000 }"),
    "override": held(
        "override", "default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true }"
    ),
    "delay": held(
        "delay",
        "default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 60000000 "
        "allow_timeout_override: true }",
    ),
    "priority": held(
        "priority",
        levels="priority_levels: 2 default_priority_level: 2 "
        "priority_queue_policy { key: 2 value { max_queue_size: 1 } }",
    ),
    "deadline": held("deadline"),
    "admitted": held("admitted", largest=8, levels=""),
    "batching": overload_models.config("batching", 1, "dynamic_batching { }"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    root = tmp_path_factory.mktemp("overload")
    for name, text in MODELS.items():
        onnx_models.save(overload_models.slow(16, 1), root, name, config=text)
    onnx_models.save(overload_models.forever(), root, "plain", config=overload_models.config("plain", 0))
    with servers.oip_serve(
        "--model-repository", str(root), "--log-level", "warning", "--max-inflight", "4", grpc=True, workers=1,
        metrics=True,
    ) as served:  # fmt: skip
        yield served


def _x(rows: int) -> np.ndarray:
    return np.ones((rows, 1), np.float32)


def http_infer(server: OipServer, model: str, rows: int = 1, **options: Any) -> Any:
    client = triton_http.InferenceServerClient(server.address, network_timeout=3600)
    item = triton_http.InferInput("x", [rows, 1], "FP32")
    item.set_data_from_numpy(_x(rows))
    try:
        return client.infer(model, [item], **options)
    finally:
        client.close()


def grpc_infer(server: OipServer, model: str, rows: int = 1, **options: Any) -> Any:
    assert server.grpc is not None
    client = triton_grpc.InferenceServerClient(server.grpc)
    item = triton_grpc.InferInput("x", [rows, 1], "FP32")
    item.set_data_from_numpy(_x(rows))
    try:
        return client.infer(model, [item], **options)
    finally:
        client.close()


def release(server: OipServer, model: str, rows: int) -> None:
    """Send ``rows`` rows at priority 1, filling the held batch: it runs, and this request is answered."""
    assert http_infer(server, model, rows, priority=1).as_numpy("y").tolist() == [[1.0]] * rows


class Requests:
    """Requests sent one after another, each once the server reports it in progress, answered in whatever order;
    the order of their answers is recorded."""

    def __init__(self, server: OipServer) -> None:
        self.server = server
        self.pool = ThreadPoolExecutor(8)
        self.finished: list[str] = []
        self.lock = threading.Lock()

    def send(self, label: str, model: str, call: Callable[[], Any], pending: int | None) -> Future[Any]:
        """Send ``call`` in the background and return once ``model`` has ``pending`` requests in progress (None:
        at once, for a request answered at once)."""

        def run() -> Any:
            try:
                return call()
            finally:
                with self.lock:
                    self.finished.append(label)

        future = self.pool.submit(run)
        if pending is not None:
            _until_pending(self.server, model, pending)
        return future

    def close(self) -> None:
        self.pool.shutdown(wait=True)


@pytest.fixture
def requests(server: OipServer) -> Iterator[Requests]:
    sent = Requests(server)
    yield sent
    sent.close()


def statistics(server: OipServer, model: str) -> dict[str, Any]:
    document = httpx.get(f"{server.url}/v2/models/{model}/stats", timeout=60).json()
    return document["model_stats"][0]


def pending(server: OipServer, model: str) -> float:
    return _metrics(server).value(PENDING, model=model, version="1")


def error_of(future: Future[Any]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        future.result()
    return caught.value


def test_a_request_over_max_queue_size_is_refused_at_once_in_tritons_words(server: OipServer, requests: Requests):
    held_request = requests.send("held", "full", lambda: http_infer(server, "full", priority=1), pending=1)
    queued = requests.send("queued", "full", lambda: http_infer(server, "full"), pending=2)
    refused = requests.send("refused", "full", lambda: http_infer(server, "full", request_id="r-1"), pending=None)
    over_grpc = requests.send("over gRPC", "full", lambda: grpc_infer(server, "full"), pending=None)
    http_error, grpc_error = error_of(refused), error_of(over_grpc)
    assert (http_error.status(), http_error.message()) == ("503", f"[request id: r-1] {QUEUE_FULL}")
    assert grpc_error.status() == "StatusCode.UNAVAILABLE"
    assert grpc_error.message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    assert not held_request.done() and not queued.done() and pending(server, "full") == 2
    release(server, "full", LARGEST - 2)  # the held request, this one and the queued one: one batch
    assert held_request.result().as_numpy("y").tolist() == [[1.0]]
    assert queued.result().as_numpy("y").tolist() == [[1.0]]
    # Both answered while the others were held, in whichever order the two clients got them.
    assert sorted(requests.finished[:2]) == ["over gRPC", "refused"]
    counted = statistics(server, "full")
    assert counted["execution_count"] == 1 and counted["inference_stats"]["fail"]["count"] == 2


def test_a_request_whose_queue_timeout_passes_is_answered_then_and_never_runs(server: OipServer, requests: Requests):
    held_request = requests.send("held", "reject", lambda: http_infer(server, "reject", priority=1), pending=1)
    late = requests.send("late", "reject", lambda: http_infer(server, "reject"), pending=None)
    late_grpc = requests.send("late over gRPC", "reject", lambda: grpc_infer(server, "reject"), pending=None)
    assert (error_of(late).status(), error_of(late).message()) == ("503", TIMEOUT_EXPIRED)
    assert (error_of(late_grpc).status(), error_of(late_grpc).message()) == ("StatusCode.UNAVAILABLE", TIMEOUT_EXPIRED)
    assert not held_request.done()  # answered at their timeout, while the batch had not gone
    release(server, "reject", LARGEST - 1)
    held_request.result()
    assert sorted(requests.finished[:2]) == ["late", "late over gRPC"] and requests.finished[2] == "held"
    counted = statistics(server, "reject")
    assert counted["execution_count"] == 1 and counted["inference_count"] == LARGEST  # the late ones never ran


def test_a_request_may_shorten_the_queue_timeout_where_the_policy_allows_it(server: OipServer, requests: Requests):
    held_request = requests.send("held", "override", lambda: http_infer(server, "override", priority=1), pending=1)
    short_http = requests.send("short", "override", lambda: http_infer(server, "override", timeout=50_000), None)
    short_grpc = requests.send("short gRPC", "override", lambda: grpc_infer(server, "override", timeout=50_000), None)
    assert error_of(short_http).message() == TIMEOUT_EXPIRED
    assert error_of(short_grpc).message() == TIMEOUT_EXPIRED
    # A timeout over the default is the default's (a minute): it waits for the batch, and runs.
    longer = requests.send("longer", "override", lambda: http_infer(server, "override", timeout=600_000_000), 2)
    release(server, "override", LARGEST - 2)
    held_request.result()
    assert longer.result().as_numpy("y").tolist() == [[1.0]]
    counted = statistics(server, "override")
    assert counted["execution_count"] == 1 and counted["inference_stats"]["fail"]["count"] == 2


def test_delay_moves_a_timed_out_request_behind_those_that_have_not(server: OipServer, requests: Requests):
    held_request = requests.send("held", "delay", lambda: http_infer(server, "delay", priority=1), pending=1)
    delayed = requests.send("delayed", "delay", lambda: http_infer(server, "delay", timeout=1), pending=2)
    on_time = requests.send("on time", "delay", lambda: grpc_infer(server, "delay"), pending=3)
    # The batch that goes takes the held request, this one and one more row: the request that did not time out.
    release(server, "delay", LARGEST - 2)
    held_request.result()
    on_time.result()
    _until_pending(server, "delay", 1)
    assert not delayed.done()  # still waiting: it was behind the request sent after it
    release(server, "delay", LARGEST - 1)
    assert delayed.result().as_numpy("y").tolist() == [[1.0]]
    assert requests.finished[-1] == "delayed"
    assert statistics(server, "delay")["execution_count"] == 2


def test_higher_priority_requests_go_first_and_each_level_has_its_own_queue(server: OipServer, requests: Requests):
    requests.send("held", "priority", lambda: http_infer(server, "priority", priority=1), pending=1)
    low = requests.send("low", "priority", lambda: http_infer(server, "priority"), pending=2)
    full = requests.send("low, level full", "priority", lambda: grpc_infer(server, "priority", priority=2), None)
    beyond = requests.send("beyond: default", "priority", lambda: http_infer(server, "priority", priority=9), None)
    assert error_of(full).message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    assert error_of(beyond).message() == f"[request id: <id_unknown>] {QUEUE_FULL}"
    high = requests.send("high", "priority", lambda: grpc_infer(server, "priority", priority=1), pending=3)
    release(server, "priority", LARGEST - 2)  # level 1 first: the held request, the high one and this one
    high.result()
    _until_pending(server, "priority", 1)
    assert not low.done()  # sent before the high one, still waiting behind it
    release(server, "priority", LARGEST - 1)
    low.result()
    assert sorted(requests.finished[:2]) == ["beyond: default", "low, level full"]
    assert requests.finished[-1] == "low"


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
    before = statistics(server, "deadline")
    held_request = requests.send("held", "deadline", lambda: http_infer(server, "deadline", priority=1), pending=1)
    with pytest.raises(InferenceServerException) as gone:
        grpc_infer(server, "deadline", client_timeout=1.0)
    assert gone.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    _until_pending(server, "deadline", 1)  # the server dropped it too
    release(server, "deadline", LARGEST - 1)
    held_request.result()
    after = statistics(server, "deadline")
    assert after["execution_count"] == before["execution_count"] + 1
    assert after["inference_count"] == before["inference_count"] + LARGEST  # the dropped request never ran


def test_a_timeout_stops_the_run_of_a_model_without_a_queue(server: OipServer) -> None:
    before = statistics(server, "plain")
    with pytest.raises(InferenceServerException) as caught:
        http_infer(server, "plain", timeout=100_000)  # a run that never ends by itself
    assert (caught.value.status(), caught.value.message()) == ("503", TIMEOUT_EXPIRED)
    after = statistics(server, "plain")
    assert after["inference_stats"]["fail"]["count"] == before["inference_stats"]["fail"]["count"] + 1
    assert after["inference_count"] == before["inference_count"]
    assert pending(server, "plain") == 0


def test_requests_over_the_admission_bound_get_503_with_retry_after(server: OipServer, requests: Requests):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}

    def post() -> httpx.Response:
        return httpx.post(f"{server.url}/v2/models/admitted/infer", json=body, timeout=3600)

    admitted = [requests.send(f"admitted {n}", "admitted", post, pending=n + 1) for n in range(3)]
    assert server.grpc is not None
    client = triton_grpc.InferenceServerClient(server.grpc)
    item = triton_grpc.InferInput("x", [1, 1], "FP32")
    item.set_data_from_numpy(_x(1))
    fourth = client.async_infer("admitted", [item], lambda result, error: None)
    _until_pending(server, "admitted", 4)  # the bound: --max-inflight 4
    refused = post()
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "OIP_MAX_INFLIGHT" in refused.json()["error"]
    with pytest.raises(InferenceServerException) as refused_grpc:
        grpc_infer(server, "admitted")
    assert refused_grpc.value.status() == "StatusCode.UNAVAILABLE"
    # Saturated, the server still answers health, metadata and statistics.
    assert httpx.get(f"{server.url}/v2/health/ready", timeout=60).status_code == 200
    assert httpx.get(f"{server.url}/v2/models/admitted", timeout=60).status_code == 200
    assert httpx.get(f"{server.url}/v2/models/stats", timeout=60).status_code == 200
    assert client.is_server_live() and client.get_model_metadata("admitted").name == "admitted"
    assert not any(future.done() for future in admitted)
    fourth.cancel()  # a place for the request that fills the batch
    _until_pending(server, "admitted", 3)
    client.close()
    assert httpx.post(
        f"{server.url}/v2/models/admitted/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [5, 1], "data": [1.0] * 5}]},
        timeout=3600,
    ).status_code == 200  # fmt: skip
    assert [future.result().status_code for future in admitted] == [200] * 3


def test_the_models_answer_their_input_and_the_endless_one_stops_when_told() -> None:
    x = np.array([[2.0], [3.0]], np.float32)
    session = ort.InferenceSession(overload_models.slow(16, 1).SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": x})[0].tolist() == [[2.0], [3.0]]
    endless = ort.InferenceSession(overload_models.forever().SerializeToString(), providers=["CPUExecutionProvider"])
    options = ort.RunOptions()
    options.terminate = True
    with pytest.raises(Exception, match="terminate flag"):  # onnxruntime's own error type
        endless.run(None, {"x": x}, options)


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
