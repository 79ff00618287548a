"""What a worker of ``oip serve`` records for the Prometheus endpoint beyond the statistics: its pending requests.

Everything a scrape reports per model is read from the statistics extension's shared counters
(handler/protocol/statistics_counters.py: Triton's counters, and the latency histograms' buckets, which each success
adds to as it is counted); the metrics exporter (``exporter.py``, another process) reads every worker's at scrape
time. What the statistics do not see is a request still in the server, and why one failed: ``MeteredTelemetry``
adds one to its model version's pending cell as the request starts and takes it off when it ends, and counts a
failed one by Triton's reason (``failure_reason``), for the models this server knows (a name a client made up
gets no series). Two integer additions under the statistics' lock per request; the workers never import
prometheus_client.

The reasons, as Triton's scheduler gives them: a request refused before it runs (a model's or the worker's
admission, a full queue, its queue ``timeout`` passed) is ``REJECTED``; one whose deadline passed (gRPC deadline,
Lambda's remaining time) ``CANCELED``, as Triton counts a request its client gave up on; one the model (or a
forwarded model's Triton) failed ``BACKEND``; an unexpected exception ``OTHER``. A client's mistake (400, 404,
413, ...) is no failure of the model and is not counted, as Triton refuses it before the request reaches a
model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final

from adapters.deadline import DeadlineExceeded, RequestTimeout
from adapters.errors import V2Error
from handler.observability.telemetry import InferObservation, Telemetry
from handler.protocol.statistics_counters import FAILURE_REASONS, Statistics
from handler.protocol.status import status_of

#: Most distinct (model, version) pairs a worker counts pending requests for; past that, new ones are not counted.
MAX_SERIES: Final = 1024

#: ``versions(name, version)``: the version a request to a known model is counted under; None for an unknown model.
VersionOf = Callable[[str, str | None], str | None]


def failure_reason(error: BaseException) -> str | None:
    """Triton's reason for a request that ended with ``error``; None for a client's mistake (a 4xx). An error class
    may name its own (``failure_reason``: the admission's and the dynamic batcher's refusals say ``REJECTED``). A
    request cancelled while in progress (a gRPC client that gave up: its call's task is cancelled) is ``CANCELED``,
    as in Triton."""
    if isinstance(error, asyncio.CancelledError):
        return "CANCELED"
    if not isinstance(error, V2Error):
        return "OTHER"
    if isinstance(error, DeadlineExceeded):
        return "CANCELED"
    if status_of(error) < 500:
        return None
    if isinstance(error, RequestTimeout):
        return "REJECTED"
    return error.failure_reason if error.failure_reason in FAILURE_REASONS else "BACKEND"


class MeteredTelemetry(Telemetry):
    """``Telemetry`` with every request to a known model counted as pending in ``statistics`` while it is in the
    server, and ``spans`` (``tracing.otel_spans``) as its trace segments when given."""

    def __init__(
        self,
        statistics: Statistics,
        versions: VersionOf,
        spans: Callable[[str], AbstractContextManager[Any]] | None = None,
        sampler: Any = None,
    ) -> None:
        super().__init__(sampler)
        self.statistics = statistics
        self._versions = versions
        #: By (model, version asked): the pending cell and the version label of a known model.
        self._cells: dict[tuple[str, str | None], tuple[int, str]] = {}
        if spans is not None:
            self.span = spans  # type: ignore[method-assign]

    def start(self, model: str, version: str | None) -> InferObservation:
        """The observation of one request (``Telemetry.start``), counted pending until ``end`` when its model is
        known."""
        known = self._cells.get((model, version))
        if known is None and len(self._cells) < MAX_SERIES:
            label = self._versions(model, version)
            if label is not None:
                known = self._cells[(model, version)] = (self.statistics.pending_cell(model, label), label)
        observation = InferObservation(model, version)
        if known is not None:
            self.statistics.pending(known[0], 1)
            observation.pending = known
        return observation

    def rejected(self, model: str, version: str | None, error: V2Error, requests: int) -> None:
        """``Telemetry.rejected``, the failures counted by their reason when the model is known."""
        reason = failure_reason(error)
        label = self._versions(model, version) if reason is not None else None
        if label is not None:
            self.statistics.failed(model, label, reason, requests)  # type: ignore[arg-type]
        super().rejected(model, version, error, requests)

    def end(self, observation: InferObservation, error: BaseException | None) -> None:
        """``Telemetry.end``, the request taken off the pending count and a failure counted by its reason."""
        known = observation.pending
        if known is not None:
            observation.pending = None
            statistics = self.statistics
            statistics.pending(known[0], -1)
            if error is not None:
                reason = failure_reason(error)
                if reason is not None:
                    statistics.failed(observation.model, known[1], reason)
        if error is None:  # what ``finish`` does, without its call, as ``Telemetry.end``
            observation.status = 200
            self.record(observation)
        else:
            self.finish(observation, error)


def version_resolver(backend_version: Callable[[str, str | None], str]) -> VersionOf:
    """``VersionOf`` over ``backend_version(name, version)`` (the DataPlane router's backend's version): None when
    it raises a V2Error (an unknown model)."""

    def versions(name: str, version: str | None) -> str | None:
        try:
            return backend_version(name, version) or version or ""
        except V2Error:
            return None

    return versions
