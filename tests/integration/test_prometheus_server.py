"""A real Prometheus server (Debian's ``prometheus``, which .ci/run installs) scraping ``oip serve --workers 2`` every
second on 127.0.0.1: a known mix of requests (successes over REST and gRPC, refused inputs, two models), each REST
request on a connection of its own until both workers have served some (their own statistics files say so), then
Prometheus's HTTP API says what an operator's dashboards and alerts would see: the sum of both workers' counts, and
latencies within the histogram's bucket bounds."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from handler.protocol.statistics_counters import read_snapshot
from tests.support.metrics_scrape import dashboard_expressions
from tests.support.procfs import children
from tests.support.servers import LOOPBACK, HeldPort, OipServer, oip_serve, running

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana-dashboard.json"
SCRAPE_SECONDS = 1
IRIS_ROW = [5.1, 3.5, 1.4, 0.2]
IRIS_BODY = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": IRIS_ROW}]}
#: Requests sent at least, and at most while waiting for both workers to have served some.
LEAST, MOST = 40, 2000


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


def _workers(server: OipServer) -> dict[int, Path]:
    """Each worker's pid and the statistics directory it counts in: where its counters file is mapped
    (``/proc/<pid>/maps``)."""
    workers = {}
    for pid in children(server.pid):
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            path = Path(line.split(maxsplit=5)[-1])
            if path.suffix == ".counters" and path.name.startswith(f"{pid}-"):
                workers[pid] = path.parent
    assert len(workers) == 2, workers
    return workers


def _served_by(pid: int, directory: Path, scratch: Path) -> int:
    """The iris successes one worker counted: its own files of the statistics directory (``<pid>-<start>``) read
    on their own, as the metrics endpoint reads them all."""
    own = scratch / str(pid)
    own.mkdir(exist_ok=True)
    for path in directory.glob(f"{pid}-*"):
        (own / path.name).write_bytes(path.read_bytes())
    (document,) = read_snapshot(own).documents([("iris", "1")])
    return int(document["inference_stats"]["success"]["count"])


def _send(server: OipServer, scratch: Path) -> tuple[dict[str, int], list[float], dict[int, int]]:
    """The mix: {model: successes} (and 5 refused inputs), the client-measured latency of every iris success
    (seconds), and the iris successes each worker (by pid) counted in all. REST requests each on a connection of
    its own (no keep-alive), until both workers have served some."""
    workers = _workers(server)
    latencies: list[float] = []
    with httpx.Client(base_url=server.url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as rest:
        served = dict.fromkeys(workers, 0)
        while len(latencies) < LEAST or not all(served.values()):
            assert len(latencies) < MOST, f"one worker served every request of {MOST}: {served}"
            started = time.perf_counter()
            answer = rest.post("/v2/models/iris/infer", json=IRIS_BODY)
            latencies.append(time.perf_counter() - started)
            assert answer.status_code == 200
            served = {pid: _served_by(pid, directory, scratch) for pid, directory in workers.items()}
        for _ in range(3):
            refused = rest.post("/v2/models/iris/infer", json={"inputs": [
                {"name": "input", "datatype": "FP32", "shape": [1, 3], "data": IRIS_ROW[:3]}]})  # fmt: skip
            assert refused.status_code == 400
    assert server.grpc is not None
    client = grpcclient.InferenceServerClient(server.grpc)
    try:
        for _ in range(2):
            with pytest.raises(InferenceServerException) as refused_call:
                client.infer("tiny_image", _image(1, width=100))
            assert refused_call.value.status() == "StatusCode.INVALID_ARGUMENT"
        for _ in range(10):  # after the refusals: a scrape that has these has them too
            client.infer("tiny_image", _image(1))
    finally:
        client.close()
    return {"iris": len(latencies), "tiny_image": 10}, latencies, served


def _buckets(url: str, model: str) -> dict[float, float]:
    """The cumulative request-duration buckets of ``model``, both workers' summed: {upper bound: count}."""
    expression = f'sum by (le) (oip_inference_request_duration_seconds_bucket{{model="{model}"}})'
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expression}, timeout=10).json()
    assert answer["status"] == "success", (expression, answer)
    return {float(item["metric"]["le"]): float(item["value"][1]) for item in answer["data"]["result"]}


def _wait_for(url: str, expression: str, expected: float, timeout: float = 30) -> None:
    """Until ``expression``'s one value is ``expected`` (a scrape after the last request)."""
    deadline = time.monotonic() + timeout
    while True:
        values = _query(url, expression)
        if values == [expected]:
            return
        assert time.monotonic() < deadline, (expression, values, expected)
        time.sleep(SCRAPE_SECONDS / 2)


def test_prometheus_sees_what_was_sent(stack: tuple[OipServer, str], tmp_path: Path) -> None:
    server, url = stack
    queries = {
        model: (
            f'sum(nv_inference_request_success{{model="{model}"}})',
            f'sum(nv_inference_request_failure{{model="{model}"}}) or vector(0)',
            f'sum(oip_inference_request_duration_seconds_count{{model="{model}"}})',
        )
        for model in ("iris", "tiny_image")
    }
    # What the module's other test sent before (nothing, when this one runs first).
    before = {query: sum(_query(url, query)) for each in queries.values() for query in each}
    buckets_before = _buckets(url, "iris")
    sent, latencies, served = _send(server, tmp_path)
    total = sum(before[queries[model][0]] + successes for model, successes in sent.items())
    _wait_for(url, "sum(nv_inference_request_success)", float(total))
    for model, successes in sent.items():
        success, failure, histogram = queries[model]
        assert _one(url, success) - before[success] == successes
        assert _one(url, failure) - before[failure] == 0  # a refused input (400) is no failure of the model's
        assert _one(url, histogram) - before[histogram] == successes
    # Both workers served (each one's own files), and the one scrape is the sum of the two.
    assert all(served.values()) and _one(url, queries["iris"][0]) == sum(served.values()), served
    # Every success the server timed took no longer than the slowest answer the client saw (the server's time is
    # part of the client's): the bucket of the first bound at or above that holds all of them, both workers'.
    buckets = _buckets(url, "iris")
    bound = min(le for le in buckets if le >= max(latencies))
    assert bound != float("inf"), max(latencies)
    assert buckets[bound] - buckets_before.get(bound, 0) == sent["iris"], (bound, buckets, max(latencies))
    assert _one(url, "sum(nv_inference_pending_request_count)") == 0
    # Both workers' files are in the one scrape: Prometheus saw one target.
    assert _query(url, "up") == [1.0]


def test_every_dashboard_expression_returns_data(stack: tuple[OipServer, str]) -> None:
    server, url = stack
    served = 'sum(nv_inference_request_success{model="iris"})'
    # Each request in a scrape of its own (Prometheus's sample shows it before the next is sent): rates over them.
    with httpx.Client(base_url=server.url, timeout=30) as rest:
        for _ in range(5):
            count = sum(_query(url, served))
            assert rest.post("/v2/models/iris/infer", json=IRIS_BODY).status_code == 200
            _wait_for(url, served, count + 1)
    empty: list[str] = []
    for expression in dashboard_expressions(json.loads(DASHBOARD.read_text())):
        query = expression.replace("$__rate_interval", "1m")
        if not _query(url, query):
            empty.append(query)
    assert not empty, empty
