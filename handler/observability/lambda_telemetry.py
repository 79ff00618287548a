"""What observes a Lambda function's requests, HTTP and batch events alike: Powertools' EMF metrics and X-Ray
subsegments (``telemetry.py``), with the request-log sampler when the settings turn it on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handler.config.settings import Settings
from handler.observability.telemetry import PowertoolsTelemetry

if TYPE_CHECKING:  # the sampler's module is imported only when request logging is on
    from handler.observability.request_log import RequestLogSampler


def request_sampler(settings: Settings) -> RequestLogSampler | None:
    """The request-log sampler (``OIP_REQUEST_LOG_SAMPLING`` of requests to ``OIP_REQUEST_LOG_STREAM``); None when
    it is off."""
    if settings.request_log_sampling <= 0 or not settings.request_log_stream:
        return None
    from handler.observability.request_log import RequestLogSampler, firehose_sink

    return RequestLogSampler(settings.request_log_sampling, firehose_sink(settings.request_log_stream))


def lambda_telemetry(settings: Settings, tracing: bool) -> PowertoolsTelemetry:
    """The function's telemetry (``tracing``: X-Ray subsegments, ``LambdaSettings.tracing``)."""
    return PowertoolsTelemetry(request_sampler(settings), tracing=tracing)
