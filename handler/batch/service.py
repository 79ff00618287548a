"""The batch Lambda function's inference service, built once for the process at its first event (its init) with
the function's telemetry, as the HTTP function's is (``observability/lambda_telemetry.py``). A function that takes
HTTP and batch events hands its own to the batch handlers instead (``handler/http.py``)."""

from __future__ import annotations

from functools import cache

from handler.config.lambda_settings import LambdaSettings
from handler.inference.service import InferenceService
from handler.observability.lambda_telemetry import lambda_telemetry
from handler.runtime import container


@cache
def batch_service() -> InferenceService:
    """This process's inference service over the container's data plane (``runtime/container.py``)."""
    settings = container.settings()
    return InferenceService(
        container.dataplane(), settings, lambda_telemetry(settings, LambdaSettings.from_env().tracing)
    )
