"""One trace from the client through this server into a real tritonserver, and Triton's metric names, types and
labels beside ours.

tritonserver 2.51 (tests/support/triton_server.py) runs with its OpenTelemetry tracing on
(``--trace-config mode=opentelemetry``), exporting OTLP/HTTP JSON to a receiver in this test, and its metrics port
open. Our spans go to the OpenTelemetry SDK's in-memory exporter; the trace id the client sent must be in both, and
Triton's span must be a child of ours."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.triton.settings import TritonSettings
from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.server import build_app
from tests.support.metrics_scrape import scrape
from tests.support.servers import LOOPBACK, HeldPort, LiveServer, oip_serve, wait_for
from tests.support.spans import in_memory_spans
from tests.support.triton_server import TritonServer, build_repository

pytestmark = pytest.mark.integration

IRIS = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}]}


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps each exported document."""

    documents: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.documents.append(json.loads(body))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, int]]:
    """tritonserver tracing every request to the receiver, metrics on; (server, metrics port)."""
    receiver = ThreadingHTTPServer((LOOPBACK, 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    workdir = tmp_path_factory.mktemp("triton-traced")
    with HeldPort() as http, HeldPort() as grpc, HeldPort() as metrics:
        options = (
            "--trace-config=mode=opentelemetry", "--trace-config=rate=1", "--trace-config=level=TIMESTAMPS",
            f"--trace-config=opentelemetry,url={LOOPBACK}:{receiver.server_address[1]}/v1/traces",
            "--trace-config=opentelemetry,bsp_schedule_delay=100", "--allow-metrics=true",
            f"--metrics-port={metrics.port}", f"--metrics-address={LOOPBACK}", "--metrics-interval-ms=200",
        )  # fmt: skip
        server = TritonServer(build_repository(workdir / "models"), workdir, http.port, grpc.port, options)
        server.start()
        try:
            yield server, metrics.port
        finally:
            server.stop()
            receiver.shutdown()


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """This process's spans, kept in memory."""
    return in_memory_spans()


def _served(triton: TritonServer, protocol: str) -> LiveServer:
    url = triton.http_url if protocol == "http" else triton.grpc_url
    routes = TritonSettings.parse_routes("remote_iris=iris")
    settings = Settings(
        model_repository=str(DEMO_REPOSITORY),
        opentelemetry=True,
        triton=TritonSettings(url=url, protocol=protocol, routes=routes, trace_context=True),
    )
    server = LiveServer(build_app(settings))
    server.start()
    return server


def _spans() -> list[dict[str, Any]]:
    """Every span Triton has exported to the receiver so far."""
    return [
        span
        for document in list(_Receiver.documents)
        for resource in document.get("resourceSpans", [])
        for scope in resource.get("scopeSpans", [])
        for span in scope.get("spans", [])
    ]


def _triton_spans(trace_id: str, log: Path) -> list[dict[str, Any]]:
    """Triton's exported spans of ``trace_id``, once it has exported its request span; else ``wait_for``'s error,
    with the traces Triton did export and the end of its log (``log``)."""

    def found() -> list[dict[str, Any]]:
        traced = [span for span in _spans() if span.get("traceId", "").lower() == trace_id]
        return traced if any(span["name"] == "InferRequest" for span in traced) else []

    def exported() -> str:
        traces = sorted({span.get("traceId", "").lower() for span in _spans()})
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else "(no log)"
        return f"traces exported: {traces}; tritonserver's log ends:\n{tail}"

    return wait_for(found, f"Triton's InferRequest span of trace {trace_id}", detail=exported)


@pytest.mark.parametrize(("protocol", "step"), [("http", "forward"), ("grpc", "run")])
def test_one_trace_covers_the_client_this_server_and_triton(
    triton: tuple[TritonServer, int], spans: InMemorySpanExporter, protocol: str, step: str
) -> None:
    """HTTP: the body passed through as it came (``forward``); gRPC: decoded and sent by tritonclient (``run``),
    the trace context in the call's metadata."""
    server = _served(triton[0], protocol)
    try:
        trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
        headers = {"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=kept"}
        answer = httpx.post(f"http://{server.url}/v2/models/remote_iris/infer", json=IRIS, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    finally:
        server.stop()
    ours = [span for span in spans.get_finished_spans() if format(span.context.trace_id, "032x") == trace_id]
    by_name = {span.name: span for span in ours}
    assert step in by_name, sorted(by_name)
    entry = min(ours, key=lambda span: span.start_time)  # FastAPI's server span, the caller's child
    assert entry.parent is not None and format(entry.parent.span_id, "016x") == parent
    assert entry.context.trace_state.get("vendor") == "kept"
    ours_step = by_name[step]
    assert ours_step.parent is not None and ours_step.parent.trace_id == entry.context.trace_id
    theirs = _triton_spans(trace_id, triton[0].log)
    requests = [span for span in theirs if span["name"] == "InferRequest"]
    assert requests, theirs
    # Triton's request span is a child of the span that forwarded it.
    assert requests[0]["parentSpanId"].lower() == format(ours_step.context.span_id, "016x")


#: Triton's families that have no equivalent here (GPU memory pools).
TRITON_ONLY = {"nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes"}


def test_metric_names_types_and_labels_are_tritons(triton: tuple[TritonServer, int]) -> None:
    """One request to iris on Triton and one forwarded to it through ``oip serve``: every family Triton's metrics
    port gives has the same name and label names in ours, gauges as gauges; Triton's counters are untyped here
    (prometheus_client would suffix their samples ``_total``). The forwarded model is counted in both."""
    server, metrics_port = triton
    assert httpx.post(f"http://{server.http_url}/v2/models/iris/infer", json=IRIS, timeout=30).status_code == 200
    # Triton's gauges and counters are refreshed every --metrics-interval-ms: until they count the request.
    theirs = wait_for(
        lambda: (
            (found := scrape(f"http://{LOOPBACK}:{metrics_port}/metrics")).value(
                "nv_inference_request_success", model="iris", version="1"
            )
            and found
        ),
        "Triton's metrics counting the request",
    )
    env = {"OIP_TRITON_URL": server.http_url, "OIP_TRITON_MODELS": "remote_iris=iris"}
    with HeldPort() as ours_port, oip_serve("--metrics-port", str(ours_port.port), env=env, workers=2) as oip:
        for _ in range(2):
            assert httpx.post(f"{oip.url}/v2/models/remote_iris/infer", json=IRIS, timeout=30).status_code == 200
        ours = scrape(f"http://{LOOPBACK}:{ours_port.port}/metrics")
        statistics = httpx.get(f"{oip.url}/v2/models/remote_iris/stats", timeout=10).json()["model_stats"]
    families = {name for name in theirs.types if name.startswith("nv_")} - TRITON_ONLY
    assert "nv_inference_request_success" in families and "nv_inference_pending_request_count" in families
    for name in sorted(families):
        assert name in ours.types, name
        expected = "unknown" if theirs.types[name] == "counter" else theirs.types[name]
        assert ours.types[name] == expected, (name, theirs.types[name], ours.types[name])
        assert ours.label_sets(name) == theirs.label_sets(name), name
    failure = "nv_inference_request_failure"
    reasons = {dict(labels)["reason"] for sample, labels in theirs.samples if sample == failure}
    assert reasons == {dict(labels)["reason"] for sample, labels in ours.samples if sample == failure}
    # The forwarded model, counted as the statistics count it (Triton's version is the one it answered).
    (document,) = statistics
    labels = {"model": "remote_iris", "version": document["version"]}
    assert ours.value("nv_inference_request_success", **labels) == document["inference_stats"]["success"]["count"] == 2
    assert ours.value("oip_inference_request_duration_seconds_count", **labels) == 2
    assert theirs.value("nv_inference_request_success", model="iris", version="1") >= 1
