"""W3C trace context on gRPC calls: an interceptor that runs each call in a server span, the caller's child when
the call's metadata carries ``traceparent`` (and ``tracestate``), the root of a new trace otherwise, as FastAPI's
instrumentation does for REST. The inference service's spans (handler/observability/tracing.py) are then its
children, and a call forwarded to Triton carries it on. Installed only with OpenTelemetry on (``OIP_OTEL``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import propagate, trace

from handler import __version__
from handler.observability.tracing import SCOPE


class TraceContext(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Each unary or bidirectional method runs in a server span named after it (``package.Service/Method``),
    with the OpenTelemetry semantic conventions' ``rpc.*`` attributes."""

    def __init__(self) -> None:
        self._tracer = trace.get_tracer(SCOPE, __version__)

    async def intercept_service(
        self, continuation: Callable[[Any], Awaitable[Any]], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = await continuation(details)
        if handler is None:
            return handler
        carrier = {key: value for key, value in details.invocation_metadata or () if isinstance(value, str)}
        parent = propagate.extract(carrier) if "traceparent" in carrier else None
        name = details.method.lstrip("/")
        service, _, method = name.partition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        tracer = self._tracer
        codecs = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            unary = handler.unary_unary

            async def traced_unary(request: Any, call: Any) -> Any:
                with tracer.start_as_current_span(name, parent, trace.SpanKind.SERVER, attributes):
                    return await unary(request, call)

            return grpc.unary_unary_rpc_method_handler(traced_unary, **codecs)
        if handler.stream_stream is not None:
            stream = handler.stream_stream

            async def traced_stream(requests: Any, call: Any) -> AsyncIterator[Any]:
                with tracer.start_as_current_span(name, parent, trace.SpanKind.SERVER, attributes):
                    async for response in stream(requests, call):
                        yield response

            return grpc.stream_stream_rpc_method_handler(traced_stream, **codecs)
        return handler
