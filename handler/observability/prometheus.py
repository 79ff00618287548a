"""What a worker of ``oip serve`` records for the Prometheus endpoint beyond the statistics: its pending requests.

Everything a scrape reports per model is read from the statistics extension's shared counters
(handler/protocol/statistics.py: Triton's counters, and the latency histograms' buckets, which each success adds
to as it is counted); the metrics exporter (``exporter.py``, another process) reads every worker's at scrape
time. What the statistics do not see is a request still in the server: ``MeteredTelemetry`` adds one to its model
version's pending cell as the request starts and takes it off when it ends, for the models this server knows (a
name a client made up gets no series). Two integer additions under the statistics' lock per request; the workers
never import prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final

from adapters.errors import V2Error
from handler.observability.telemetry import InferObservation, Telemetry
from handler.protocol.statistics import Statistics

#: Most distinct (model, version) pairs a worker counts pending requests for; past that, new ones are not counted.
MAX_SERIES: Final = 1024

#: ``versions(name, version)``: the version a request to a known model is counted under; None for an unknown model.
VersionOf = Callable[[str, str | None], str | None]


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
        self._cells: dict[tuple[str, str | None], int] = {}
        if spans is not None:
            self.span = spans  # type: ignore[method-assign]

    def observe(self, model: str, version: str | None) -> _PendingObserving:
        cell = self._cells.get((model, version))
        if cell is None and len(self._cells) < MAX_SERIES:
            label = self._versions(model, version)
            if label is not None:
                cell = self._cells[(model, version)] = self.statistics.pending_cell(model, label)
        if cell is not None:
            self.statistics.pending(cell, 1)
        return _PendingObserving(self, InferObservation(model, version), cell)


class _PendingObserving:
    """``MeteredTelemetry.observe``'s context: finishes the observation (as ``Telemetry.observe``'s does) and takes
    the request off the pending count however the block ends."""

    __slots__ = ("cell", "observation", "telemetry")

    def __init__(self, telemetry: MeteredTelemetry, observation: InferObservation, cell: int | None) -> None:
        self.telemetry, self.observation, self.cell = telemetry, observation, cell

    def __enter__(self) -> InferObservation:
        return self.observation

    def __exit__(self, exc_type: object, error: BaseException | None, traceback: object) -> None:
        if self.cell is not None:
            self.telemetry.statistics.pending(self.cell, -1)
        if error is None:  # what ``finish`` does, without its call, as ``Telemetry.observe``'s context
            self.observation.status = 200
            self.telemetry.record(self.observation)
        else:
            self.telemetry.finish(self.observation, error)


def version_resolver(backend_version: Callable[[str, str | None], str]) -> VersionOf:
    """``VersionOf`` over ``backend_version(name, version)`` (the DataPlane router's backend's version): None when
    it raises a V2Error (an unknown model)."""

    def versions(name: str, version: str | None) -> str | None:
        try:
            return backend_version(name, version) or version or ""
        except V2Error:
            return None

    return versions
