"""``oip serve --metrics-port``: one Prometheus scrape for the whole server, through a real ``oip serve --workers 2``
process tree on 127.0.0.1 (REST and gRPC), scraped over HTTP and read with prometheus_client's parser.

Every transport's requests (REST V2, KServe V1, SageMaker, Vertex AI, gRPC unary and streaming) are counted alike,
Triton's counters equal the statistics extension's numbers, the histograms count the successes, the pending gauge
returns to 0, a worker killed mid-run loses nothing already counted and its request in flight leaves the pending
gauge, and `oip serve` does not start without the metrics port it is given (Triton's 8002 unless told otherwise)."""

# covers: handler/cli/metrics_endpoint.py
# covers: handler/observability/exporter.py

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.metrics_scrape import Scrape, dashboard_expressions, metric_names, scrape
from tests.support.servers import HeldPort, OipServer, environment, launch, oip_serve, serve_command, wait_for

VERTEX_PREDICT = "/vertex/predict"
IRIS_ROW = [5.1, 3.5, 1.4, 0.2]
TRITON_COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[OipServer, str]]:
    """``oip serve --workers 2`` over the demo repository with gRPC, the Vertex AI routes and a metrics port."""
    with HeldPort() as metrics:
        env = {"AIP_PREDICT_ROUTE": VERTEX_PREDICT, "AIP_HEALTH_ROUTE": "/vertex/health", "OIP_DEFAULT_MODEL": "iris"}
        with oip_serve("--metrics-port", str(metrics.port), env=env, grpc=True, workers=2) as server:
            yield server, f"http://127.0.0.1:{metrics.port}/metrics"


def _v2(rows: int = 1, shape: tuple[int, int] | None = None) -> dict[str, Any]:
    """An iris request of ``rows`` rows, or of a ``shape`` (its data as many values) the model may refuse."""
    shape = shape or (rows, 4)
    data = (IRIS_ROW * shape[0] * shape[1])[: shape[0] * shape[1]]
    return {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(shape), "data": data}]}


def _grpc_inputs(rows: int, width: int = 224) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("image", [rows, 3, width, 224], "FP32")
    tensor.set_data_from_numpy(np.zeros((rows, 3, width, 224), dtype=np.float32))
    return [tensor]


def _statistics(server: OipServer) -> dict[tuple[str, str], dict[str, Any]]:
    documents = httpx.get(f"{server.url}/v2/models/stats", timeout=10).json()["model_stats"]
    return {(document["name"], document["version"]): document for document in documents}


def _send_mix(server: OipServer) -> dict[tuple[str, str], tuple[int, int, int]]:
    """A known mix over every transport: {(model, version): (successes, failures, inferences)}."""
    rest = httpx.Client(base_url=server.url, timeout=30)
    for rows in (1, 2, 3):  # REST V2
        assert rest.post("/v2/models/iris/infer", json=_v2(rows)).status_code == 200
    for _ in range(2):  # a shape the model refuses: reaches the model, fails there
        assert rest.post("/v2/models/iris/infer", json=_v2(shape=(1, 3))).status_code == 400
    assert rest.post("/v1/models/iris:predict", json={"instances": [IRIS_ROW, IRIS_ROW]}).status_code == 200
    sagemaker = {"X-Amzn-SageMaker-Custom-Attributes": "model=iris"}
    assert rest.post("/invocations", json=_v2(), headers=sagemaker).status_code == 200
    assert rest.post(VERTEX_PREDICT, json={"instances": [IRIS_ROW]}).status_code == 200
    # Refused before any model is reached: counted nowhere (as Triton counts them).
    malformed = rest.post("/v2/models/iris/infer", content=b"{not", headers={"content-type": "application/json"})
    assert malformed.status_code == 400
    assert rest.post("/v2/models/nobody/infer", json=_v2()).status_code == 404
    assert server.grpc is not None
    client = grpcclient.InferenceServerClient(server.grpc)
    try:
        for rows in (1, 2):  # gRPC unary
            client.infer("tiny_image", _grpc_inputs(rows))
        with pytest.raises(InferenceServerException):
            client.infer("tiny_image", _grpc_inputs(1, width=100))
        answers: list[Any] = []
        client.start_stream(callback=lambda result, error: answers.append(error or result))
        for rows in (1, 1, 2):  # gRPC streaming
            client.async_stream_infer("tiny_image", _grpc_inputs(rows))
        deadline = time.monotonic() + 30
        while len(answers) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        client.stop_stream()
        assert len(answers) == 3 and not any(isinstance(answer, Exception) for answer in answers)
    finally:
        client.close()
    return {("iris", "1"): (3 + 1 + 1 + 1, 2, 1 + 2 + 3 + 2 + 1 + 1), ("tiny_image", "1"): (5, 1, 1 + 2 + 1 + 1 + 2)}


def _assert_agree(metrics: Scrape, statistics: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Triton's counters in the scrape are the statistics extension's numbers, version by version."""
    for (model, version), document in statistics.items():
        labels = {"model": model, "version": version}
        stats = document["inference_stats"]
        expected = {
            "nv_inference_request_success": stats["success"]["count"],
            "nv_inference_count": document["inference_count"],
            "nv_inference_exec_count": document["execution_count"],
            "nv_inference_request_duration_us": stats["success"]["ns"] // 1000,
            "nv_inference_queue_duration_us": stats["queue"]["ns"] // 1000,
            "nv_inference_compute_input_duration_us": stats["compute_input"]["ns"] // 1000,
            "nv_inference_compute_infer_duration_us": stats["compute_infer"]["ns"] // 1000,
            "nv_inference_compute_output_duration_us": stats["compute_output"]["ns"] // 1000,
        }
        for name, value in expected.items():
            assert metrics.value(name, **labels) == value, (name, labels)
        assert metrics.value("oip_inference_request_duration_seconds_count", **labels) == stats["success"]["count"]


def test_every_transport_is_counted_and_the_metrics_agree_with_the_statistics(served: tuple[OipServer, str]) -> None:
    server, url = served
    before = scrape(url)  # the module's other tests share the server
    sent = _send_mix(server)
    metrics, statistics = scrape(url), _statistics(server)
    _assert_agree(metrics, statistics)
    for (model, version), (successes, failures, inferences) in sent.items():
        labels = {"model": model, "version": version}

        def added(name: str, **more: str) -> float:
            return metrics.value(name, **labels, **more) - before.value(name, **labels, **more)  # noqa: B023

        assert added("nv_inference_request_success") == successes
        # The failures are a client's 400s: counted in the statistics' ``fail``, no failure of the model's in the
        # metrics (Triton refuses them before the model): tests/component/test_failure_reasons.py has the others.
        assert statistics[(model, version)]["inference_stats"]["fail"]["count"] >= failures
        for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
            assert added("nv_inference_request_failure", reason=reason) == 0
        assert added("nv_inference_count") == inferences
        for histogram in ("request", "queue", "compute"):
            name = f"oip_inference_{histogram}_duration_seconds"
            assert added(f"{name}_count") == successes
            assert added(f"{name}_bucket", le="+Inf") == successes
        assert metrics.value("nv_inference_pending_request_count", **labels) == 0
        # The histogram's sum is the statistics' success time (the same measurement, in seconds).
        request_sum = metrics.value("oip_inference_request_duration_seconds_sum", **labels)
        assert request_sum == pytest.approx(metrics.value("nv_inference_request_duration_us", **labels) / 1e6, abs=1e-3)
    # Names a client made up get no series.
    assert all(dict(labels).get("model") != "nobody" for _, labels in metrics.samples)
    assert metrics.types["nv_inference_pending_request_count"] == "gauge"
    assert metrics.types["oip_inference_request_duration_seconds"] == "histogram"
    assert metrics.value("oip_build_info", onnxruntime=_onnxruntime(), python=_python(), version=_version()) == 1
    assert metrics.value("process_resident_memory_bytes") > 0
    assert 0 < metrics.value("nv_cpu_memory_used_bytes") < metrics.value("nv_cpu_memory_total_bytes")


def _onnxruntime() -> str:
    from importlib.metadata import version

    return version("onnxruntime")


def _python() -> str:
    import platform

    return platform.python_version()


def _version() -> str:
    from handler import __version__

    return __version__


def _recording_workers(server: OipServer) -> list[int]:
    """The workers of ``server`` that counted a request (their statistics table lists a row)."""
    from handler.observability.exporter import server_pids

    found = []
    for pid in server_pids(server.pid):
        mapped = [line.split()[-1] for line in _read(Path(f"/proc/{pid}/maps")).splitlines() if ".counters" in line]
        if pid != server.pid and mapped and _read(Path(mapped[0]).with_suffix(".keys")):
            found.append(pid)
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_a_killed_worker_loses_nothing_already_counted(served: tuple[OipServer, str]) -> None:
    server, url = served
    client = httpx.Client(base_url=server.url, timeout=30)
    for _ in range(6):
        assert client.post("/v2/models/iris/infer", json=_v2()).status_code == 200
    before = scrape(url)
    victim = _recording_workers(server)[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{victim}").exists() and time.monotonic() < deadline:  # until the supervisor reaps it
        time.sleep(0.1)
    assert not Path(f"/proc/{victim}").exists()
    after = scrape(url)
    for name in (*TRITON_COUNTERS, "oip_inference_request_duration_seconds_count"):
        assert after.value(name, model="iris", version="1") == before.value(name, model="iris", version="1"), name
    # The replacement serves, and counts on from there.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if client.post("/v2/models/iris/infer", json=_v2()).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    final = scrape(url)
    labels = {"model": "iris", "version": "1"}
    successes = before.value("nv_inference_request_success", **labels)
    assert final.value("nv_inference_request_success", **labels) == successes + 1
    assert final.value("nv_inference_pending_request_count", **labels) == 0
    _assert_agree(final, _statistics(server))


def _holder(server: OipServer, client: socket.socket) -> int:
    """The worker of ``server`` holding the server end of ``client``'s connection."""
    from handler.observability.exporter import server_pids

    port = f"{client.getsockname()[1]:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2].endswith(f":{port}") and fields[3] == "01":  # ESTABLISHED, its remote end our client
            inodes.add(f"socket:[{fields[9]}]")
    for pid in server_pids(server.pid):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if pid != server.pid and os.readlink(fd) in inodes:
                    return pid
    raise AssertionError(f"no worker holds the connection from port {int(port, 16)}")


def test_a_worker_killed_with_a_request_in_flight_drops_it_from_the_pending_gauge(
    served: tuple[OipServer, str],
) -> None:
    server, url = served
    labels = {"model": "iris", "version": "1"}
    before = scrape(url)
    body = json.dumps(_v2()).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        # Headers and half the body: the request is in the server, reading the rest, until its body timeout.
        client.sendall(b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])  # fmt: skip
        deadline = time.monotonic() + 30
        while scrape(url).value("nv_inference_pending_request_count", **labels) != 1:
            assert time.monotonic() < deadline, "the request never became pending"
            time.sleep(0.1)
        victim = _holder(server, client)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while scrape(url).value("nv_inference_pending_request_count", **labels) != 0:
            assert time.monotonic() < deadline, "the dead worker's request stayed pending"
            time.sleep(0.1)
    after = scrape(url)
    for name in (*TRITON_COUNTERS, "oip_inference_request_duration_seconds_count"):
        assert after.value(name, **labels) == before.value(name, **labels), name
    _wait_until_answered(server)


def _wait_until_answered(server: OipServer) -> None:
    """Until an inference request succeeds again (the killed worker's replacement, or the other, answers)."""
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=server.url, timeout=30) as client:
        while True:
            with contextlib.suppress(httpx.TransportError):
                if client.post("/v2/models/iris/infer", json=_v2()).status_code == 200:
                    return
            assert time.monotonic() < deadline
            time.sleep(0.2)


def test_the_http_port_serves_no_metrics(served: tuple[OipServer, str]) -> None:
    server, _ = served
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 404


def test_a_metrics_port_in_use_stops_oip_serve_with_code_3() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with HeldPort() as http:
            result = subprocess.run(
                serve_command("--port", str(http.port), "--metrics-port", str(port), "--workers", "2"),
                capture_output=True, text=True, timeout=120, env={**os.environ, "OIP_LOG_LEVEL": "warning"},
            )  # fmt: skip
    assert result.returncode == 3
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "--metrics-port 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_metrics_port_that_is_the_http_port_stops_oip_serve_with_code_3() -> None:
    with HeldPort() as http:
        result = subprocess.run(
            serve_command("--port", str(http.port), "--metrics-port", str(http.port), "--workers", "1"),
            capture_output=True, text=True, timeout=120, env={**os.environ, "OIP_LOG_LEVEL": "warning"},
        )  # fmt: skip
    assert result.returncode == 3
    assert f"cannot serve metrics on 127.0.0.1:{http.port}: it is the HTTP or gRPC port too" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_metrics_port_is_tritons_8002_unless_told_otherwise() -> None:
    from handler.cli import build_parser
    from handler.config.settings import Settings

    assert Settings.from_env({}).metrics_port == 8002
    assert Settings.from_env({"OIP_METRICS_PORT": "0"}).metrics_port == 0
    assert Settings.from_env({}, metrics_port=9102).metrics_port == 9102
    parser = build_parser()
    assert parser.parse_args(["serve"]).metrics_port is None  # unset: the variable, else 8002
    serve_help = subprocess.run(serve_command("--help"), capture_output=True, text=True, timeout=60, check=True)
    assert "default: 8002" in " ".join(serve_help.stdout.split())
    # oip serve with nothing said, in a network namespace of its own (loopback only), so that it binds no port of
    # this machine's: it listens on 8002 and says so.
    in_namespace = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
    command = in_namespace + serve_command("--port", "8000", "--workers", "1")
    child = launch("oip serve in a network namespace", command, env=environment(drop=("OIP_METRICS",)))
    try:
        wait_for(lambda: 8002 in _namespace_listening(child.pid), "oip serve listening on 8002", detail=child.text)
        banner = "metrics on http://127.0.0.1:8002/metrics"
        wait_for(lambda: banner in child.text(), "the start-up log naming the metrics address", detail=child.text)
    finally:
        child.stop()


def _namespace_listening(pid: int) -> set[int]:
    """The TCP ports listened on in the network namespace of ``pid`` (its ``/proc/PID/net/tcp``)."""
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[1].rsplit(":", 1)[1], 16) for line in lines if line.split()[3] == "0A"}


def test_metrics_port_zero_serves_none() -> None:
    with oip_serve("--metrics-port", "0", workers=2) as server:
        assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_v2(), timeout=30).status_code == 200
        assert _listening_ports(server.pid) == {server.port}


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports that ``pid`` and its children listen on."""
    from handler.observability.exporter import server_pids

    listening = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                listening[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    ports = set()
    for each in server_pids(pid):
        for fd in Path(f"/proc/{each}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            inode = target.removeprefix("socket:[").removesuffix("]")
            if target.startswith("socket:") and inode in listening:
                ports.add(listening[inode])
    return ports


def test_one_worker_serves_metrics_from_a_thread() -> None:
    with HeldPort() as metrics, oip_serve("--metrics-port", str(metrics.port), workers=1) as server:
        for _ in range(3):
            assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_v2(), timeout=30).status_code == 200
        result = scrape(f"http://127.0.0.1:{metrics.port}/metrics")
        _assert_agree(result, _statistics(server))
        assert result.value("nv_inference_request_success", model="iris", version="1") == 3


DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana-dashboard.json"


def test_the_promql_reader_finds_every_metric_name() -> None:
    expression = (
        'histogram_quantile(0.99, sum by (le, model) (rate(a_bucket{model="x"}[$__rate_interval])))'
        " / ignoring (reason) sum without (pid) (b_total offset 5m) + on (model) c"
    )
    assert metric_names(expression) == {"a_bucket", "b_total", "c"}


def test_every_dashboard_expression_queries_metrics_the_server_exports(served: tuple[OipServer, str]) -> None:
    server, url = served
    assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_v2(), timeout=30).status_code == 200
    expressions = dashboard_expressions(json.loads(DASHBOARD.read_text()))
    assert len(expressions) >= 10
    exported = scrape(url).names()
    for expression in expressions:
        names = metric_names(expression)
        assert names, expression
        assert names <= exported, (expression, names - exported)
