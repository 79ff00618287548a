"""OpenTelemetry spans around an inference request's steps (``decode``, ``run``, ``encode``, ``forward``).

With OpenTelemetry on (``OIP_OTEL``, or an ``OTEL_*`` exporter), FastAPI's instrumentation starts a server span
from the request's W3C ``traceparent`` and ``tracestate`` (gRPC: ``handler/grpc/tracing.py`` from the call's
metadata); these spans are its children, and a call forwarded to Triton carries the current one on
(``adapters/triton/client.py``), so one trace covers the client, this server and Triton. The spans go to the
global tracer provider: the OpenTelemetry SDK's, set up by the deployment (``opentelemetry-instrument``, FastAPI's
``FASTAPI_OTEL_AUTO_CONFIGURE``, or its own code); without one they cost a no-op call.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from handler import __version__
from handler.observability.telemetry import Telemetry

#: The instrumentation scope of this server's spans.
SCOPE = "oip-serverless"


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
