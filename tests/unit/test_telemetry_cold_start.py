"""The first EMF line of an execution environment also counts its cold start and init, as Powertools would write
those metrics beside the others; later lines do not (one line per request either way)."""

from __future__ import annotations

import contextlib
import io
import json
import time

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from handler.observability.telemetry import InferObservation, PowertoolsTelemetry, emf_line, process_age_ms


def test_the_cold_line_is_powertools_line_with_cold_start_and_init() -> None:
    observation = InferObservation("iris", "1", 200, bytes_in=10, bytes_out=20)
    ours = json.loads(emf_line("OIP", observation, 1234.5))
    metrics = EphemeralMetrics(namespace="OIP")
    metrics.add_dimension("model", "iris")
    metrics.add_dimension("model_version", "1")
    metrics.add_metric("InferenceRequests", MetricUnit.Count, 1)
    metrics.add_metric("InferenceErrors", MetricUnit.Count, 0)
    metrics.add_metric("InferenceLatency", MetricUnit.Milliseconds, ours["InferenceLatency"][0])
    metrics.add_metric("RequestBytes", MetricUnit.Bytes, 10)
    metrics.add_metric("ResponseBytes", MetricUnit.Bytes, 20)
    metrics.add_metric("ColdStart", MetricUnit.Count, 1)
    metrics.add_metric("InitDuration", MetricUnit.Milliseconds, 1234.5)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        metrics.flush_metrics()
    theirs = json.loads(out.getvalue())
    assert abs(ours["_aws"].pop("Timestamp") - theirs["_aws"].pop("Timestamp")) < 5_000
    assert ours == theirs


def test_only_the_first_request_of_an_environment_carries_its_cold_start() -> None:
    telemetry = PowertoolsTelemetry()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        for status in (200, 400, 200):
            telemetry.record(InferObservation("iris", "1", status))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 3
    assert lines[0]["ColdStart"] == [1.0] and lines[0]["InitDuration"][0] >= 0
    assert all("ColdStart" not in line and "InitDuration" not in line for line in lines[1:])


def test_init_duration_is_the_process_age_when_the_init_ends() -> None:
    telemetry = PowertoolsTelemetry()
    time.sleep(0.05)
    telemetry.initialised()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        telemetry.record(InferObservation("iris", "1", 200))
    init_ms = json.loads(out.getvalue())["InitDuration"][0]
    age = process_age_ms()
    assert age is not None and 0 < init_ms <= age
