"""The event loop's shedding on a running ``oip serve`` with no admission setting: while its loop stays behind, an
inference request over the cap is answered 503 with ``Retry-After`` by the HTTP protocol, counted as Triton's
``REJECTED``; health is still answered, the connection stays open, and once the loop keeps up requests are
answered again. Requests that wait on a model (not on the loop) are no queue of the loop's and make no refusal.

# covers: handler/cli/connections.py

What holds the loop is the test's own: ``blocker`` runs on the event loop's thread (``OIP_INLINE_RUN_MS`` above its
run time) for tens of milliseconds a run, whatever the machine (a machine twice as fast still runs it for longer
than the loop's target, and a loaded one longer still), sent back to back while ``HELD`` requests wait in dynamic
batchers that never form (as in test_default_admission.py): requests in the worker that the cap counts. Every step
waits for what the server reports: its pending count, its answers.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from handler.inference.loop_shedding import FLOOR
from tests.support import iris_requests, onnx_models, overload_models
from tests.support.metrics_scrape import scrape
from tests.support.servers import OipServer, oip_serve, wait_for

#: Rows a held model's batch waits for: a model holds one fewer.
BATCH = 5
HELD_PER_MODEL = BATCH - 1
#: Requests held in the worker: more than the cap's floor, a tenth above it.
HELD = HELD_PER_MODEL * -(-(FLOOR * 12 // 10) // HELD_PER_MODEL)
HELD_MODELS = [f"held{index}" for index in range(HELD // HELD_PER_MODEL)]
ONE = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}
#: Most requests sent to find one refusal, or one answer once the loop keeps up.
ATTEMPTS = 400
LOOP_REFUSAL = "its event loop has run over"
#: Connections opened at once while the loop is behind.
NEW = 64


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = iris_requests.iris_repository(tmp_path_factory.mktemp("shedding"))
    batching = "dynamic_batching { max_queue_delay_microseconds: 3600000000 }"
    for name in HELD_MODELS:
        onnx_models.save(overload_models.slow(16, 1), root, name, config=overload_models.config(name, BATCH, batching))
    onnx_models.save(overload_models.slow(512, 40), root, "blocker")
    return root


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """The held requests' threads: they end when the server stops, before the pool does."""
    with ThreadPoolExecutor(HELD) as threads:
        yield threads


@pytest.fixture
def server(repository: Path, pool: ThreadPoolExecutor) -> Iterator[OipServer]:
    env = {
        "OIP_INLINE_RUN_MS": "60000",  # every measured model runs on the event loop's thread
        "OIP_ADMISSION_TARGET_MS": "3600000",  # no model's gate refuses: only the loop's shedding
        "OIP_DRAIN_TIMEOUT": "1",  # the held requests are abandoned when the server stops
    }
    with oip_serve(
        "--model-repository", str(repository), "--log-level", "warning", workers=1, metrics=True, env=env,
        drop=("OIP_MAX_INFLIGHT",),
    ) as served:  # fmt: skip
        yield served


def _metric(server: OipServer, name: str, **labels: str) -> float:
    with contextlib.suppress(KeyError):  # no series before the model's first request
        return scrape(f"http://127.0.0.1:{server.metrics_port}/metrics").value(name, **labels)
    return 0.0


def _pending(server: OipServer, models: list[str]) -> float:
    return sum(_metric(server, "nv_inference_pending_request_count", model=m, version="1") for m in models)


def _hold(server: OipServer, pool: ThreadPoolExecutor) -> list[Future[httpx.Response]]:
    """``HELD`` requests in the worker's batchers, once the server reports them all in progress."""

    def post(model: str) -> httpx.Response:
        return httpx.post(f"{server.url}/v2/models/{model}/infer", json=ONE, timeout=3600)

    held = [pool.submit(post, HELD_MODELS[index // HELD_PER_MODEL]) for index in range(HELD)]
    wait_for(lambda: _pending(server, HELD_MODELS) == HELD, f"the server reports {HELD} held requests")
    return held


@contextlib.contextmanager
def _loop_held(server: OipServer, answers: list[int] | None = None) -> Iterator[None]:
    """``blocker`` requests back to back on two connections while the block runs: the loop runs behind. Their
    statuses go to ``answers`` as they come."""
    stop = threading.Event()
    seen = [] if answers is None else answers

    def block() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                seen.append(client.post(f"{server.url}/v2/models/blocker/infer", json=ONE).status_code)

    # Its first run is measured in a thread; from the second on it runs on the loop.
    assert httpx.post(f"{server.url}/v2/models/blocker/infer", json=ONE, timeout=3600).status_code == 200
    threads = [threading.Thread(target=block) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_a_loop_behind_refuses_inference_at_once_and_counts_it_rejected(
    server: OipServer, pool: ThreadPoolExecutor
) -> None:
    iris = f"{server.url}/v2/models/iris/infer"
    with httpx.Client(timeout=3600) as client:
        _hold(server, pool)
        with _loop_held(server):
            statuses = []
            for _ in range(ATTEMPTS):
                answer = client.post(iris, json=iris_requests.IRIS_REQUEST)
                statuses.append(answer.status_code)
                if answer.status_code != 200:
                    break
            assert answer.status_code == 503, f"no refusal in {ATTEMPTS} requests while the loop is held"
            assert statuses[:-1] == [200] * (len(statuses) - 1), statuses
            assert LOOP_REFUSAL in answer.json()["error"], answer.text
            assert int(answer.headers["retry-after"]) >= 1
            # Health is never refused; metadata neither.
            assert client.get(f"{server.url}/v2/health/ready").status_code == 200
            assert client.get(f"{server.url}/v2/models/iris").status_code == 200
        # The loop keeps up again: the cap grows past what the worker holds, then goes; the same connection is
        # answered.
        for _ in range(ATTEMPTS):
            answer = client.post(iris, json=iris_requests.IRIS_REQUEST)
            if answer.status_code == 200:
                break
            assert answer.status_code == 503 and LOOP_REFUSAL in answer.json()["error"], answer.text
        assert answer.status_code == 200, f"still refused after {ATTEMPTS} requests with the loop on time"
        refused = statuses.count(503)
        assert _metric(server, "nv_inference_request_failure", model="iris", version="1", reason="REJECTED") >= refused
        assert _metric(server, "nv_inference_pending_request_count", model="iris", version="1") == 0
        assert _metric(server, "nv_inference_request_failure", model="iris", version="1", reason="BACKEND") == 0


def test_connections_opened_while_the_loop_is_behind_are_taken_together(server: OipServer) -> None:
    """``NEW`` connections opened at once, each with a health request, while ``blocker`` holds the loop a long turn
    per run: all are answered while the blocker gets a few answers, as the worker takes every waiting connection in
    one turn (a server taking one a turn, libuv's, answers the last after ``NEW`` turns, a blocker run each)."""
    answers: list[int] = []
    address = ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
    with _loop_held(server, answers):
        wait_for(lambda: len(answers) >= 2, "two blocker answers")
        before = len(answers)
        clients = [socket.create_connection(address, timeout=3600) for _ in range(NEW)]
        try:
            for client in clients:
                client.sendall(b"GET /v2/health/ready HTTP/1.1\r\nhost: oip\r\nconnection: close\r\n\r\n")
            heads = [_head(client) for client in clients]
            during = answers[before:].count(200)  # each a run that held the loop (a refusal would not)
        finally:
            for client in clients:
                client.close()
    assert heads == [b"HTTP/1.1 200 OK"] * NEW
    assert during <= NEW // 4, f"{during} blocker answers before {NEW} new connections were answered"


def _head(client: socket.socket) -> bytes:
    """The status line of the answer ``client`` reads."""
    seen = b""
    while b"\r\n" not in seen:
        chunk = client.recv(4096)
        assert chunk, f"closed after {seen!r}"
        seen += chunk
    return seen.split(b"\r\n", 1)[0]


def test_requests_waiting_on_a_model_make_no_refusal_of_the_loop(server: OipServer, pool: ThreadPoolExecutor) -> None:
    """More requests than the cap's floor wait in batchers (not on the loop): the loop is on time, nothing is
    refused, and a stream of iris requests beside them is answered."""
    iris = f"{server.url}/v2/models/iris/infer"
    with httpx.Client(timeout=3600) as client:
        _hold(server, pool)
        for _ in range(2 * FLOOR):
            answer = client.post(iris, json=iris_requests.IRIS_REQUEST)
            assert answer.status_code == 200, answer.text
        assert _metric(server, "nv_inference_request_failure", model="iris", version="1", reason="REJECTED") == 0
        assert _pending(server, HELD_MODELS) == HELD
