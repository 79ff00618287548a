"""``Ledger``: one request's bookkeeping in ``InferenceService.answer``, entered and left once.

It holds the request's observation (``Telemetry.start`` as it is made, ``Telemetry.end`` with the outcome when its
``with`` block ends), the bytes it holds of the process's budget (it is the request's ``Held``, given back as the
block ends) and its admission (``admit``, then ``leave`` once the request has run), so that the three are one
object on every request instead of three contexts, each with its own entry and exit.
"""

from __future__ import annotations

from types import TracebackType

from adapters import deadline as deadlines
from handler.inference.admission import UNGATED, Admission, Admitted, ModelGate
from handler.inference.byte_budget import ByteBudget, Held
from handler.observability.telemetry import InferObservation, Telemetry


class Ledger(Held):
    """One request to model ``name`` (``version``): observed by ``telemetry`` from now until its block ends, its
    bytes held of ``budget``."""

    __slots__ = ("admission", "admitted", "gate", "observation", "telemetry")

    def __init__(self, telemetry: Telemetry, budget: ByteBudget, name: str, version: str | None) -> None:
        self.budget = budget
        self.size = 0
        self.telemetry = telemetry
        self.observation: InferObservation = telemetry.start(name, version)
        #: The admission that counts the request in (``admit``) until it ``leave``s; None outside.
        self.admission: Admission | None = None
        self.gate: ModelGate | None = None
        self.admitted: Admitted = UNGATED

    def __enter__(self) -> Ledger:
        return self

    def admit(self, admission: Admission, name: str) -> None:
        """Admit the request to model ``name`` if its deadline (adapters/deadline.py) has not passed and
        ``admission`` admits it; else its error, at once."""
        deadline = deadlines.current()
        if deadline is not None:
            deadline.check()
        self.gate, self.admitted = admission.admit(name, deadline)
        self.admission = admission

    def leave(self, answered: bool) -> None:
        """Count the admitted request out (``Ticket.leave``); ``answered``: it ran to a result, so its time
        measures the model."""
        admission = self.admission
        if admission is None:
            return
        self.admission = None
        admission.inflight -= 1
        gate = self.gate
        if gate is not None:
            gate.leave(self.admitted, answered)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.size:
            self.release()
        self.telemetry.end(self.observation, error)
