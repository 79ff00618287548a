"""A real Prometheus server (Debian's ``prometheus``, which .ci/run installs) scraping ``oip serve --workers 2`` every
second on 127.0.0.1: a known mix of requests (successes over REST and gRPC, failures, two models), then
Prometheus's HTTP API says what an operator's dashboards and alerts would see."""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.metrics_scrape import dashboard_expressions
from tests.servers import LOOPBACK, HeldPort, OipServer, oip_serve, running

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana-dashboard.json"
SCRAPE_SECONDS = 1
IRIS_ROW = [5.1, 3.5, 1.4, 0.2]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OipServer, str]]:
    """``oip serve --workers 2`` (REST, gRPC, metrics) and Prometheus scraping it; (server, Prometheus' URL)."""
    binary = shutil.which("prometheus")
    assert binary is not None, "Debian's prometheus package is not installed (.ci/run installs it)"
    workdir = tmp_path_factory.mktemp("prometheus")
    with (
        HeldPort() as metrics,
        HeldPort() as web,
        oip_serve("--metrics-port", str(metrics.port), grpc=True, workers=2) as server,
    ):
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_SECONDS}s\n  evaluation_interval: {SCRAPE_SECONDS}s\n"
            f"scrape_configs:\n  - job_name: oip\n    static_configs:\n"
            f"      - targets: ['{LOOPBACK}:{metrics.port}']\n"
        )
        url = f"http://{LOOPBACK}:{web.port}"
        command = [
            binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={LOOPBACK}:{web.port}", "--log.level=warn",
        ]  # fmt: skip
        with running("prometheus", command, lambda _: _up(url)):
            yield server, url


def _up(url: str) -> bool:
    """Prometheus is ready and its scrape of the server succeeded once."""
    try:
        if httpx.get(f"{url}/-/ready", timeout=2).status_code != 200:
            return False
        return _query(url, "up") == [1.0]
    except httpx.TransportError:
        return False


def _query(url: str, expression: str) -> list[float]:
    """An instant query's values (Prometheus' HTTP API, ``/api/v1/query``)."""
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expression}, timeout=10).json()
    assert answer["status"] == "success", (expression, answer)
    return [float(item["value"][1]) for item in answer["data"]["result"]]


def _one(url: str, expression: str) -> float:
    values = _query(url, expression)
    assert len(values) == 1, (expression, values)
    return values[0]


def _image(rows: int, width: int = 224) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("image", [rows, 3, width, 224], "FP32")
    tensor.set_data_from_numpy(np.zeros((rows, 3, width, 224), dtype=np.float32))
    return [tensor]


def _send(server: OipServer) -> tuple[dict[str, tuple[int, int]], list[float]]:
    """The mix: {model: (successes, failures)} and the client-measured latency of every success (seconds)."""
    latencies: list[float] = []
    with httpx.Client(base_url=server.url, timeout=30) as rest:
        for _ in range(40):
            started = time.perf_counter()
            answer = rest.post("/v2/models/iris/infer", json={"inputs": [
                {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": IRIS_ROW}]})  # fmt: skip
            latencies.append(time.perf_counter() - started)
            assert answer.status_code == 200
        for _ in range(3):
            refused = rest.post("/v2/models/iris/infer", json={"inputs": [
                {"name": "input", "datatype": "FP32", "shape": [1, 3], "data": IRIS_ROW[:3]}]})  # fmt: skip
            assert refused.status_code == 400
    assert server.grpc is not None
    client = grpcclient.InferenceServerClient(server.grpc)
    try:
        for _ in range(10):
            started = time.perf_counter()
            client.infer("tiny_image", _image(1))
            latencies.append(time.perf_counter() - started)
        for _ in range(2):
            with pytest.raises(InferenceServerException):
                client.infer("tiny_image", _image(1, width=100))
    finally:
        client.close()
    return {"iris": (40, 3), "tiny_image": (10, 2)}, latencies


def _wait_for(url: str, expression: str, expected: float, timeout: float = 30) -> None:
    """Until ``expression``'s one value is ``expected`` (a scrape after the last request)."""
    deadline = time.monotonic() + timeout
    while True:
        values = _query(url, expression)
        if values == [expected]:
            return
        assert time.monotonic() < deadline, (expression, values, expected)
        time.sleep(SCRAPE_SECONDS / 2)


def test_prometheus_sees_what_was_sent(stack: tuple[OipServer, str]) -> None:
    server, url = stack
    queries = {
        model: (
            f'sum(nv_inference_request_success{{model="{model}"}})',
            f'sum(nv_inference_request_failure{{model="{model}",reason="BACKEND"}})',
            f'sum(oip_inference_request_duration_seconds_count{{model="{model}"}})',
        )
        for model in ("iris", "tiny_image")
    }
    # What the module's other test sent before (nothing, when this one runs first).
    before = {query: sum(_query(url, query)) for each in queries.values() for query in each}
    sent, latencies = _send(server)
    total = sum(before[queries[model][0]] + successes for model, (successes, _) in sent.items())
    _wait_for(url, "sum(nv_inference_request_success)", float(total))
    total = sum(before[queries[model][1]] + failures for model, (_, failures) in sent.items())
    _wait_for(url, "sum(nv_inference_request_failure)", float(total))
    for model, (successes, failures) in sent.items():
        success, failure, histogram = queries[model]
        assert _one(url, success) - before[success] == successes
        assert _one(url, failure) - before[failure] == failures
        assert _one(url, histogram) - before[histogram] == successes
    # The fleet-wide p99 of every request so far, from the cumulative buckets of both workers: finite, and no more
    # than the slowest answer the client saw (the server's time is part of the client's).
    buckets = "sum by (le) (oip_inference_request_duration_seconds_bucket)"
    p99, p50 = _one(url, f"histogram_quantile(0.99, {buckets})"), _one(url, f"histogram_quantile(0.5, {buckets})")
    assert math.isfinite(p99) and 0 < p50 <= p99 <= max(latencies), (p50, p99, min(latencies), max(latencies))
    assert _one(url, "sum(nv_inference_pending_request_count)") == 0
    # Both workers' files are in the one scrape: Prometheus saw one target.
    assert _query(url, "up") == [1.0]


def test_every_dashboard_expression_returns_data(stack: tuple[OipServer, str]) -> None:
    server, url = stack
    with httpx.Client(base_url=server.url, timeout=30) as rest:
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": IRIS_ROW}]}
        for _ in range(5):
            assert rest.post("/v2/models/iris/infer", json=body).status_code == 200
            time.sleep(SCRAPE_SECONDS)
    time.sleep(2 * SCRAPE_SECONDS)
    empty: list[str] = []
    for expression in dashboard_expressions(json.loads(DASHBOARD.read_text())):
        query = expression.replace("$__rate_interval", "1m")
        if not _query(url, query):
            empty.append(query)
    assert not empty, empty
