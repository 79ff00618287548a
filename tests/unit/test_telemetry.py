"""The EMF metrics line is the one Powertools' EphemeralMetrics writes for the same values, field for field."""

# covers: handler/observability/lambda_telemetry.py

from __future__ import annotations

import contextlib
import io
import json

import pytest

from handler.observability.telemetry import InferObservation, PowertoolsTelemetry, emf_line
from tests.support.powertools_emf import powertools_record


@pytest.mark.parametrize(
    ("model", "status", "version", "bytes_in"),
    [("iris", 200, "1", 123), ("iris", 400, "2", 123), ("iris", 503, None, 123), ('q"uo\\te\u00e9', 200, "7", 10**17)],
)
def test_emf_line_matches_powertools(model: str, status: int, version: str | None, bytes_in: int) -> None:
    observation = InferObservation(model, version, status, bytes_in=bytes_in, bytes_out=456)
    ours = json.loads(emf_line("OIP", observation))
    theirs = powertools_record(observation, ours["InferenceLatency"][0])
    assert abs(ours["_aws"].pop("Timestamp") - theirs["_aws"].pop("Timestamp")) < 5_000
    assert ours == theirs


def test_emf_line_changes_with_the_outcome_and_the_values() -> None:
    """The parts serialised once per model, version and outcome never carry one request's values to another."""
    first = json.loads(emf_line("OIP", InferObservation("iris", "1", 200, bytes_in=1, bytes_out=2)))
    second = json.loads(emf_line("OIP", InferObservation("iris", "1", 200, bytes_in=3, bytes_out=4)))
    failed = json.loads(emf_line("OIP", InferObservation("iris", "1", 400, bytes_in=5, bytes_out=6)))
    other = json.loads(emf_line("OTHER", InferObservation("iris", "2", 200)))
    assert (first["RequestBytes"], first["ResponseBytes"]) == ([1.0], [2.0])
    assert (second["RequestBytes"], second["ResponseBytes"]) == ([3.0], [4.0])
    assert (failed["InferenceErrors"], failed["InferenceErrors400"], failed["RequestBytes"]) == ([1.0], [1.0], [5.0])
    assert other["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "OTHER" and other["model_version"] == "2"


def test_record_writes_one_line_to_stdout_at_call_time() -> None:
    telemetry = PowertoolsTelemetry()
    with contextlib.redirect_stdout(io.StringIO()) as out:  # `oip invoke` points stdout at stderr this way
        telemetry.record(InferObservation("iris", "1", 200))
        telemetry.record(InferObservation("iris", "1", 404))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["InferenceErrors"] for line in lines] == [[0.0], [1.0]]
    assert "InferenceErrors404" in lines[1] and "InferenceErrors404" not in lines[0]
