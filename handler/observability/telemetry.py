"""Per-request observations: metrics, trace spans and sampled payload logging.

The inference service (``handler/inference/service.py``) observes every inference request, whichever transport it
came by. ``Telemetry`` does nothing (``oip serve``); ``PowertoolsTelemetry`` emits CloudWatch EMF metrics per
model and version and X-Ray subsegments through aws-lambda-powertools (Lambda). Payloads never reach a
log unless the request-log sampler picks them.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from adapters.errors import V2Error
from handler.protocol.status import status_of

if TYPE_CHECKING:  # the sampler's module is imported only when request logging is on (handler/http.py)
    from handler.observability.request_log import RequestLogSampler

#: The most values a metric of one EMF record holds (CloudWatch's limit, at which Powertools writes a record).
EMF_MAX_VALUES: Final = 100
#: What ``span`` gives when nothing is traced: one reusable do-nothing context.
_NO_SPAN: AbstractContextManager[Any] = nullcontext()


@dataclass(slots=True)
class InferObservation:
    """What one infer call did: the transport fills in its sizes and bodies as it goes, the service the version;
    the status is the outcome's (``Telemetry.finish``)."""

    model: str
    version: str | None
    status: int = 500
    bytes_in: int = 0
    bytes_out: int = 0
    started: float = field(default_factory=time.perf_counter)
    request_body: bytes | memoryview = b""
    response_body: bytes = b""
    #: What the telemetry keeps of the request while it is in the server (``MeteredTelemetry``: its pending cell).
    pending: Any = None

    @property
    def latency_ms(self) -> float:
        """Milliseconds since the observation started."""
        return (time.perf_counter() - self.started) * 1000


class Telemetry:
    """No metrics, no tracing; optional payload sampling."""

    def __init__(self, sampler: RequestLogSampler | None = None) -> None:
        self.sampler = sampler

    def span(self, name: str) -> AbstractContextManager[Any]:
        """A trace segment around one step (decode, run, encode)."""
        return _NO_SPAN

    def traces(self) -> bool:
        """Whether ``span`` may trace anything (False: its segments need not be entered at all)."""
        return getattr(self.span, "__func__", None) is not Telemetry.span

    def record(self, observation: InferObservation) -> None:
        """Called once per infer request, success or failure."""
        if self.sampler is not None and observation.status == 200:
            self.sampler.offer(observation.model, observation.version or "", observation.request_body,
                               observation.response_body)  # fmt: skip

    def record_many(self, observation: InferObservation, requests: int) -> None:
        """Called once for ``requests`` infer requests that ran together and ended alike (``observe_many``): as
        ``record`` for each of them."""
        if type(self).record is Telemetry.record and self.sampler is None:
            return  # ``record`` would do nothing for any of them
        for _ in range(requests):
            self.record(observation)

    def observe(self, model: str, version: str | None) -> AbstractContextManager[InferObservation]:
        """Observe one infer request: recorded when the block ends, with the status its outcome gives."""
        return _Observing(self, self.start(model, version))

    def start(self, model: str, version: str | None) -> InferObservation:
        """``observe`` without its context: the observation of one infer request, from now, which ``end`` records
        (the inference service's ledger calls both, once each, on every request)."""
        return InferObservation(model, version)

    def end(self, observation: InferObservation, error: BaseException | None) -> None:
        """Record an observation ``start`` gave, with the status its outcome (``error``: None for an answer) gives."""
        if error is None:  # what ``finish`` does, without its call: this runs on every request
            observation.status = 200
            self.record(observation)
        else:
            self.finish(observation, error)

    def rejected(self, model: str, version: str | None, error: V2Error, requests: int) -> None:
        """Record ``requests`` infer requests to ``model`` refused with ``error`` before they entered the server
        (never pending), at once."""
        observation = InferObservation(model, version)
        observation.status = status_of(error)
        self.record_many(observation, requests)

    def observe_many(self, model: str, version: str | None, requests: int) -> AbstractContextManager[InferObservation]:
        """Observe ``requests`` infer requests that run together and end alike (a batch chunk's merged rows), from
        now: one observation for all, recorded for each of them at once (``record_many``) when the block ends."""
        return _ObservingMany(self, InferObservation(model, version), requests)

    def finish(self, observation: InferObservation, error: BaseException | None) -> None:
        """Record an observation with its outcome's status: 200, a V2Error's own, 500 for anything else."""
        if error is None:
            observation.status = 200
        elif isinstance(error, V2Error):
            observation.status = status_of(error)
        else:
            observation.status = 500
        self.record(observation)


class _Observing:
    """``Telemetry.observe``'s context: ``start`` as it is made, ``end`` however the block ends."""

    __slots__ = ("observation", "telemetry")

    def __init__(self, telemetry: Telemetry, observation: InferObservation) -> None:
        self.telemetry, self.observation = telemetry, observation

    def __enter__(self) -> InferObservation:
        return self.observation

    def __exit__(self, exc_type: object, error: BaseException | None, traceback: object) -> None:
        self.telemetry.end(self.observation, error)


class _ObservingMany:
    """``Telemetry.observe_many``'s context: ``_Observing``'s, for all the requests at once."""

    __slots__ = ("observation", "requests", "telemetry")

    def __init__(self, telemetry: Telemetry, observation: InferObservation, requests: int) -> None:
        self.telemetry, self.observation, self.requests = telemetry, observation, requests

    def __enter__(self) -> InferObservation:
        return self.observation

    def __exit__(self, exc_type: object, error: BaseException | None, traceback: object) -> None:
        observation = self.observation
        observation.status = 200 if error is None else status_of(error) if isinstance(error, V2Error) else 500
        self.telemetry.record_many(observation, self.requests)


class PowertoolsTelemetry(Telemetry):
    """CloudWatch EMF metrics (namespace ``OIP``) per model and version, and X-Ray subsegments via Powertools.

    The metrics line is the one Powertools' ``EphemeralMetrics`` writes for the same values (same structure,
    dimensions, names and units: ``tests/unit/test_telemetry.py`` compares them), serialised here with orjson
    because building and validating it through Powertools is a large share of a small request on Lambda
    (bench/bench_lambda_invoke.py). Lambda's log agent extracts the metrics from stdout.
    """

    def __init__(self, sampler: RequestLogSampler | None = None, namespace: str = "OIP", tracing: bool = False) -> None:
        super().__init__(sampler)
        self._namespace = namespace
        #: The execution environment's init, in ms, until its first request's line carries it (then None).
        self._cold: float | None = process_age_ms()
        self._tracer: Any = None
        if tracing:
            from aws_lambda_powertools import Tracer

            self._tracer = Tracer()

    def span(self, name: str) -> AbstractContextManager[Any]:
        if self._tracer is None:
            return _NO_SPAN
        return self._tracer.provider.in_subsegment(f"## {name}")

    def traces(self) -> bool:
        return self._tracer is not None

    def initialised(self) -> None:
        """The init is over (the end of the handler module's import): its duration is the process's age now."""
        if self._cold is not None:
            self._cold = process_age_ms()

    def record(self, observation: InferObservation) -> None:
        cold, self._cold = self._cold, None
        sys.stdout.write(emf_line(self._namespace, observation, cold))
        super().record(observation)

    def record_many(self, observation: InferObservation, requests: int) -> None:
        """One EMF record for every ``EMF_MAX_VALUES`` of the requests, each request a value of every metric."""
        cold, self._cold = self._cold, None
        lines = []
        for start in range(0, requests, EMF_MAX_VALUES):
            lines.append(emf_line(self._namespace, observation, cold, min(requests - start, EMF_MAX_VALUES)))
            cold = None
        sys.stdout.write("".join(lines))
        if self.sampler is not None:
            for _ in range(requests):
                super().record(observation)


def process_age_ms() -> float | None:
    """Milliseconds since this process started, from /proc (its start in clock ticks since boot, and the uptime);
    None where /proc cannot say."""
    try:
        started = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - started / os.sysconf("SC_CLK_TCK"), 0.0) * 1000


def emf_line(namespace: str, observation: InferObservation, init_ms: float | None = None, requests: int = 1) -> str:
    """One CloudWatch Embedded Metric Format record (a JSON line) for an infer request, or for ``requests`` (at most
    ``EMF_MAX_VALUES``) that ended alike, each a value of every metric (as Powertools' record of as many
    ``add_metric`` calls); with ``init_ms`` (the first request of an execution environment) it also counts a cold
    start (``ColdStart``, 1) and its init (``InitDuration``, ms)."""
    failed = observation.status >= 400
    middle = _emf_middle(
        namespace, observation.status if failed else None, observation.model, observation.version, requests
    )
    # Everything but the timestamp and the three measured values is the same for every request of this model,
    # version and outcome: it is serialised once (the values are finite floats, whose repr is JSON).
    latency = repr(observation.latency_ms)
    bytes_in, bytes_out = repr(float(observation.bytes_in)), repr(float(observation.bytes_out))
    if requests != 1:
        latency, bytes_in, bytes_out = (",".join((value,) * requests) for value in (latency, bytes_in, bytes_out))
    line = (
        f'{{"_aws":{{"Timestamp":{time.time_ns() // 1_000_000}{middle}{latency}],'
        f'"RequestBytes":[{bytes_in}],"ResponseBytes":[{bytes_out}]}}\n'
    )
    if init_ms is None:
        return line
    document = orjson.loads(line)  # once per execution environment: the plain way
    declared = document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    declared += [{"Name": "ColdStart", "Unit": "Count"}, {"Name": "InitDuration", "Unit": "Milliseconds"}]
    document.update(ColdStart=[1.0], InitDuration=[float(init_ms)])
    return orjson.dumps(document).decode() + "\n"


@functools.lru_cache(maxsize=256)
def _emf_middle(namespace: str, error_status: int | None, model: str, version: str | None, requests: int) -> str:
    """The record of ``requests`` requests from after its timestamp to its latency values, serialised by orjson."""
    directive, names = _emf_directive(namespace, error_status)
    counts = (1, 1, 1) if error_status is not None else (1, 0)
    document: dict[str, Any] = {"model": model, "model_version": version or "default"}
    document.update(zip(names, ([float(count)] * requests for count in counts), strict=False))
    members = orjson.dumps(document).decode()[1:-1]
    return f',"CloudWatchMetrics":{orjson.dumps(directive).decode()}}},{members},"{names[len(counts)]}":['


@functools.lru_cache(maxsize=64)
def _emf_directive(namespace: str, error_status: int | None) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The metric declarations of a record (the same for every request with this outcome) and the metric names,
    in the order of the values ``emf_line`` gives."""
    metrics = [("InferenceRequests", "Count"), ("InferenceErrors", "Count")]
    if error_status is not None:
        metrics.append((f"InferenceErrors{error_status}", "Count"))
    metrics += [("InferenceLatency", "Milliseconds"), ("RequestBytes", "Bytes"), ("ResponseBytes", "Bytes")]
    declared = [{"Name": name, "Unit": unit} for name, unit in metrics]
    directive = [{"Namespace": namespace, "Dimensions": [["model", "model_version"]], "Metrics": declared}]
    return directive, tuple(name for name, _ in metrics)
