"""Admission: each model admits the requests it can answer within a target wait, and each worker at most a bound.

Two bounds, both checked before any of a request's work starts, whichever transport it came by; a request over
either is answered 503 (gRPC UNAVAILABLE) at once with ``Retry-After``, the time the model's admitted work takes to
drain (measured, at least a second). Health, metadata, statistics and metrics never pass here.

**Per model, adaptive** (``ModelGate``): with no configuration, a model admits a request while the time to its
answer stays within what a client accepts: twice the model's unloaded run plus the queueing target (``2 * alone +
target``, ``OIP_ADMISSION_TARGET_MS``, 100 ms), as the accepted-latency goal is a p99 within twice the unloaded p99
plus the target; ``alone`` is the measured time of a request that ran alone (the minimum Vegas measures against).
The time to its answer follows Little's law: the requests ahead of it over the rate the model answers them, the
model's measured busy time per answer (``interval``), whether its runs take one request each, a dynamic batch, or
overlap in worker threads (a model with more than one instance, adapters/onnx/run_slots.py): what is left of the
answer in progress (``interval`` since the last answer, none once that has passed), one ``interval`` for each other
request in flight and one for its own, plus four times how far answers have come from that expectation (their mean
deviation: TCP's retransmission timeout is the smoothed round trip plus four of its mean deviations, RFC 6298; twice
for a model that answers a dynamic batch at a time), so that the accepted p99, not only the mean, keeps the bound.
The requests admitted before a model's first answer run at once; the first estimate waits for all of them. A request
with its own deadline (gRPC deadline, Lambda's remaining time) is admitted while its answer comes within it instead,
and refused with the deadline's 504 / DEADLINE_EXCEEDED otherwise. Each model has its own gate, so a slow model that
is saturated refuses its own requests and never a fast model's. A model with its own queue policy
(``max_queue_size`` or a queue timeout in config.pbtxt), one served by Triton, and one not measured yet are bounded
by the worker's bound alone. ``OIP_MAX_INFLIGHT`` set: the operator's bound, and no adaptive gate unless
``OIP_ADMISSION_TARGET_MS`` is set too; ``OIP_ADMISSION_TARGET_MS=0`` turns the gates off.

**Per worker** (``Admission.limit``): ``OIP_MAX_INFLIGHT``, else ``default_inflight``, a safety bound (64 requests
per core plus two of the largest dynamic batch) that keeps a burst from piling up memory before any model is
measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from adapters.deadline import Deadline, DeadlineExceeded
from adapters.errors import ErrorCode, V2Error

if TYPE_CHECKING:
    from handler.config.settings import Settings
    from handler.protocol.dataplane import DataPlane

#: The queueing delay a model's gate accepts beyond one run, when ``OIP_ADMISSION_TARGET_MS`` is not set.
DEFAULT_TARGET_MS: Final = 100
#: Most models with a gate of their own in a process (names come from the repository, never from a client).
MAX_GATES: Final = 1024
#: Weight of a new sample of a request's time alone; a faster one counts more, so one stalled run is forgotten
#: quickly.
_RISE, _FALL = 0.2, 0.5
#: How many of its answers' mean deviations from their expected time a request's expected answer adds, for a model
#: that runs one request at a time (TCP's retransmission timeout adds four to the smoothed round trip, RFC 6298),
#: and for one that runs dynamic batches, whose answers come a batch at a time, up to a batch's run from when each
#: was expected: a deviation that is the batches' own rhythm more than the runs' variation, and which four would
#: count as a queue deeper than one batch.
MARGIN: Final = 4
BATCH_MARGIN: Final = 2
#: The answers a model's time per answer is measured over: each older answer weighs ``1 - 1 / WINDOW`` of the next.
WINDOW: Final = 32
_NEW: Final = 1 / WINDOW
_KEEP: Final = 1 - _NEW

#: What ``ModelGate.enter`` gives and ``leave`` takes back: the admission time and the expected answer time.
Admitted = tuple[float, float]
#: ``Admitted`` of a request no gate counted.
UNGATED: Final[Admitted] = (0.0, 0.0)


class Overloaded(V2Error):
    """The worker or the model admits no more requests now: 503 / UNAVAILABLE, with Retry-After."""

    code = ErrorCode.UNAVAILABLE
    retryable = True
    #: Triton's reason in ``nv_inference_request_failure`` (handler/observability/prometheus.py).
    failure_reason = "REJECTED"


def largest_dynamic_batch(configs: list[Any]) -> int:
    """The largest ``max_batch_size`` among parsed config.pbtxt files that ask for ``dynamic_batching``; 0 for none."""
    sizes = [
        int(config.max_batch_size)
        for config in configs
        if config is not None and int(config.max_batch_size) > 0 and config.HasField("dynamic_batching")
    ]
    return max(sizes, default=0)


def default_inflight(cores: int, largest_batch: int) -> int:
    """The bound when ``OIP_MAX_INFLIGHT`` is unset: 64 per core, plus two batches of the largest dynamic batch."""
    return 64 * max(cores, 1) + 2 * max(largest_batch, 0)


def gate_parallelism(config: Any, batching: bool) -> int | None:
    """How many requests one run of a model with this parsed config.pbtxt takes (its dynamic batch, else 1); None
    when the model bounds its own queue (a ``max_queue_size`` or a queue timeout at any priority level)."""
    if config is None or int(config.max_batch_size) <= 0 or not config.HasField("dynamic_batching"):
        return 1
    if not batching:
        return 1
    dynamic = config.dynamic_batching
    policies = [dynamic.default_queue_policy, *dynamic.priority_queue_policy.values()]
    if any(int(p.max_queue_size) > 0 or int(p.default_timeout_microseconds) > 0 for p in policies):
        return None
    preferred = [int(size) for size in dynamic.preferred_batch_size if 0 < int(size) <= int(config.max_batch_size)]
    return max(preferred) if preferred else int(config.max_batch_size)


class ModelGate:
    """One model's adaptive admission: its requests in flight and its measured time per answer while busy, on
    ``clock`` (``time.monotonic``; a test gives its own)."""

    __slots__ = (
        "alone_from",
        "alone_s",
        "answers",
        "busy_s",
        "clock",
        "cohort",
        "inflight",
        "interval_s",
        "last",
        "margin",
        "name",
        "parallel",
        "refused",
        "spread_s",
        "target_s",
    )

    def __init__(self, name: str, parallel: int, target_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.parallel = max(parallel, 1)
        self.margin = MARGIN if self.parallel == 1 else BATCH_MARGIN
        self.target_s = target_s
        self.clock = clock
        self.inflight = 0
        #: The answers counted and the busy time they took, each older answer weighing ``1 - 1 / WINDOW`` of the
        #: next: their ratio is the model's time per answer while busy (``interval_s``).
        self.answers = 0.0
        self.busy_s = 0.0
        #: ``busy_s / answers`` once measured; 0 before.
        self.interval_s = 0.0
        #: The last answer's time, or when the model went busy after it: where the next answer's busy time starts.
        self.last = 0.0
        #: Requests still to leave before the first estimate counts: those in flight at the model's first answer,
        #: admitted before anything was measured, run at once, so the first answer alone would count them as runs
        #: one after the other; 0 once measured.
        self.cohort = -1
        #: How far answers come from the time expected at their admission (their mean deviation, as TCP's
        #: ``rttvar``).
        self.spread_s = 0.0
        #: The time of a request that ran alone (admitted to an idle model, none admitted before its answer): the
        #: unloaded run the accepted latency is held to (s; 0 until measured).
        self.alone_s = 0.0
        #: The admission time of the request running alone now, if one is.
        self.alone_from: float | None = None
        self.refused = 0

    def expected_s(self, now: float) -> float:
        """When a request admitted now is expected to be answered, from now: what is left of the answer in progress
        (one interval since the last answer, none once that has passed), then one interval for each other request
        in flight and one for its own (Little's law: the requests ahead over the rate the model answers them)."""
        interval = self.interval_s
        if not self.inflight:
            return interval
        return min(max(interval - (now - self.last), 0.0), interval) + self.inflight * interval

    def answer_s(self, now: float) -> float:
        """``expected_s`` and four times how far answers have come from their expected time (``MARGIN``; twice for
        a batching model, ``BATCH_MARGIN``), so that the accepted p99, not only the mean, keeps the bound."""
        return self.expected_s(now) + self.margin * self.spread_s

    def drain_s(self) -> float:
        """The time the requests in flight take to be answered, as measured."""
        return self.inflight * self.interval_s

    def bound_s(self) -> float:
        """The answer time a request is admitted within: twice the unloaded run plus the target."""
        return 2 * (self.alone_s or self.interval_s) + self.target_s

    def admits(self, deadline: Deadline | None, now: float | None = None) -> None:
        """Refuse a request arriving at ``now`` (the gate's clock when None) that this gate expects to answer past
        its deadline (the deadline's error) or, with none, past ``bound_s`` (Overloaded); else nothing. Unmeasured
        or idle, it refuses none."""
        if not self.interval_s or not self.inflight:
            return
        expected = self.answer_s(self.clock() if now is None else now)
        if deadline is not None:
            remaining = deadline.remaining()
            if expected <= remaining:
                return
            self.refused += 1
            raise DeadlineExceeded(
                f"model '{self.name}' would answer in about {expected * 1000:.0f} ms, after the request's deadline "
                f"({deadline.source}, {max(remaining, 0) * 1000:.0f} ms left)"
            )
        if expected <= self.bound_s():
            return
        self.refused += 1
        drain = self.drain_s()
        raise Overloaded(
            f"model '{self.name}' has more requests in progress than it answers within its queueing target "
            f"({self.target_s * 1000:.0f} ms, OIP_ADMISSION_TARGET_MS); retry after {_retry_after(drain)} s",
            retry_after=_retry_after(drain),
        )

    def admit(self, deadline: Deadline | None) -> Admitted:
        """``admits`` and ``enter`` at one reading of the clock: refuse the request, or count it in."""
        now = self.clock()
        if self.inflight and self.interval_s:  # what ``admits`` checks first, here: this runs on every request
            self.admits(deadline, now)
        return self.enter(now)

    def enter(self, now: float | None = None) -> Admitted:
        """Count one admitted request in, unchecked, at ``now`` (the gate's clock when None): its admission time,
        and when it is expected to be answered (0: not measured yet)."""
        if now is None:
            now = self.clock()
        inflight, interval = self.inflight, self.interval_s
        if not inflight:
            self.last = now  # the model was idle: it is busy from now
        # ``expected_s`` of an idle model is one interval: this runs on every request
        due = (now + (self.expected_s(now) if inflight else interval)) if interval else 0.0
        self.alone_from = None if inflight else now
        self.inflight = inflight + 1
        return now, due

    def leave(self, admitted: Admitted, answered: bool) -> None:
        """Count out a request ``admit`` or ``enter`` counted in; ``answered``: it ran to a result, so it ends a
        stretch of the model's busy time (since the previous answer, or since the model went busy), one answer's
        share, and shows how far from its expected time it came.

        One answer counts for at most twice its share of the requests in flight, so that a pause of the whole
        process (a stalled thread, a collection) cannot make the model look many times slower; a model that really
        is slower is followed within a few answers."""
        now = self.clock()
        inflight = self.inflight
        self.inflight = inflight - 1
        if answered:
            since, due = admitted
            if self.alone_from == since:
                # The unloaded run after one more sample: the first sample itself; then a faster run moves it by
                # half the difference, a slower one by a fifth of at most one more run, so one stalled run moves it
                # by a fifth at most.
                alone, sample = self.alone_s, now - since
                if not alone:
                    self.alone_s = sample
                elif sample < alone:
                    self.alone_s = alone + _FALL * (sample - alone)
                else:
                    self.alone_s = alone + _RISE * min(sample - alone, alone)
            if due:
                self.spread_s = self.spread_s * _KEEP + abs(now - due) * _NEW
            busy = now - self.last
            self.last = now
            interval = self.interval_s
            if interval:
                most = 2 * (inflight if inflight > self.parallel else self.parallel) * interval
                if busy > most:
                    busy = most
            self.answers = answers = self.answers * _KEEP + 1.0
            self.busy_s = busy_s = self.busy_s * _KEEP + busy
            if not self.cohort:
                self.interval_s = busy_s / answers
            elif self.cohort < 0:
                self.cohort = inflight  # this answer and the requests admitted with it, all before any estimate
        if self.cohort > 0:
            self.cohort -= 1
            if not self.cohort:
                self.interval_s = self.busy_s / self.answers


#: ``gate_of(name)``: the gate of a model served in this process, None for one bounded otherwise (or unknown).
GateOf = Callable[[str], ModelGate | None]


class Ticket:
    """An admitted request: ``leave()`` once it is answered, however it ends."""

    __slots__ = ("admission", "admitted", "gate")

    def __init__(self, admission: Admission, gate: ModelGate | None, admitted: Admitted) -> None:
        self.admission, self.gate, self.admitted = admission, gate, admitted

    def leave(self, answered: bool = True) -> None:
        """Count the request out; ``answered``: it ran to a result, so its time measures the model."""
        self.admission.inflight -= 1
        if self.gate is not None:
            self.gate.leave(self.admitted, answered)


class Admission:
    """Counts the inference requests in flight in this process (at most ``limit``) and in each model's gate."""

    __slots__ = ("gate_of", "inflight", "limit", "refused")

    def __init__(self, limit: int, gate_of: GateOf | None = None) -> None:
        self.limit = limit
        self.inflight = 0
        #: Requests refused by the worker's bound since the process started (a gate counts its own).
        self.refused = 0
        self.gate_of: GateOf = gate_of if gate_of is not None else _no_gate

    def enter(self, name: str = "", deadline: Deadline | None = None) -> Ticket:
        """Admit one request to model ``name`` (its ``Ticket``), or refuse it: Overloaded over the worker's bound
        or the model's gate, the deadline's error when the model would answer after it."""
        return Ticket(self, *self.admit(name, deadline))

    def admit(self, name: str, deadline: Deadline | None) -> tuple[ModelGate | None, Admitted]:
        """``enter`` without its ticket: the request counted in, its model's gate (None for none) and what the gate
        gave it (``UNGATED`` for none), which its holder hands back (``ModelGate.leave``) as it counts the request
        out (``inflight``)."""
        gate = self.gate_of(name) if name else None
        if self.inflight >= self.limit:
            self.refused += 1
            drain = gate.drain_s() if gate is not None else 0.0
            raise Overloaded(
                f"the server is working on as many inference requests as it admits ({self.limit}, "
                f"OIP_MAX_INFLIGHT); retry after {_retry_after(drain)} s",
                retry_after=_retry_after(drain),
            )
        admitted = gate.admit(deadline) if gate is not None else UNGATED
        self.inflight += 1
        return gate, admitted

    def leave(self) -> None:
        """Count out a request admitted with no model named (``enter()``); a ``Ticket`` counts out its own."""
        self.inflight -= 1


def _no_gate(name: str) -> ModelGate | None:
    return None


class Gates(dict[str, "ModelGate | None"]):
    """The gates of the models of ``dataplane``'s repository by name, each made on first use (its ``__getitem__``
    is a ``GateOf``: a look-up in C for every request after a model's first)."""

    def __init__(self, dataplane: DataPlane, target_s: float, batching: bool) -> None:
        super().__init__()
        self.dataplane, self.target_s, self.batching = dataplane, target_s, batching

    def __missing__(self, name: str) -> ModelGate | None:
        repository = self.dataplane.repository
        if name not in repository.names() or len(self) >= MAX_GATES or self.dataplane.router.route(name):
            return None  # unknown (the request fails on its own), or bounded by Triton: nothing kept
        parallel = gate_parallelism(repository.entry(name).config, self.batching)
        gate = self[name] = None if parallel is None else ModelGate(name, parallel, self.target_s)
        return gate


def admission_target_ms(settings: Settings) -> int:
    """The gates' queueing target (ms; 0: no gates): ``OIP_ADMISSION_TARGET_MS``, else 100 unless
    ``OIP_MAX_INFLIGHT`` is set."""
    if settings.admission_target_ms is not None:
        return settings.admission_target_ms
    return 0 if settings.max_inflight else DEFAULT_TARGET_MS


def admission(limit: int, target_ms: int = 0, dataplane: DataPlane | None = None, batching: bool = True) -> Admission:
    """An admission for ``limit`` requests in flight and gates with ``target_ms`` (0: none) over ``dataplane``'s
    models: the inference service's, one per process, which every transport shares."""
    gated = dataplane is not None and target_ms > 0
    gates = Gates(dataplane, target_ms / 1000, batching) if gated and dataplane is not None else None
    return Admission(limit, gates.__getitem__ if gates is not None else None)


def _retry_after(drain_s: float) -> int:
    """``Retry-After`` for a drain time: whole seconds, rounded up, at least one."""
    return max(1, math.ceil(drain_s))
