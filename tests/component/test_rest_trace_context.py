"""W3C trace context over REST: with OpenTelemetry on (``OIP_OTEL``), each HTTP request runs in one server span
(``handler/observability/tracing.py``'s ``ServerSpans``) that continues the caller's ``traceparent`` and
``tracestate``, with the inference steps under it, in the served app and in ``create_app``'s alike. The apps are
called through httpx's ASGI transport; the spans go to the OpenTelemetry SDK's in-memory exporter."""

# covers: handler/observability/tracing.py

from __future__ import annotations

import os

import anyio
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.types import ASGIApp

from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.observability.worker_telemetry import worker_telemetry
from handler.rest.app import create_app
from handler.runtime.container import build_dataplane
from handler.server import build_app
from tests.support.spans import in_memory_spans

IRIS = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
SETTINGS = Settings(model_repository=str(DEMO_REPOSITORY), opentelemetry=True)


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return in_memory_spans()


def _served() -> ASGIApp:
    return build_app(SETTINGS)


def _embedded() -> ASGIApp:
    dataplane = build_dataplane(SETTINGS)
    return create_app(dataplane, SETTINGS, worker_telemetry(SETTINGS, dataplane))


def _request(app: ASGIApp, method: str, path: str, **options: object) -> httpx.Response:
    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://oip") as client:
            return await client.request(method, path, **options)  # type: ignore[arg-type]

    return anyio.run(send)


def _server_span(spans: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    finished = spans.get_finished_spans()
    servers = [span for span in finished if span.kind is trace.SpanKind.SERVER]
    assert len(servers) == 1, [(span.name, span.kind) for span in finished]
    children = [s for s in finished if s.parent is not None and s.parent.span_id == servers[0].context.span_id]
    return servers[0], children


@pytest.mark.parametrize("build", [_served, _embedded])
def test_an_inference_request_continues_the_callers_trace(spans: InMemorySpanExporter, build: object) -> None:
    app = build()  # type: ignore[operator]
    spans.clear()
    trace_id, parent = os.urandom(16).hex(), os.urandom(8).hex()
    headers = {"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=kept"}
    assert _request(app, "POST", "/v2/models/iris/infer", json=IRIS, headers=headers).status_code == 200
    server, children = _server_span(spans)
    assert server.name == "POST"  # taken before routing: no route to name it by
    assert format(server.context.trace_id, "032x") == trace_id
    assert server.parent is not None and server.parent.is_remote and format(server.parent.span_id, "016x") == parent
    assert server.context.trace_state.get("vendor") == "kept"
    assert server.attributes is not None and server.attributes["http.response.status_code"] == 200
    assert {span.name for span in children} == {"decode", "run", "encode"}


@pytest.mark.parametrize("build", [_served, _embedded])
def test_a_routed_request_is_named_by_its_route(spans: InMemorySpanExporter, build: object) -> None:
    app = build()  # type: ignore[operator]
    spans.clear()
    assert _request(app, "GET", "/v2/models/iris/versions/1").status_code == 200
    server, _ = _server_span(spans)
    assert server.name == "GET /v2/models/{model_name}/versions/{model_version}" and server.parent is None
    assert server.attributes is not None and server.attributes["http.route"] == server.name.split(" ", 1)[1]
    assert server.status.status_code is trace.StatusCode.UNSET
    spans.clear()
    assert _request(app, "GET", "/nope").status_code == 404
    server, _ = _server_span(spans)
    assert server.name == "GET" and server.status.status_code is trace.StatusCode.UNSET  # a client's error


def test_the_served_app_is_the_same_class_with_opentelemetry_on_or_off() -> None:
    off = Settings(model_repository=str(DEMO_REPOSITORY), opentelemetry=False)
    assert type(build_app(SETTINGS)) is type(build_app(off))
