"""Requests observed together (``Telemetry.observe_many``: a batch chunk's merged rows): one EMF record per
``EMF_MAX_VALUES`` requests, each the one Powertools' EphemeralMetrics writes for as many ``add_metric`` calls of the
same values (each request a value of every metric, names and dimensions unchanged); a telemetry that records
request by request still sees each request."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from typing import Any

import pytest

from adapters.errors import InvalidInput
from handler.observability.telemetry import (
    EMF_MAX_VALUES,
    InferObservation,
    PowertoolsTelemetry,
    Telemetry,
    emf_line,
)
from tests.support.powertools_emf import powertools_record


@pytest.mark.parametrize("requests", [1, 2, 37, EMF_MAX_VALUES - 1])
@pytest.mark.parametrize("status", [200, 503])
def test_a_record_of_many_requests_matches_powertools(requests: int, status: int) -> None:
    observation = InferObservation("iris", "1", status, bytes_in=12, bytes_out=34)
    ours = json.loads(emf_line("OIP", observation, None, requests))
    theirs = powertools_record(observation, ours["InferenceLatency"][0], requests)
    assert abs(ours["_aws"].pop("Timestamp") - theirs["_aws"].pop("Timestamp")) < 5_000
    assert ours == theirs
    assert len(ours["InferenceRequests"]) == requests


def _records(telemetry: PowertoolsTelemetry, requests: int) -> list[dict[str, Any]]:
    with contextlib.redirect_stdout(io.StringIO()) as out, telemetry.observe_many("iris", None, requests) as seen:
        seen.version = "1"
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_many_requests_take_a_record_per_hundred_and_the_cold_start_once() -> None:
    telemetry = PowertoolsTelemetry()
    telemetry.initialised()
    first = _records(telemetry, 250)
    assert [len(record["InferenceRequests"]) for record in first] == [100, 100, 50]
    assert sum(sum(record["InferenceRequests"]) for record in first) == 250
    assert ["ColdStart" in record for record in first] == [True, False, False]
    assert {record["model_version"] for record in first} == {"1"}
    assert [len(record["InferenceRequests"]) for record in _records(telemetry, 100)] == [100]
    assert [len(record["InferenceRequests"]) for record in _records(telemetry, 1)] == [1]


def test_requests_observed_together_fail_together() -> None:
    telemetry = PowertoolsTelemetry()
    telemetry.initialised()
    _records(telemetry, 1)  # the cold start's record
    failing = telemetry.observe_many("iris", "1", 3)
    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(InvalidInput), failing:
        raise InvalidInput("no")
    (record,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (record["InferenceErrors"], record["InferenceErrors400"]) == ([1.0] * 3, [1.0] * 3)


class Recording(Telemetry):
    def __init__(self) -> None:
        super().__init__()
        self.observations: list[InferObservation] = []

    def record(self, observation: InferObservation) -> None:
        self.observations.append(replace(observation))


def test_a_telemetry_that_records_each_request_sees_each_of_them() -> None:
    telemetry = Recording()
    with telemetry.observe_many("iris", None, 4) as observation:
        observation.version = "1"
    assert [(o.model, o.version, o.status) for o in telemetry.observations] == [("iris", "1", 200)] * 4
