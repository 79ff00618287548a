"""W3C trace context over gRPC: with OpenTelemetry on, a ModelInfer call whose metadata carries ``traceparent`` and
``tracestate`` runs in a server span that is the caller's child, with the inference service's spans under it; a
call without them starts a trace of its own; a stream is one server span, every request's steps under it. The V2
gRPC server runs on 127.0.0.1 (its own event loop in a thread), tritonclient calls it, and the spans go to the
OpenTelemetry SDK's in-memory exporter."""

# covers: handler/grpc/tracing.py
# covers: handler/observability/worker_telemetry.py

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.observability.worker_telemetry import worker_telemetry
from handler.runtime.container import build_dataplane
from tests.support.in_process import InProcessServers
from tests.support.spans import in_memory_spans

METHOD = "inference.GRPCInferenceService/ModelInfer"
STEPS = {"decode", "run", "encode"}


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """This process's spans, kept in memory."""
    return in_memory_spans()


@pytest.fixture(scope="module")
def address(spans: InMemorySpanExporter) -> Iterator[str]:
    """The V2 gRPC server over the demo repository, OpenTelemetry on (``OIP_OTEL``), as ``oip serve`` builds it."""
    settings = Settings(model_repository=str(DEMO_REPOSITORY), opentelemetry=True)
    dataplane = build_dataplane(settings)
    with InProcessServers(dataplane, settings, worker_telemetry(settings, dataplane), rest=False) as servers:
        yield servers.grpc


def _infer(address: str, headers: dict[str, str] | None = None) -> None:
    tensor = grpcclient.InferInput("input", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32))
    client = grpcclient.InferenceServerClient(address)
    try:
        result = client.infer("iris", [tensor], headers=headers)
    finally:
        client.close()
    assert result.as_numpy("probabilities").shape == (1, 3)


def _call_spans(spans: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The server span of the one call made since ``spans`` was cleared, and the spans under it."""
    finished = spans.get_finished_spans()
    servers = [span for span in finished if span.kind is trace.SpanKind.SERVER]
    assert len(servers) == 1, [(span.name, span.kind) for span in finished]
    (server,) = servers
    children = [span for span in finished if span.parent is not None and span.parent.span_id == server.context.span_id]
    return server, children


def test_a_call_with_traceparent_continues_the_callers_trace(spans: InMemorySpanExporter, address: str) -> None:
    spans.clear()
    trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
    _infer(address, {"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=kept"})
    server, children = _call_spans(spans)
    assert server.name == METHOD
    assert format(server.context.trace_id, "032x") == trace_id
    assert server.parent is not None and server.parent.is_remote
    assert format(server.parent.span_id, "016x") == parent
    assert server.context.trace_state.get("vendor") == "kept"
    assert server.attributes is not None and server.attributes["rpc.method"] == "ModelInfer"
    assert {span.name for span in children} == STEPS
    assert {format(span.context.trace_id, "032x") for span in children} == {trace_id}


def test_a_call_without_traceparent_starts_a_new_trace(spans: InMemorySpanExporter, address: str) -> None:
    spans.clear()
    _infer(address)
    server, children = _call_spans(spans)
    assert server.name == METHOD and server.parent is None
    assert {span.name for span in children} == STEPS
    assert {span.context.trace_id for span in spans.get_finished_spans()} == {server.context.trace_id}
    spans.clear()
    _infer(address)
    again, _ = _call_spans(spans)
    assert again.context.trace_id != server.context.trace_id


def test_a_stream_runs_in_one_server_span_under_the_callers(spans: InMemorySpanExporter, address: str) -> None:
    spans.clear()
    trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
    tensor = grpcclient.InferInput("input", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32))
    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(address)
    try:
        client.start_stream(lambda result, error: answers.put(error or result),
                            headers={"traceparent": f"00-{trace_id}-{parent}-01"})  # fmt: skip
        for _ in range(2):
            client.async_stream_infer("iris", [tensor])
        results = [answers.get(timeout=30) for _ in range(2)]
        client.stop_stream()
    finally:
        client.close()
    assert all(result.as_numpy("probabilities").shape == (1, 3) for result in results)
    server, children = _call_spans(spans)
    assert server.name == "inference.GRPCInferenceService/ModelStreamInfer"
    assert server.parent is not None and format(server.parent.span_id, "016x") == parent
    assert sorted(span.name for span in children) == sorted([*STEPS, *STEPS])
    assert {format(span.context.trace_id, "032x") for span in spans.get_finished_spans()} == {trace_id}
