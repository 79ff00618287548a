"""The adaptive admission of handler/inference/admission.py (each model's gate, the worker's bound) and what it
needs from the rest: the dynamic batcher's queue counting the batch being formed, its loop surviving a failure,
and a dead worker's requests counted as failures (handler/protocol/statistics_counters.py ``retire``). Rules, no
server."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from adapters import deadline as deadlines
from adapters.errors import InternalError
from adapters.onnx.batcher import Batcher, batch_key
from adapters.onnx.queue_policy import BatchingPolicy, QueueFull
from adapters.repository.model_config import parse_model_config
from handler.inference.admission import Admission, Admitted, ModelGate, Overloaded, gate_parallelism
from handler.observability.prometheus import MeteredTelemetry, failure_reason
from handler.protocol.statistics_counters import FAILURE_REASONS, Statistics, read_snapshot, retire
from handler.protocol.status import HTTP_STATUS


class Clock:
    """The gates' clock, moved by the test alone."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _gate(run_s: float, parallel: int = 1, target_s: float = 0.1, clock: Clock | None = None) -> ModelGate:
    """A gate whose run time is measured at ``run_s``: one request answered ``run_s`` after it found it idle."""
    clock = clock if clock is not None else Clock()
    gate = ModelGate("slow", parallel, target_s, clock)
    admitted = gate.enter()
    clock.now += run_s
    gate.leave(admitted, answered=True)
    assert gate.interval_s == pytest.approx(run_s) and gate.inflight == 0
    return gate


def test_an_unmeasured_model_admits_up_to_the_workers_bound_only() -> None:
    gate = ModelGate("slow", 1, 0.1, Clock())
    admission = Admission(3, lambda name: gate)
    tickets = [admission.enter("slow") for _ in range(3)]
    with pytest.raises(Overloaded) as caught:
        admission.enter("slow")
    assert "OIP_MAX_INFLIGHT" in caught.value.message and caught.value.retry_after == 1
    for ticket in tickets:
        ticket.leave(answered=False)  # failures measure nothing
    assert gate.interval_s == 0 and gate.inflight == admission.inflight == 0


def test_a_slow_model_admits_a_third_request_once_the_run_in_progress_is_within_the_target_of_its_end() -> None:
    """Run 300 ms, target 100 ms: an answer within 700 ms. Two in flight: the third waits for the rest of the run
    in progress and two more runs, so it is admitted once that run has 100 ms left, and not before."""
    clock = Clock()
    gate = _gate(0.3, clock=clock)
    admission = Admission(1000, lambda name: gate)
    admission.enter("slow")  # the model idle: its run starts now
    admission.enter("slow")  # answered after the rest of that run and its own: within 600 ms
    clock.now += 0.19  # 110 ms left of the run in progress: 110 + 600 > 700
    with pytest.raises(Overloaded) as caught:
        admission.enter("slow")
    assert HTTP_STATUS[caught.value.code] == 503 and "OIP_ADMISSION_TARGET_MS" in caught.value.message
    assert caught.value.retry_after == 1 and gate.refused == 1 and admission.inflight == 2  # 0.41 s to drain
    assert failure_reason(caught.value) == "REJECTED"
    clock.now += 0.02  # 90 ms left: 90 + 600 <= 700
    admission.enter("slow")
    assert gate.inflight == 3
    with pytest.raises(Overloaded):  # a fourth waits for three runs more
        admission.enter("slow")


def test_a_run_past_its_measured_time_counts_as_ending_and_retry_after_follows_the_drain_time() -> None:
    clock = Clock()
    gate = _gate(2.0, clock=clock)
    admission = Admission(1000, lambda name: gate)
    admission.enter("slow")
    admission.enter("slow")
    with pytest.raises(Overloaded) as slower:  # 2 s of the run in progress, and 2 more runs
        admission.enter("slow")
    assert slower.value.retry_after == 4  # the two in flight drain in 4 s
    clock.now += 5.0  # stalled: nothing left of it is counted, the third waits for two runs
    admission.enter("slow")
    with pytest.raises(Overloaded):
        admission.enter("slow")


class Busy:
    """Requests kept in flight at a gate, one answered after the other: each answer's place is taken by a new
    request."""

    def __init__(self, gate: ModelGate, clock: Clock) -> None:
        self.gate, self.clock = gate, clock
        self.tickets: deque[Admitted] = deque()

    def answer(self, runs: Iterable[float], depth: int = 2) -> None:
        """Fill the gate to ``depth`` in flight; then each of ``runs`` is the time to the next answer."""
        while len(self.tickets) < depth:
            self.tickets.append(self.gate.enter())
        for run in runs:
            self.clock.now += run
            self.gate.leave(self.tickets.popleft(), answered=True)
            self.tickets.append(self.gate.enter())


def test_an_answer_measures_the_busy_time_since_the_one_before() -> None:
    clock = Clock()
    gate = _gate(0.3, clock=clock)
    admission = Admission(1000, lambda name: gate)
    first, second = admission.enter("slow"), admission.enter("slow")
    clock.now += 0.3
    first.leave()  # the second's answer is one interval from now
    clock.now += 0.25
    assert gate.answer_s(clock.now) == pytest.approx(0.05 + 0.3)
    admission.enter("slow")  # the rest of the second's interval and its own: 0.35 s
    clock.now += 0.05
    second.leave()
    assert gate.interval_s == pytest.approx(0.3) and gate.spread_s == pytest.approx(0.0)  # each came when due


def test_requests_admitted_before_the_first_answer_are_measured_together() -> None:
    """perf_analyzer at concurrency 8 on a model not measured yet: the eight run at once in worker threads and are
    answered 24 ms later, half a millisecond apart. Counted as runs one after the other from the first answer, eight
    in flight would wait 8 x 24 ms, past the bound; measured over all eight, they are answered at 3.4 ms each, and
    the next request, with eight in flight, is admitted."""
    clock = Clock()
    gate = ModelGate("mlp", 1, 0.1, clock)
    admission = Admission(1000, lambda name: gate)
    cohort = [admission.enter("mlp") for _ in range(8)]
    clock.now += 0.024
    cohort[0].leave()
    assert gate.interval_s == 0  # seven of the eight still to answer
    follower = admission.enter("mlp")  # perf_analyzer sends the next as soon as one is answered
    for ticket in cohort[1:]:
        clock.now += 0.0005
        ticket.leave()
    assert gate.interval_s == pytest.approx((0.024 + 7 * 0.0005) / 8, rel=0.1)
    assert gate.bound_s() < 8 * 0.024
    for _ in range(7):
        admission.enter("mlp")
    assert gate.inflight == 8
    admission.enter("mlp")
    follower.leave()
    assert gate.refused == 0


def test_runs_overlapping_in_threads_are_measured_per_answer() -> None:
    """Eight clients on a 3 ms model whose runs overlap in worker threads: answers come in pairs every 6 ms. Each
    answer is one of the model's answers, however close to the last, so eight in flight wait 24 ms, not eight
    runs of 6 ms, and nothing is refused."""
    clock = Clock()
    gate = _gate(0.003, clock=clock)
    Busy(gate, clock).answer([0.006, 0.0] * 100, depth=8)
    assert gate.interval_s == pytest.approx(0.003, rel=0.1)
    assert gate.answer_s(clock.now) < 0.05
    gate.admits(None)  # the ninth, with eight in flight


def test_a_model_at_four_fifths_of_its_capacity_is_never_refused() -> None:
    """Arrivals every 1.25 runs on average, bunched in twos as an open-loop client sends them: never a 503."""
    clock = Clock()
    gate = _gate(0.3, clock=clock)
    admission = Admission(1000, lambda name: gate)
    arrivals = []
    for burst in range(40):  # 0.8x in bursts: two at once every 0.75 s (2.5 runs), and one of them late
        arrivals += [burst * 0.75, burst * 0.75 + (0.5 if burst % 5 == 4 else 0.0)]
    queue: list = []  # FIFO, one run at a time, each exactly 0.3 s
    busy_until = clock.now
    start = clock.now
    for at in arrivals:
        while queue and busy_until <= start + at:
            clock.now = busy_until
            queue.pop(0).leave()
            if queue:
                busy_until = clock.now + 0.3
        clock.now = max(clock.now, start + at)
        if not queue:
            busy_until = clock.now + 0.3
        queue.append(admission.enter("slow"))
    assert gate.refused == 0 and gate.interval_s == pytest.approx(0.3)


def test_the_bound_is_twice_the_run_of_a_request_alone_when_runs_together_are_slower() -> None:
    """Alone a run takes 300 ms; two at once share the cores badly and are answered 600 ms apart. The bound stays
    700 ms (twice the unloaded run plus the target), and the wait is counted in the slower, shared answers."""
    clock = Clock()
    gate = _gate(0.3, clock=clock)
    assert gate.alone_s == pytest.approx(0.3) and gate.bound_s() == pytest.approx(0.7)
    Busy(gate, clock).answer([0.6] * 100)
    assert gate.alone_s == pytest.approx(0.3) and gate.bound_s() == pytest.approx(0.7)
    assert gate.interval_s == pytest.approx(0.6, rel=0.05)
    with pytest.raises(Overloaded):  # an answer just came: 600 ms for the one in flight, 600 for its own
        gate.admits(None)
    while gate.inflight:
        clock.now += 0.6
        gate.leave((0.0, 0.0), answered=False)
    alone = gate.enter()  # an idle model admits whatever it measured
    clock.now += 0.2
    gate.leave(alone, answered=True)  # alone again, and faster: the bound follows
    assert gate.alone_s == pytest.approx(0.25) and gate.bound_s() == pytest.approx(0.6)


def test_answers_that_stray_from_their_expected_time_widen_the_margin() -> None:
    """Runs of 200 and 400 ms (mean 300) two at a time: a request is answered up to 200 ms from when it was
    expected, so the gate admits a third later in the answer in progress than with steady 300 ms runs."""
    steady_clock, varying_clock = Clock(), Clock()
    steady, varying = _gate(0.3, clock=steady_clock), _gate(0.3, clock=varying_clock)
    Busy(steady, steady_clock).answer([0.3] * 40)
    Busy(varying, varying_clock).answer([0.2, 0.2, 0.4, 0.4] * 10)
    assert steady.spread_s == pytest.approx(0) and varying.spread_s > 0.03
    assert varying.interval_s == pytest.approx(0.3, rel=0.05)
    steady_clock.now += steady.interval_s - 0.09  # 90 ms left: 90 + 600 <= 700
    steady.admits(None)
    varying_clock.now += varying.interval_s - 0.09
    with pytest.raises(Overloaded):
        varying.admits(None)


def test_a_model_that_runs_one_request_at_a_time_adds_four_deviations_and_a_batching_one_two() -> None:
    """TCP's retransmission timeout is the smoothed round trip plus four mean deviations (RFC 6298, 2.3): so is the
    answer a request to a model that runs one request at a time can expect. A batching model's answers come a batch
    at a time, their deviation its batches' rhythm: two."""
    for parallel, margin in ((1, 4), (8, 2)):
        clock = Clock()
        gate = _gate(0.3, parallel=parallel, clock=clock)
        Busy(gate, clock).answer([0.2, 0.2, 0.4, 0.4] * 10)
        assert gate.spread_s > 0.03
        assert gate.answer_s(clock.now) - gate.expected_s(clock.now) == pytest.approx(margin * gate.spread_s)


def test_a_stalled_answer_counts_for_twice_its_share_at_most_and_is_soon_forgotten() -> None:
    """A 0.5 ms model whose process stalls for 50 ms once (a pause of the machine, not of the model), with eight in
    flight: the stall counts as two shares of eight answers, so the next eight (perf_analyzer at concurrency 8)
    are still admitted; a model that really is slower is followed within a few dozen answers."""
    clock = Clock()
    gate = _gate(0.0005, clock=clock)
    busy = Busy(gate, clock)
    busy.answer([0.0005] * 100, depth=8)
    busy.answer([0.05], depth=8)
    assert gate.interval_s < 1.5 * 0.0005
    for _ in range(8):
        gate.admits(None)
        busy.tickets.append(gate.enter())
    busy.answer([0.0005] * 64, depth=16)
    assert gate.interval_s < 0.00055
    busy.answer([0.001] * 64, depth=16)
    assert gate.interval_s > 0.0009


def test_a_fast_model_admits_what_it_answers_within_the_target() -> None:
    gate = _gate(0.0001)
    for _ in range(1000):  # the answer in progress and a thousand more of 0.1 ms: within two runs and 100 ms
        gate.admits(None)
        gate.enter()
    gate.inflight = 1010
    with pytest.raises(Overloaded):
        gate.admits(None)


def test_a_batching_model_answers_a_batch_at_a_time_and_admits_more_than_a_batch_never_three() -> None:
    """Batches of 8 answered at once every 300 ms: 37.5 ms an answer. A batch's answers come together, up to 262 ms
    from when each was expected, which the margin counts: the gate admits more than the batch being formed, and
    never a third batch (900 ms, past the 700 the bound gives)."""
    clock = Clock()
    gate = _gate(0.3, parallel=8, clock=clock)
    for _ in range(40):
        batch = [gate.enter() for _ in range(8)]
        clock.now += 0.3
        for admitted in batch:
            gate.leave(admitted, answered=True)
    assert gate.interval_s == pytest.approx(0.3 / 8, rel=0.15) and gate.alone_s == pytest.approx(0.3)
    admitted = 0
    with pytest.raises(Overloaded):
        while True:
            gate.admits(None)
            gate.enter()
            admitted += 1
    assert 8 < admitted < 24


def test_a_request_whose_deadline_would_pass_in_the_queue_is_refused_with_the_deadlines_answer() -> None:
    gate = _gate(0.3)
    for _ in range(3):
        gate.enter()  # the rest of the answer in progress (all of it) and three more: 1.2 s
    gate.admits(deadlines.after(5.0, "the gRPC deadline"))  # its own deadline, not the target, bounds it
    with pytest.raises(deadlines.DeadlineExceeded, match="the gRPC deadline") as caught:
        gate.admits(deadlines.after(1.0, "the gRPC deadline"))
    assert failure_reason(caught.value) == "CANCELED"


def test_a_request_cancelled_in_progress_is_counted_canceled(tmp_path: Path) -> None:
    """A gRPC client that gives up cancels its call's task while the request is in the server: Triton's
    ``CANCELED``, not ``OTHER``, and no longer pending."""
    statistics = Statistics(tmp_path)
    telemetry = MeteredTelemetry(statistics, lambda name, version: "1")

    async def call(inside: asyncio.Event) -> None:
        with telemetry.observe("slow", None):
            inside.set()
            await asyncio.Event().wait()  # until cancelled

    async def cancelled() -> None:
        inside = asyncio.Event()
        task = asyncio.create_task(call(inside))
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    snapshot = read_snapshot(tmp_path)
    assert snapshot.failures("slow", "1") == {"REJECTED": 0, "CANCELED": 1, "BACKEND": 0, "OTHER": 0}
    assert snapshot.pending() == {("slow", "1"): 0}
    assert failure_reason(asyncio.CancelledError()) == "CANCELED"


def test_a_first_answer_that_took_no_time_on_the_clock_leaves_the_gate_measuring() -> None:
    clock = Clock()
    gate = ModelGate("slow", 1, 0.1, clock)
    gate.leave(gate.enter(), answered=True)  # answered within the clock's resolution
    assert gate.cohort == 0 and gate.interval_s == 0
    Busy(gate, clock).answer([0.3] * 64)
    assert gate.interval_s > 0.25
    with pytest.raises(Overloaded):
        gate.admits(None)


def test_a_refused_or_failed_request_measures_nothing() -> None:
    clock = Clock()
    gate = _gate(0.3, clock=clock)
    running, bad = gate.enter(), gate.enter()
    clock.now += 0.01
    gate.leave(bad, answered=False)  # a bad request, refused after its admission
    assert gate.last == running[0] and gate.answers == pytest.approx(1.0) and gate.interval_s == pytest.approx(0.3)


def test_models_with_their_own_queue_policy_have_no_gate_and_batching_ones_a_wider_one() -> None:
    def parallel(text: str, batching: bool = True) -> int | None:
        return gate_parallelism(parse_model_config(text), batching)

    assert parallel("max_batch_size: 8\ndynamic_batching { }") == 8
    assert parallel("max_batch_size: 8\ndynamic_batching { preferred_batch_size: [4] }") == 4
    assert parallel("max_batch_size: 8\ndynamic_batching { }", batching=False) == 1
    assert parallel("max_batch_size: 8") == 1
    assert parallel("max_batch_size: 8\ndynamic_batching { default_queue_policy { max_queue_size: 4 } }") is None
    queued = "dynamic_batching { priority_levels: 2 "
    queued += "priority_queue_policy { key: 1 value { default_timeout_microseconds: 9 } } }"
    assert parallel(f"max_batch_size: 8\n{queued}") is None
    assert gate_parallelism(None, True) == 1


def test_max_queue_size_counts_the_batch_being_formed() -> None:
    """Triton's qa/L0_http ``test_descriptive_status_code``: a batch waiting for its delay holds the one place."""

    async def scenario() -> None:
        config = "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 1000000 "
        config += "default_queue_policy { max_queue_size: 1 } }"
        policy = BatchingPolicy.from_config(parse_model_config(config))
        assert policy is not None
        batcher = Batcher(policy, lambda wanted, feeds: [feeds["x"]], lambda: True)
        feeds = {"x": np.ones((1, 1), np.float32)}
        key = batch_key(feeds, ["y"])
        # Two at once, whichever arrives first: it forms a batch that waits out its delay holding the one place, so
        # the other is refused; the first is answered once the delay is over.
        both = [asyncio.ensure_future(batcher.submit(feeds, ["y"], key)) for _ in range(2)]
        answers = await asyncio.gather(*both, return_exceptions=True)
        refused = [answer for answer in answers if isinstance(answer, QueueFull)]
        (answered,) = [answer for answer in answers if not isinstance(answer, BaseException)]
        assert len(refused) == 1, answers
        assert answered.arrays[0].tolist() == [[1.0]]

    asyncio.run(scenario())


def test_the_batchers_loop_survives_an_exception_and_keeps_batching() -> None:
    calls = []

    def inline() -> bool:  # the batcher asks before each run; the first time, it fails as a bug would
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in the loop")
        return True

    async def scenario() -> None:
        policy = BatchingPolicy.from_config(parse_model_config("max_batch_size: 8\ndynamic_batching { }"))
        assert policy is not None
        batcher = Batcher(policy, lambda wanted, feeds: [feeds["x"] * 2], inline)
        feeds = {"x": np.ones((1, 1), np.float32)}
        with pytest.raises(InternalError, match="the dynamic batcher failed"):
            await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
        for _ in range(2):
            outcome = await batcher.submit(feeds, ["y"], batch_key(feeds, ["y"]))
            assert outcome.arrays[0].tolist() == [[2.0]]

    asyncio.run(scenario())


def test_a_dead_workers_requests_in_progress_count_as_backend_failures(tmp_path: Path) -> None:
    statistics = Statistics(tmp_path)
    statistics.success("slow", "1", 1000, None)
    cell = statistics.pending_cell("slow", "1")
    statistics.pending(cell, 2)
    other = statistics.pending_cell("fresh", "1")  # no request to it ended in this worker
    statistics.pending(other, 1)
    statistics.failed("slow", "1", "REJECTED")
    retire(tmp_path, os.getpid())
    snapshot = read_snapshot(tmp_path)
    assert snapshot.pending() == {("slow", "1"): 0, ("fresh", "1"): 0}
    assert snapshot.failures("slow", "1") == {"REJECTED": 1, "CANCELED": 0, "BACKEND": 2, "OTHER": 0}
    assert snapshot.failures("fresh", "1")["BACKEND"] == 1
    documents = {d["name"]: d for d in snapshot.documents([("slow", "1"), ("fresh", "1")])}
    assert documents["slow"]["inference_stats"]["fail"]["count"] == 2
    assert documents["fresh"]["inference_stats"]["fail"]["count"] == 1
    assert set(FAILURE_REASONS) == {"REJECTED", "CANCELED", "BACKEND", "OTHER"}
