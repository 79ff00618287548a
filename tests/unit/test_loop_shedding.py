"""The event loop's shedding (handler/inference/loop_shedding.py): its rules driven by the lags a test gives, and
its probe on a real event loop that the test holds itself, on the CPU."""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
import time
from pathlib import Path

import pytest

from adapters.errors import ErrorCode
from handler.inference.loop_shedding import (
    BUSY,
    DECREASE,
    FLOOR,
    INTERVAL_S,
    LATE,
    PROBE_S,
    RELEASE_S,
    SPARE,
    STANDING_S,
    SUDDEN,
    TARGET_S,
    WINDOW_S,
    LoopShedding,
)
from handler.observability.prometheus import MeteredTelemetry, failure_reason
from handler.protocol.statistics_counters import Statistics, read_snapshot

BEHIND = STANDING_S * 2
ON_TIME = TARGET_S / 4
#: Late enough to keep a capped loop's queue standing, not to mark one in a loop with no cap.
BETWEEN = (TARGET_S + STANDING_S) / 2


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _standing(shedding: LoopShedding, start: float = 100.0) -> float:
    """Late probes from ``start`` until the queue stands; the time of the last one."""
    now = start
    while shedding.cap == math.inf:
        shedding.judge(BEHIND, now)
        now += PROBE_S
        assert now - start <= INTERVAL_S + 2 * PROBE_S, "a queue standing for the interval is capped"
    return now - PROBE_S


def test_a_burst_the_loop_clears_within_the_interval_sets_no_cap(loop: asyncio.AbstractEventLoop) -> None:
    tasks = set(range(100))
    shedding = LoopShedding(loop, tasks)
    now = 100.0
    for _ in range(20):
        shedding.judge(INTERVAL_S * 0.9, now)  # one turn nearly as long as the interval, then the loop is on time
        shedding.judge(ON_TIME, now + PROBE_S)
        now += INTERVAL_S
    assert shedding.cap == math.inf
    assert not shedding.refuses()


def test_a_standing_queue_caps_the_requests_a_tenth_below_what_the_loop_holds(
    loop: asyncio.AbstractEventLoop,
) -> None:
    tasks = set(range(100))
    shedding = LoopShedding(loop, tasks)
    shedding.judge(BEHIND, 100.0)
    shedding.judge(BEHIND, 100.0 + INTERVAL_S / 2)
    assert shedding.cap == math.inf, "late for less than the interval"
    shedding.judge(BEHIND, 100.0 + INTERVAL_S + PROBE_S)
    assert shedding.cap == pytest.approx(100 * DECREASE)
    assert shedding.refuses() and shedding.refused == 1
    tasks.difference_update(range(20))
    assert not shedding.refuses() and shedding.refused == 1


def test_a_standing_queue_over_what_the_loop_answers_in_time_is_capped_at_that_at_once(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Little's law: at 20,000 answers a second the loop answers ``20,000 * TARGET_S`` requests within the target;
    6,000 held are cut to that on the first standing probe, not a tenth at a time."""
    tasks = set(range(6000))
    shedding = LoopShedding(loop, tasks)
    shedding.rate = 20_000.0
    assert 20_000 * TARGET_S > FLOOR
    _standing(shedding)
    assert shedding.cap == pytest.approx(20_000 * TARGET_S)
    other = LoopShedding(loop, tasks)
    other.rate = 1.0  # a rate that would set the cap below the floor
    _standing(other)
    assert other.cap == FLOOR


def test_a_standing_queue_within_an_intervals_answers_is_capped_a_tenth_below_what_the_loop_holds(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """200 held at 2,500 answers a second are fewer than the loop answers in an interval (250): a tenth off."""
    tasks = set(range(200))
    shedding = LoopShedding(loop, tasks)
    shedding.rate = 2500.0
    _standing(shedding)
    assert shedding.cap == pytest.approx(200 * DECREASE)


def test_a_loop_late_while_the_process_is_off_the_cpu_sets_no_cap(loop: asyncio.AbstractEventLoop) -> None:
    """Late because the machine's other work starves the process (it spent little of the time on the CPU): no queue
    of the loop's own, and refusing would not shorten it."""
    shedding = LoopShedding(loop, set(range(100)))
    now = 100.0
    for _ in range(50):
        shedding.judge(BEHIND, now, busy=BUSY / 2)
        now += PROBE_S
    assert shedding.cap == math.inf
    shedding.judge(BEHIND, now, busy=BUSY)
    shedding.judge(BEHIND, now + INTERVAL_S + PROBE_S, busy=BUSY)
    assert shedding.cap != math.inf


def test_the_cap_shrinks_while_the_queue_stands_and_never_below_the_floor(loop: asyncio.AbstractEventLoop) -> None:
    """The backlog that set the cap gets an interval to drain; a queue still standing then shrinks it a tenth a
    probe, down to the floor."""
    shedding = LoopShedding(loop, set(range(40)))
    now = _standing(shedding)
    caps = [shedding.cap]
    for _ in range(round(INTERVAL_S / PROBE_S) + 40):
        now += PROBE_S
        shedding.judge(BEHIND, now)
        caps.append(shedding.cap)
    kept = round(INTERVAL_S / PROBE_S) - 1
    assert caps[:kept] == [caps[0]] * kept
    first_shrink = next(i for i, cap in enumerate(caps) if cap < caps[0])
    assert caps[first_shrink] == pytest.approx(caps[0] * DECREASE)
    assert caps == sorted(caps, reverse=True)
    assert caps[-1] == FLOOR


def test_a_capped_loop_is_held_to_the_target_a_loop_with_no_cap_to_the_standing_lag(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """A lag between ``TARGET_S`` and ``STANDING_S`` for many intervals (a moment's contention below capacity) sets
    no cap. Once a cap is set, the backlog that set it drains: the same lag shrinks it only when it stands an
    interval. Once the loop has been on time, while it refuses, every late probe shrinks it and every probe on time
    grows it by one."""
    tasks = set(range(200))
    shedding = LoopShedding(loop, tasks)
    now = 100.0
    for _ in range(round(5 * INTERVAL_S / PROBE_S)):
        shedding.judge(BETWEEN, now)
        now += PROBE_S
    assert shedding.cap == math.inf
    now = _standing(shedding, now) + PROBE_S
    first = shedding.cap
    for _ in range(round(INTERVAL_S / PROBE_S) - 2):
        shedding.judge(BETWEEN, now)
        now += PROBE_S
    assert shedding.cap == first, "draining, it shrinks only once the lag has stood an interval"
    for _ in range(4):
        shedding.judge(BETWEEN, now)
        now += PROBE_S
    assert shedding.cap < first
    shrunk = shedding.cap
    assert shedding.refuses()
    shedding.judge(ON_TIME, now)
    assert shedding.cap == pytest.approx(shrunk + 1)
    now += PROBE_S
    shedding.judge(BETWEEN, now)  # nothing refused since the last probe: the cap is not what makes it late
    assert shedding.cap == pytest.approx(shrunk + 1)
    assert shedding.refuses()
    now += PROBE_S
    shedding.judge(BETWEEN, now)  # on time once: each late probe while it refuses shrinks it from now on
    assert shedding.cap == pytest.approx((shrunk + 1) * LATE)


def test_a_settled_cap_never_falls_below_the_floor(loop: asyncio.AbstractEventLoop) -> None:
    tasks = set(range(FLOOR + 2))
    shedding = LoopShedding(loop, tasks)
    now = _standing(shedding) + PROBE_S
    shedding.judge(ON_TIME, now)
    for _ in range(100):
        assert shedding.refuses()
        now += PROBE_S
        shedding.judge(BETWEEN, now)
    assert shedding.cap == FLOOR


def test_the_cap_grows_while_the_loop_keeps_up_and_it_refuses(loop: asyncio.AbstractEventLoop) -> None:
    tasks = set(range(50))
    shedding = LoopShedding(loop, tasks)
    now = _standing(shedding)
    cap = shedding.cap
    assert shedding.refuses()
    now += PROBE_S
    shedding.judge(ON_TIME, now)
    assert shedding.cap == pytest.approx(cap + 1)
    now += PROBE_S
    shedding.judge(ON_TIME, now)  # nothing refused since: the cap stays
    assert shedding.cap == pytest.approx(cap + 1)


def test_the_cap_goes_once_it_has_refused_nothing_for_the_release_time(loop: asyncio.AbstractEventLoop) -> None:
    tasks = set(range(50))
    shedding = LoopShedding(loop, tasks)
    now = _standing(shedding)
    assert shedding.refuses()
    now += PROBE_S
    shedding.judge(ON_TIME, now)
    refused_at = now
    while now - refused_at < RELEASE_S:
        assert shedding.cap != math.inf
        now += PROBE_S
        shedding.judge(ON_TIME, now)
    assert shedding.cap == math.inf
    assert not shedding.refuses()


def test_a_cap_goes_once_requests_arrive_slower_than_the_loop_answers(loop: asyncio.AbstractEventLoop) -> None:
    """A load that fell below the loop's capacity after an overload: the cap still refuses its bursts (so it would
    never go by refusing nothing), but requests arriving at under ``SPARE`` of the loop's rate leave it no cap."""
    shedding = LoopShedding(loop, set(range(50)))
    _standing(shedding)
    cap = shedding.cap
    shedding.rate = 1000.0
    shedding.spare(SPARE * 1000.0)  # as fast as that: a load at its capacity, as far as a window can tell
    assert shedding.cap == cap
    shedding.spare(SPARE * 1000.0 - 1)
    assert shedding.cap == math.inf
    assert not shedding.refuses()

    unmeasured = LoopShedding(loop, set(range(50)))
    _standing(unmeasured)
    unmeasured.spare(0.0)
    assert unmeasured.cap != math.inf, "a loop whose rate is not measured yet shows no time to spare"


def test_a_window_of_arrivals_begins_at_the_cap(loop: asyncio.AbstractEventLoop) -> None:
    """Requests are counted as they ask ``refuses``, which a loop with no cap asks of none: a window that began
    before the cap would count a part of its time's arrivals, and show a load past capacity as one below it."""
    shedding = LoopShedding(loop, set(range(50)))
    for _ in range(5):
        shedding.refuses()
    capped_at = _standing(shedding)
    assert shedding.window == (capped_at, 5)


class _Windows(LoopShedding):
    """``LoopShedding`` that keeps the loop's time of each window it judges, and the arrival rate it saw."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tasks: set[int], judged: int) -> None:
        super().__init__(loop, tasks)
        self.windows: list[tuple[float, float]] = []
        self.judged = loop.create_future()
        self.wanted = judged

    def spare(self, arrival_rate: float) -> None:
        self.windows.append((self.loop.time(), arrival_rate))
        super().spare(arrival_rate)
        if len(self.windows) == self.wanted:
            self.judged.set_result(None)


def _arriving(shedding: LoopShedding, per_turn: int) -> None:
    """``per_turn`` requests arriving (each asking ``refuses``) every ``PROBE_S`` on ``shedding``'s loop until it
    has judged the windows it waits for."""
    if shedding.judged.done():
        return
    for _ in range(per_turn):
        shedding.refuses()
    shedding.loop.call_later(PROBE_S, _arriving, shedding, per_turn)


@pytest.mark.parametrize(
    ("per_turn", "rate", "capped"),
    [(1, 10 / PROBE_S, False), (20, 1 / PROBE_S, True)],
    ids=["slower than it answers", "faster than it answers"],
)
def test_the_probe_judges_the_arrivals_of_each_window(
    loop: asyncio.AbstractEventLoop, per_turn: int, rate: float, capped: bool
) -> None:
    """On a real loop that keeps up, held at its cap: each ``WINDOW_S`` the probe judges the rate requests arrived
    at. A tenth of the loop's rate at most: the cap goes at the first window (while it refused every request); at
    ten times it or more (the loop's turns as late as it may run them), it stays."""
    tasks = set(range(10_000))  # more than the cap grows to while it refuses
    shedding = _Windows(loop, tasks, judged=1 if not capped else 2)
    _standing(shedding, loop.time())
    shedding.rate = rate
    assert shedding.refuses()
    shedding.watch()
    loop.call_soon(_arriving, shedding, per_turn)
    loop.run_until_complete(shedding.judged)
    assert (shedding.cap != math.inf) is capped, shedding.windows
    assert shedding.refused > 1


def test_a_window_in_which_the_loop_fell_behind_is_not_judged(loop: asyncio.AbstractEventLoop) -> None:
    """Arrivals are counted as the loop reads them: a loop over ``STANDING_S`` late reads slower than requests
    come, so the window of a long turn tells nothing of the load, and the next one is judged."""
    tasks = set(range(10_000))  # more than the cap grows to while it refuses
    shedding = _Windows(loop, tasks, judged=1)
    _standing(shedding, loop.time())
    shedding.rate = 10 / PROBE_S

    def long_turn() -> None:
        end = time.perf_counter() + 2 * STANDING_S
        while time.perf_counter() < end:  # one turn of the loop past the standing lag, on the CPU
            pass

    start = loop.time()
    shedding.watch()
    loop.call_soon(long_turn)
    loop.call_soon(_arriving, shedding, 1)
    loop.run_until_complete(shedding.judged)
    ((judged_at, _),) = shedding.windows
    assert judged_at - start >= 2 * WINDOW_S, "the first window, with the long turn, was judged"


def test_a_refusal_is_a_rejected_503_with_the_loops_drain_time(loop: asyncio.AbstractEventLoop) -> None:
    shedding = LoopShedding(loop, set(range(30)))
    shedding.rate = 10.0  # 30 requests at 10 a second: 3 s
    error = shedding.refusal()
    assert error.code is ErrorCode.UNAVAILABLE
    assert error.retry_after == 3
    assert failure_reason(error) == "REJECTED"
    assert "event loop" in error.message and "retry after 3 s" in error.message
    shedding.rate = 0.0
    assert shedding.retry_after() == 1, "before any rate is measured"


def test_refusals_are_counted_rejected_per_model_in_one_update(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    statistics = Statistics(tmp_path)
    versions = {"iris": "1"}
    telemetry = MeteredTelemetry(statistics, lambda name, version: versions.get(name))
    error = LoopShedding(loop, ()).refusal()
    telemetry.rejected("iris", None, error, 7)
    telemetry.rejected("iris", "1", error, 2)
    telemetry.rejected("unknown", None, error, 5)  # no model, no series (as a request to it would make none)
    snapshot = read_snapshot(tmp_path)
    assert snapshot.failures("iris", "1") == {"REJECTED": 9, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}
    assert {name for name, _version, _size in snapshot.rows} == {"iris"}
    assert snapshot.pending() == {}, "a refused request never entered the server"


def test_the_probe_on_a_real_loop_caps_a_loop_blocked_past_the_target(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's own turns are made long by callbacks that hold it (as requests answered on the loop do); the
    probe sees the lag and caps; once the turns are short and nothing is refused, the cap goes."""
    tasks = set(range(3 * FLOOR))
    shedding = LoopShedding(loop, tasks)
    capped = loop.create_future()

    def hold() -> None:
        end = time.perf_counter() + 2 * STANDING_S
        while time.perf_counter() < end:  # one long turn of the loop, on the CPU as a request's work is
            pass
        if shedding.cap != math.inf:
            capped.set_result(shedding.cap)
        else:
            loop.call_soon(hold)

    shedding.watch()
    loop.call_soon(hold)
    cap = loop.run_until_complete(capped)
    assert FLOOR <= cap < len(tasks)
    assert shedding.refuses()

    tasks.clear()
    released = loop.create_future()

    def check() -> None:
        if shedding.cap == math.inf:
            released.set_result(True)
        else:
            loop.call_later(PROBE_S, check)

    loop.call_soon(check)
    assert loop.run_until_complete(released)


def test_a_loop_an_interval_late_refuses_past_the_sudden_bound_before_any_cap(loop: asyncio.AbstractEventLoop) -> None:
    """A sudden load's first long turn: the probe cannot run, so no cap is set; a request arriving then is refused
    when the loop holds ``SUDDEN`` requests or more (or as many as it answers in an interval), and taken otherwise."""
    tasks = set(range(SUDDEN))
    shedding = LoopShedding(loop, tasks)
    seen: dict[str, object] = {}

    def long_turn() -> None:
        seen["behind at the turn's start"] = shedding.behind()
        end = time.monotonic() + PROBE_S + INTERVAL_S + TARGET_S
        while time.monotonic() < end:  # one turn of the loop longer than the interval, on the CPU
            pass
        seen["behind after it"] = shedding.behind()
        seen["SUDDEN held: refused"] = shedding.refuses()
        tasks.difference_update(range(SUDDEN // 2))
        seen["half held: refused"] = shedding.refuses()
        shedding.rate = 10 * SUDDEN / INTERVAL_S
        tasks.update(range(2 * SUDDEN))
        seen["twice held, fewer than an interval's answers: refused"] = shedding.refuses()

    shedding.watch()
    loop.call_soon(long_turn)
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == {
        "behind at the turn's start": False,
        "behind after it": True,
        "SUDDEN held: refused": True,
        "half held: refused": False,
        "twice held, fewer than an interval's answers: refused": False,
    }
    assert shedding.cap == math.inf and shedding.refused == 1
    assert not LoopShedding(loop, tasks).behind(), "no probe due: never behind"


def _busy(seconds: float) -> None:
    """Keep this thread on the CPU for ``seconds`` of its own CPU time."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def _burn(stop: threading.Event) -> None:
    """Keep a core busy outside the GIL (hashlib releases it for a large buffer) until ``stop``."""
    data = bytes(1 << 20)
    while not stop.is_set():
        hashlib.sha256(data).digest()


@pytest.mark.parametrize("other_threads", ["idle", "on the CPU", "the loop pauses"])
def test_the_rate_is_not_measured_while_the_loop_idles(loop: asyncio.AbstractEventLoop, other_threads: str) -> None:
    """A trickle of answers with the loop idle between them (as health probes before a sudden load) is no measure
    of what the loop answers: the rate stays unmeasured, and a sudden load's first cap is not set from it. The
    process's other threads on the CPU (a model's runs, a test's servers) are not the loop's work, and a pause of
    the loop's own thread beside one answer (a collection) is not a load."""
    shedding = LoopShedding(loop, {1})
    stop = threading.Event()
    burner = threading.Thread(target=_burn, args=(stop,))
    if other_threads == "on the CPU":
        burner.start()
    shedding.watch()

    async def trickle() -> None:
        for index in range(20):
            shedding.answered += 1
            if other_threads == "the loop pauses" and index % 5 == 0:
                _busy(3 * PROBE_S)  # the loop's thread on the CPU past a probe, an answer in its window
            await asyncio.sleep(2 * PROBE_S)  # idle: no CPU between two answers, a probe or two

    try:
        loop.run_until_complete(trickle())
    finally:
        stop.set()
        if burner.is_alive():
            burner.join()
    assert shedding.rate == 0.0


def test_the_probe_goes_on_after_a_judgement_that_raised(loop: asyncio.AbstractEventLoop) -> None:
    class Failing(LoopShedding):
        calls = 0

        def judge(self, lag: float, now: float, busy: float = 1.0) -> None:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("a judgement that failed")
            if self.calls == 3:
                done.set_result(True)

    done = loop.create_future()
    loop.set_exception_handler(lambda loop, context: None)  # the first probe's error, reported by the loop
    shedding = Failing(loop, {1})
    shedding.watch()
    assert loop.run_until_complete(done)
    assert shedding.calls == 3
