"""The EMF record Powertools' EphemeralMetrics writes for an inference observation: the oracle the telemetry tests
hold ``emf_line`` to."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from handler.observability.telemetry import InferObservation


def powertools_record(observation: InferObservation, latency_ms: float, requests: int = 1) -> dict[str, Any]:
    """The record of ``requests`` requests observed alike (each a value of every metric), under namespace OIP."""
    metrics = EphemeralMetrics(namespace="OIP")
    metrics.add_dimension("model", observation.model)
    metrics.add_dimension("model_version", observation.version or "default")
    for _ in range(requests):
        metrics.add_metric("InferenceRequests", MetricUnit.Count, 1)
        metrics.add_metric("InferenceErrors", MetricUnit.Count, 0 if observation.status < 400 else 1)
        if observation.status >= 400:
            metrics.add_metric(f"InferenceErrors{observation.status}", MetricUnit.Count, 1)
        metrics.add_metric("InferenceLatency", MetricUnit.Milliseconds, latency_ms)
        metrics.add_metric("RequestBytes", MetricUnit.Bytes, observation.bytes_in)
        metrics.add_metric("ResponseBytes", MetricUnit.Bytes, observation.bytes_out)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        metrics.flush_metrics()
    return json.loads(out.getvalue())
