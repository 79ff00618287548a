"""One request's ledger (handler/inference/ledger.py): its observation recorded once with its outcome's status,
its bytes given back and its admission counted out once, however the request ends. Rules, no server."""

from __future__ import annotations

import pytest

from adapters.errors import InvalidInput
from handler.inference.admission import Admission, ModelGate, Overloaded
from handler.inference.byte_budget import ByteBudget, BytesInFlight
from handler.inference.ledger import Ledger
from handler.observability.telemetry import InferObservation, Telemetry


class Recorded(Telemetry):
    """A telemetry that keeps what it records."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[InferObservation] = []

    def record(self, observation: InferObservation) -> None:
        self.records.append(observation)


class Clock:
    """The gate's clock, moved by the test alone."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _parts() -> tuple[Recorded, ByteBudget, Admission, ModelGate, Clock]:
    clock = Clock()
    gate = ModelGate("m", 1, 0.1, clock)
    return Recorded(), ByteBudget(1000), Admission(4, {"m": gate}.get), gate, clock


def test_an_answered_request_is_recorded_once_with_200_its_bytes_given_back_and_its_run_measured() -> None:
    telemetry, budget, admission, gate, clock = _parts()
    with Ledger(telemetry, budget, "m", "1") as ledger:
        ledger.admit(admission, "m")
        assert admission.inflight == 1 and gate.inflight == 1
        ledger.take(300, "a body")
        ledger.settle(200)
        assert budget.inflight == 200 and telemetry.records == []
        clock.now += 0.25
        ledger.leave(answered=True)
        ledger.leave(answered=True)  # counted out once
        assert admission.inflight == 0 and gate.inflight == 0
        ledger.observation.bytes_in = 200
    assert budget.inflight == 0
    assert [(seen.model, seen.version, seen.status, seen.bytes_in) for seen in telemetry.records] == [
        ("m", "1", 200, 200)
    ]
    assert gate.interval_s == pytest.approx(0.25)


def test_a_failed_request_is_recorded_with_its_errors_status_and_measures_nothing() -> None:
    telemetry, budget, admission, gate, clock = _parts()
    with pytest.raises(InvalidInput), Ledger(telemetry, budget, "m", None) as ledger:
        ledger.admit(admission, "m")
        ledger.count(50)
        try:
            clock.now += 0.25
            raise InvalidInput("bad")
        finally:
            ledger.leave(answered=False)
    assert budget.inflight == 0 and admission.inflight == 0 and gate.interval_s == 0.0
    assert [seen.status for seen in telemetry.records] == [400]


def test_a_refused_admission_counts_nothing_out_and_is_recorded_with_503() -> None:
    telemetry, budget, _, _, _ = _parts()
    full = Admission(0)
    with pytest.raises(Overloaded), Ledger(telemetry, budget, "m", None) as ledger:
        try:
            ledger.admit(full, "m")
        finally:
            ledger.leave(answered=False)
    assert full.inflight == 0 and full.refused == 1
    assert [seen.status for seen in telemetry.records] == [503]


def test_bytes_over_the_budget_are_refused_while_another_request_holds_some() -> None:
    telemetry, budget, _, _, _ = _parts()
    with Ledger(telemetry, budget, "m", None) as first:
        first.take(800, "a body")
        with pytest.raises(BytesInFlight), Ledger(telemetry, budget, "m", None) as second:
            second.take(300, "a body")
        assert budget.inflight == 800 and budget.refused == 1
    assert budget.inflight == 0
    assert [seen.status for seen in telemetry.records] == [503, 200]
