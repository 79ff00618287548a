"""Refusals an operator can see: a real ``oip serve`` (one worker, REST and gRPC, a metrics port) refuses over a
model's adaptive admission, a full queue (the batch being formed included, as Triton's qa/L0_http
``test_descriptive_status_code``), a passed ``timeout`` and a passed deadline, fails a backend run and a client's
bad request, and ``/metrics`` counts each by Triton's reason per model and version, with the pending gauge up while
requests are in the server and back to 0 after.

Requests are ordered by what the server reports (``nv_inference_pending_request_count``), never by sleeping; the
gates' queueing target is 1 ms, and a saturated model is found by sending one request after another until the gate
refuses, whatever the machine's speed and the run time the gate measured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from tests.support import onnx_models, overload_models
from tests.support.metrics_scrape import Scrape, scrape
from tests.support.servers import OipServer, oip_serve, wait_for

FAILURE = "nv_inference_request_failure"
PENDING = "nv_inference_pending_request_count"
#: The most requests sent to saturate a model: each is sent once the server counts the last in progress, and on a
#: loaded machine (a scrape taking a second) the first may have been answered by then.
SATURATING = 12
#: Triton's test model: a batch waits up to a second to form, and one request may wait.
FORMED = "dynamic_batching { max_queue_delay_microseconds: 1000000 default_queue_policy { max_queue_size: 1 } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OipServer]:
    root = tmp_path_factory.mktemp("reasons")
    onnx_models.save(overload_models.slow(512, 1000), root, "gated")  # no config: the adaptive admission's
    onnx_models.save(overload_models.slow(16, 1), root, "formed", config=overload_models.config("formed", 8, FORMED))
    onnx_models.save(onnx_models.fixed_reshape(), root, "broken")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "fast")
    env = {"OIP_ADMISSION_TARGET_MS": "1"}
    with oip_serve("--model-repository", str(root), env=env, grpc=True, workers=1, metrics=True) as served:
        yield served


def _metrics(server: OipServer) -> Scrape:
    return scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")


def _failures(server: OipServer, model: str) -> dict[str, float]:
    metrics = _metrics(server)
    return {
        r: metrics.value(FAILURE, model=model, version="1", reason=r)
        for r in ("REJECTED", "CANCELED", "BACKEND", "OTHER")
    }


def _pending(server: OipServer, model: str) -> float:
    """The requests to ``model`` the server counts in progress (0 before the model's first request)."""
    try:
        return _metrics(server).value(PENDING, model=model, version="1")
    except KeyError:  # no series before the model's first request
        return 0


def _until_pending(server: OipServer, model: str, count: int) -> None:
    """Return once the server reports ``count`` requests to ``model`` in progress (fail after a minute)."""
    wait_for(lambda: _pending(server, model) == count, f"the server reported {count} requests to {model}", 60)


def _post(server: OipServer, model: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/v2/models/{model}/infer", json=body, timeout=120)


def _x(shape: tuple[int, ...] = (1, 1)) -> dict[str, Any]:
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(shape), "data": [1.0] * int(np.prod(shape))}]}


def _added(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {reason: after[reason] - before[reason] for reason in after}


def _in_background(pool: ThreadPoolExecutor, call: Callable[[], httpx.Response]) -> Future[httpx.Response]:
    return pool.submit(call)


def test_a_second_request_while_the_first_forms_its_batch_is_refused_and_counted_rejected(server: OipServer):
    raw = np.array([2.5], np.float32).tobytes()
    headers = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}
    url = f"{server.url}/v2/models/formed/infer"
    assert httpx.post(url, content=raw, headers=headers, timeout=60).status_code == 200  # the series exist
    before = _failures(server, "formed")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(httpx.post, url, content=raw, headers=headers, timeout=60)
        _until_pending(server, "formed", 1)  # in the batch being formed, for a second
        second = httpx.post(url, content=raw, headers=headers, timeout=60)
        assert second.status_code == 503, second.text
        assert second.json()["error"].endswith("Exceeds maximum queue size")
        assert first.result().status_code == 200
    assert _added(before, _failures(server, "formed")) == {"REJECTED": 1, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}
    assert _metrics(server).value(PENDING, model="formed", version="1") == 0


def _saturate(
    server: OipServer, pool: ThreadPoolExecutor, model: str
) -> tuple[list[Future[httpx.Response]], httpx.Response]:
    """Send ``model`` one request after another, each once the server counts the last in progress, until one is
    refused; the admitted ones (still running) and the refusal. Ordered by the pending gauge, so it holds whatever
    the model's run time and however the gate measured it."""
    admitted: list[Future[httpx.Response]] = []
    for _ in range(SATURATING):
        sent = _in_background(pool, lambda: _post(server, model, _x()))

        def counted(sent: Future[httpx.Response] = sent) -> bool:
            running = sum(not future.done() for future in admitted)
            return sent.done() or _pending(server, model) == running + 1

        wait_for(counted, f"the server counted a request to {model} in progress", 60)
        if sent.done() and sent.result().status_code == 503:
            return admitted, sent.result()
        admitted.append(sent)
    pytest.fail(f"{model} admitted {SATURATING} requests, one after another, with a 1 ms queueing target")


def test_a_saturated_model_refuses_at_once_with_a_measured_retry_after_and_the_refusals_are_counted(server):
    assert _post(server, "gated", _x()).status_code == 200  # its run time measured
    before = _failures(server, "gated")
    with ThreadPoolExecutor(SATURATING) as pool:
        running, refused = _saturate(server, pool, "gated")
        assert running, "the gate refused a request to an idle model"
        assert "OIP_ADMISSION_TARGET_MS" in refused.json()["error"] and int(refused.headers["retry-after"]) >= 1
        late = _late_grpc_requests(server, _failures(server, "gated")["CANCELED"])
        # Meanwhile another model is not refused (its own gate), nor health.
        fast = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]}]}
        assert [_post(server, "fast", fast).status_code for _ in range(20)] == [200] * 20
        assert httpx.get(f"{server.url}/v2/health/ready", timeout=10).status_code == 200
        assert [future.result().status_code for future in running] == [200] * len(running)
    added = _added(before, _failures(server, "gated"))
    assert 1 <= added.pop("CANCELED") <= late
    assert added == {"REJECTED": 1, "BACKEND": 0, "OTHER": 0}
    assert _metrics(server).value(PENDING, model="gated", version="1") == 0


def _late_grpc_requests(server: OipServer, canceled: float, tries: int = 5) -> int:
    """gRPC requests to the saturated ``gated`` whose 50 ms deadline would pass before their answer, sent until the
    server counts one CANCELED (more than ``canceled``); how many were sent. Each fails DEADLINE_EXCEEDED at the
    client; one that a loaded machine's gRPC server takes longer than its deadline to hand to the service is
    dropped by gRPC itself, unseen (the next is sent then)."""
    assert server.grpc is not None
    client = triton_grpc.InferenceServerClient(server.grpc)
    item = triton_grpc.InferInput("x", [1, 1], "FP32")
    item.set_data_from_numpy(np.ones((1, 1), np.float32))
    try:
        for sent in range(1, tries + 1):
            with pytest.raises(InferenceServerException) as late:
                client.infer("gated", [item], client_timeout=0.05)
            assert late.value.status() == "StatusCode.DEADLINE_EXCEEDED"
            if _failures(server, "gated")["CANCELED"] > canceled:
                return sent
    finally:
        client.close()
    pytest.fail(f"none of {tries} requests past their deadline was counted CANCELED")


def test_a_passed_timeout_is_rejected_a_failed_run_is_backend_and_a_bad_request_is_not_counted(server: OipServer):
    assert _post(server, "gated", _x()).status_code == 200
    broken = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1.0] * 4}]}
    assert _post(server, "broken", broken).status_code == 200
    before = {model: _failures(server, model) for model in ("gated", "broken")}
    timed_out = _post(server, "gated", {**_x(), "parameters": {"timeout": 1}})
    assert (timed_out.status_code, timed_out.json()["error"]) == (503, "Request timeout expired")
    assert _post(server, "gated", _x((1, 2))).status_code == 400  # the model takes [-1, 1]
    broken["inputs"][0].update(shape=[3], data=[1.0] * 3)
    assert _post(server, "broken", broken).status_code == 500  # onnxruntime's reshape fails
    after = {model: _failures(server, model) for model in ("gated", "broken")}
    assert _added(before["gated"], after["gated"]) == {"REJECTED": 1, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}
    assert _added(before["broken"], after["broken"]) == {"REJECTED": 0, "CANCELED": 0, "BACKEND": 1, "OTHER": 0}


def test_the_fixture_models_are_what_the_tests_say(tmp_path: Path) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_models.fixed_reshape().SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"INPUT0": np.ones(4, np.float32)})[0].shape == (2, 2)
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime's own error type)
        session.run(None, {"INPUT0": np.ones(3, np.float32)})
