"""OpenTelemetry spans: a server span per HTTP request (``ServerSpans``), and spans around an inference request's
steps (``decode``, ``run``, ``encode``, ``forward``).

With OpenTelemetry on (``OIP_OTEL``, or an ``OTEL_*`` exporter), ``ServerSpans`` wraps the REST app's ASGI entry: it
starts a server span from the request's W3C ``traceparent`` and ``tracestate`` (gRPC: ``handler/grpc/tracing.py``
from the call's metadata); the steps' spans are its children, and a call forwarded to Triton carries the current one
on (``adapters/triton/client.py``), so one trace covers the client, this server and Triton. The spans go to the
global tracer provider: the OpenTelemetry SDK's, set up by the deployment (``opentelemetry-instrument`` or its own
code); without one they cost a no-op call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractContextManager
from typing import Any, Final

from handler import __version__
from handler.observability.telemetry import Telemetry

#: The instrumentation scope of this server's spans.
SCOPE: Final = "oip-serverless"

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def otel_spans() -> Callable[[str], AbstractContextManager[Any]]:
    """``span(step)``: a span named ``step`` under the current one, current while its block runs."""
    from opentelemetry import trace

    tracer = trace.get_tracer(SCOPE, __version__)

    def span(name: str) -> AbstractContextManager[Any]:
        return tracer.start_as_current_span(name)

    return span


class TracedTelemetry(Telemetry):
    """``Telemetry`` whose steps are OpenTelemetry spans."""

    def __init__(self, sampler: Any = None) -> None:
        super().__init__(sampler)
        self.span = otel_spans()  # type: ignore[method-assign]


class ServerSpans:
    """Pure ASGI middleware: each HTTP request runs in a server span (``SpanKind.SERVER``) whose parent is the
    caller's W3C trace context, named ``METHOD`` or, once routing has found its route, ``METHOD /route/{param}``,
    with the HTTP semantic conventions' method, path, route and status; a 5xx answer or an exception marks it as
    an error."""

    def __init__(self, app: ASGIApp) -> None:
        from opentelemetry import propagate, trace

        self.app = app
        self.extract = propagate.extract
        self.tracer = trace.get_tracer(SCOPE, __version__)
        self.kind = trace.SpanKind.SERVER
        self.error = trace.StatusCode.ERROR

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        method: str = scope["method"]
        attributes = {
            "http.request.method": method,
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
        }
        status: list[int] = []

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        with self.tracer.start_as_current_span(
            method, context=self.extract(carrier), kind=self.kind, attributes=attributes
        ) as span:
            try:
                await self.app(scope, receive, observed_send)
            finally:
                route = getattr(scope.get("route"), "path", None)
                if route is not None:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                if status:
                    span.set_attribute("http.response.status_code", status[0])
                if not status or status[0] >= 500:
                    span.set_status(self.error)
