"""The worker's admission bound with no ``--max-inflight`` (``OIP_MAX_INFLIGHT`` unset), on a running ``oip serve``
bound to one core (``taskset -c 0``): 64 requests per core plus two of the largest dynamic batch
(handler/inference/admission.py ``default_inflight``), so 64 + 2 x 5 = 74 here.

Nothing runs: every request is held by a dynamic batcher whose batch waits an hour to form (as in
tests/component/test_overload.py), four one-row requests to each model of five-row batches, spread over enough
models to hold 74. The test waits until the server reports all 74 in progress (``nv_inference_pending_request_count``
summed over the models), then the next request is refused at once with the bound and the setting named. Models not
measured yet (none of these ever answers) have no adaptive gate, so only the worker's bound refuses.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support import onnx_models, overload_models
from tests.support.metrics_scrape import scrape
from tests.support.servers import POLL_SECONDS, STARTUP_TIMEOUT, OipServer, oip_serve, wait_for

#: The largest dynamic batch: a model holds at most one row fewer (a full batch runs at once).
LARGEST = 5
#: 64 per core (one core) plus two of the largest batch.
BOUND = 64 + 2 * LARGEST
HELD_PER_MODEL = LARGEST - 1
MODELS = [f"held{index}" for index in range(-(-BOUND // HELD_PER_MODEL))]
BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}
PENDING = "nv_inference_pending_request_count"


def _repository(root: Path) -> Path:
    batching = "dynamic_batching { max_queue_delay_microseconds: 3600000000 }"
    for name in MODELS:
        config = overload_models.config(name, LARGEST, batching)
        onnx_models.save(overload_models.slow(16, 1), root, name, config=config)
    return root


def _pending(server: OipServer) -> float:
    metrics = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")
    total = 0.0
    for name in MODELS:
        with contextlib.suppress(KeyError):  # no series before the model's first request
            total += metrics.value(PENDING, model=name, version="1")
    return total


def _until_pending(server: OipServer, count: int) -> None:
    """Return once the server reports ``count`` requests in progress over every model (fail after a while)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while (seen := _pending(server)) != count:
        assert seen < count and time.monotonic() < deadline, f"the server reports {seen} in progress, not {count}"
        time.sleep(POLL_SECONDS)


def test_the_default_bound_on_one_core_refuses_the_request_after_64_plus_two_batches(tmp_path: Path) -> None:
    repository = _repository(tmp_path)
    env = {"OIP_DRAIN_TIMEOUT": "1"}  # the held requests are abandoned when the server stops
    with ThreadPoolExecutor(BOUND + 1) as pool:
        with oip_serve(
            "--model-repository", str(repository), "--log-level", "warning", workers=1, metrics=True, env=env,
            drop=("OIP_MAX_INFLIGHT", "OIP_ADMISSION_TARGET_MS"), prefix=("taskset", "-c", "0"),
        ) as server:  # fmt: skip

            def post(model: str) -> httpx.Response:
                return httpx.post(f"{server.url}/v2/models/{model}/infer", json=BODY, timeout=3600)

            held = [pool.submit(post, MODELS[index // HELD_PER_MODEL]) for index in range(BOUND)]
            _until_pending(server, BOUND)
            assert not any(future.done() for future in held)  # none answered: all held, none refused
            # To a model with room in its batch: only the worker's bound refuses it. Admitted, it would be held:
            # the server would report one more in progress.
            next_one = pool.submit(post, MODELS[-1])
            wait_for(lambda: next_one.done() or _pending(server) > BOUND, "no answer and nothing more in progress")
            assert next_one.done(), "the request over the default bound was admitted"
            refused = next_one.result()
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert f"({BOUND}, OIP_MAX_INFLIGHT)" in error, error
            assert int(refused.headers["retry-after"]) >= 1
            assert _pending(server) == BOUND
        for future in held:  # abandoned when the server stopped: none of them ever ran
            with contextlib.suppress(httpx.TransportError):
                assert future.result().status_code != 200
