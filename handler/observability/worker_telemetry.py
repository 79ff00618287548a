"""What observes an ``oip serve`` worker's requests: its telemetry, by its settings.

A metrics port and shared statistics (``oip serve``: ``OIP_METRICS_PORT`` and ``OIP_STATS_DIR``): the telemetry
counts pending requests in the statistics' table, which the metrics endpoint reads (``prometheus.py``); ``OIP_OTEL``
on: the steps are OpenTelemetry spans (``tracing.py``). Neither: the plain ``Telemetry``.
"""

from __future__ import annotations

from handler.config.settings import Settings
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane


def worker_telemetry(settings: Settings, dataplane: DataPlane) -> Telemetry:
    """The telemetry of a worker's transports (REST and gRPC alike)."""
    spans = None
    if settings.opentelemetry:
        from handler.observability.tracing import otel_spans

        spans = otel_spans()
    if settings.metrics_port and settings.stats_dir:
        from handler.observability.prometheus import MeteredTelemetry, version_resolver

        router = dataplane.router
        return MeteredTelemetry(
            dataplane.statistics, version_resolver(lambda n, v: router.backend(n, v).version), spans
        )
    if spans is not None:
        from handler.observability.tracing import TracedTelemetry

        return TracedTelemetry()
    return Telemetry()
