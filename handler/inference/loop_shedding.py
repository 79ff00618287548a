"""``LoopShedding``: how many requests a worker's event loop holds while it runs behind, with no setting.

A fast model's requests cost the worker its event loop (parsing, decoding, encoding), not the model's threads, so
no model's gate (``admission.py``) sees their queue: past the loop's capacity every request waits behind all the
others. The loop's own lag shows that queue: a timer due ``PROBE_S`` after it last ran runs late by about one turn
of the loop less ``PROBE_S``, and a turn does a little of every request in it.

- A standing queue is a lag over ``STANDING_S`` at every probe for ``INTERVAL_S`` (CoDel's test, RFC 8289: a burst
  the loop clears within the interval is no queue) while the loop is busy: its thread used at least ``BUSY`` of the
  time between two probes on the CPU. A loop late because other work (the machine's, or the process's other
  threads) starves its thread is no queue of its own, and refusing would not shorten it. Then the requests in the
  worker are capped a tenth below what it holds (at least ``FLOOR``); when it holds more than it answers in an
  interval at its measured rate, at what it answers within ``TARGET_S`` (Little's law: ``rate * TARGET_S``): a sudden
  load that filled the loop with hundreds of requests is cut to that at once, not a tenth a probe while each probe
  waits a long turn, and a queue that just stands is trimmed gently.
- Before any cap, a request that arrives while the loop is a whole interval late right now (its probe due that long
  and not run yet: the first long turns of a sudden load, before any probe could judge) is refused when the loop
  holds more than ``SUDDEN`` requests, or more than it answers in an interval at its rate: what it holds then
  takes it longer than the interval whatever comes next.
- Once capped, the loop is held to ``TARGET_S``, CoDel's default target. While the backlog that set the cap drains
  (until a probe is on time), the cap shrinks by a tenth a probe only while the lag stands over the target for an
  interval, so that a sudden burst below capacity is answered, not refused. Then, while the cap refuses, every late
  probe shrinks it by ``LATE`` and every probe on time grows it by one (AIMD, as TCP and Netflix's concurrency
  limits move theirs): the turns stay short, as a refused request waits about one. Once it has refused nothing for
  ``RELEASE_S``, or once the requests arriving over a ``WINDOW_S`` come at less than ``SPARE`` of the rate it answers
  at (the load fell below its capacity: what the cap still refuses are bursts the loop would clear), there is no
  cap. Arrivals are counted as the loop reads them, so only a window in which the loop kept up (no probe over
  ``STANDING_S`` late) is judged: a loop far behind reads slower than requests come. A loop that keeps up is
  judged by the longer lag alone, so that a moment's contention for the CPU below capacity refuses nothing.

The HTTP protocol (handler/cli/connections.py) asks ``refuses()`` as an inference request's head is read, and
answers a refused one 503 with ``Retry-After`` (the time the loop takes to answer what it holds, from its rate)
before any task is made for it, at a small part of the cost of answering it; the process's ``InferenceService``
records it as its own refusals (``REJECTED``). Health, metadata and every other request are always taken.

A model whose runs are slow does not make the loop late (its runs wait in threads), so a saturated slow model
leaves a fast one's requests alone; its own gate refuses its requests.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable, Sized
from typing import Final

from handler.inference.admission import Overloaded

#: The key of the lifespan state (the ASGI lifespan's ``state``, which uvicorn hands every connection) under which
#: a worker puts its ``Record``: handler/server.py.
RECORD: Final = "oip.loop_shedding.record"
#: ``record(model, version, error, requests)``: counts refused requests as the process's ``InferenceService.refused``
#: does.
Record = Callable[[str, "str | None", Overloaded, int], None]

#: The loop's lag which, held for an interval, marks a standing queue in a loop with no cap (seconds): turns of 30 ms.
STANDING_S: Final = 0.028
#: The lag a capped loop is held to: CoDel's default target (RFC 8289), turns of about 7 ms.
TARGET_S: Final = 0.005
#: How long the lag must stay over its threshold before requests are capped, or the cap shrinks.
INTERVAL_S: Final = 0.1
#: What a probe in a standing queue multiplies the cap by.
DECREASE: Final = 0.9
#: What a late probe multiplies the cap by while the cap refuses, once the loop has been on time since the cap was
#: set (a probe on time while it refuses adds one request to it).
LATE: Final = 0.95
#: How long the cap must refuse nothing before it goes.
RELEASE_S: Final = 1.0
#: The share of the loop's rate under which the requests arriving over a ``WINDOW_S`` leave a capped loop time to
#: spare, and the cap goes: a load past the loop's capacity arrives faster than it answers, one below it slower,
#: however its bursts fill the cap.
SPARE: Final = 0.9
#: How long a window of arrivals is, for ``SPARE``: tens of the load's bursts, a few of the loop's turns at its cap.
WINDOW_S: Final = 0.25
#: The share of the time between two probes the loop's thread must spend on the CPU for a late probe to count.
BUSY: Final = 0.5
#: The fewest answers between two probes from which the loop's rate is measured: a trickle gives one at most, beside
#: whatever else kept the loop's thread busy meanwhile.
MEASURED: Final = 2
#: Time between two probes of the lag.
PROBE_S: Final = 0.002
#: The cap is never below this many requests in the worker.
FLOOR: Final = 32
#: Before any cap, a loop a whole interval late right now (its probe due that long ago and not run: a sudden load's
#: first long turns) refuses past this many requests, or past what it answers in an interval when that is more.
SUDDEN: Final = 256


@functools.lru_cache(maxsize=64)
def overloaded(retry: int) -> Overloaded:
    """The error a request refused by the loop's shedding is answered with, ``retry`` its ``Retry-After``: made once
    per value (it is never raised, only written)."""
    return Overloaded(
        f"the server is behind: its event loop has run over {STANDING_S * 1000:.0f} ms late for "
        f"{INTERVAL_S * 1000:.0f} ms, and it holds as many requests as it answers in time; retry after {retry} s",
        retry_after=retry,
    )


class LoopShedding:
    """One event loop's lag and the cap it implies on ``tasks`` (the loop's requests in flight: uvicorn's set of
    ASGI tasks), ``math.inf`` for none. ``answered`` counts answers, for the loop's rate."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tasks: Sized) -> None:
        self.loop, self.tasks = loop, tasks
        self.cap = math.inf
        self.answered = 0
        #: Inference requests that asked ``refuses`` since the process started (refused or not).
        self.arrived = 0
        #: Requests refused since the process started.
        self.refused = 0
        #: Answers a second, measured between probes while requests are in flight, the loop is busy and answers at
        #: least ``MEASURED`` of them (0 before the first): what the loop answers when it has work, not a trickle's
        #: rate before a sudden load, nor one answer beside a pause of the loop's own (a collection).
        self.rate = 0.0
        self._behind_since: float | None = None
        self._unused_since = 0.0  # since when the cap has refused nothing
        self._settled = False  # whether the loop has been on time since the cap was set
        self._refused_before = 0
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._late_at = math.inf  # the monotonic clock's time past which the loop is an interval late
        self._counted = (0.0, 0)
        self._cpu = 0.0
        #: The loop's time and ``arrived`` when the current window of arrivals began: at the first probe, at the
        #: cap (the requests are counted as they ask ``refuses``, which only a capped loop asks of every one), and
        #: each ``WINDOW_S`` after.
        self.window = (0.0, 0)
        self._window_lag = 0.0  # the longest lag probed in it

    def watch(self) -> None:
        """Probe the lag from now on while requests are in flight (called as each request arrives)."""
        if self._timer is None:
            now = self.loop.time()
            self._counted, self._cpu = (now, self.answered), time.thread_time()
            self.window, self._window_lag = (now, self.arrived), 0.0
            self._schedule(now)

    def behind(self) -> bool:
        """Whether the loop is an interval late right now: its probe has been due that long and has not run."""
        return time.monotonic() > self._late_at

    def refuses(self) -> bool:
        """Whether an inference request arriving now is refused: the loop holds as many requests as its cap; with
        no cap yet, when it is ``behind`` and holds more than ``SUDDEN`` (or than it answers in an interval)."""
        self.arrived += 1
        cap = self.cap
        if cap == math.inf and self.behind():
            cap = max(SUDDEN, self.rate * INTERVAL_S)
        if len(self.tasks) < cap:
            return False
        self.refused += 1
        return True

    def refusal(self) -> Overloaded:
        """The error a refused request is answered with."""
        return overloaded(self.retry_after())

    def retry_after(self) -> int:
        """Seconds until the loop has answered what it holds, from its rate: at least one, rounded up."""
        drain = len(self.tasks) / self.rate if self.rate > 0 else 1.0
        return max(1, math.ceil(drain))

    def judge(self, lag: float, now: float, busy: float = 1.0) -> None:
        """Move the cap for a probe ``lag`` seconds late at ``now``, ``busy`` the share of the time since the last
        probe the loop's thread spent on the CPU."""
        if lag <= (STANDING_S if self.cap == math.inf else TARGET_S) or busy < BUSY:
            self._behind_since = None
        elif self._behind_since is None:
            self._behind_since = now
        standing = self._behind_since is not None and now - self._behind_since >= INTERVAL_S
        refused, self._refused_before = self.refused != self._refused_before, self.refused
        if self.cap == math.inf:
            if standing:
                first = len(self.tasks) * DECREASE
                if self.rate and len(self.tasks) > self.rate * INTERVAL_S:  # more than an interval's answers
                    first = min(first, self.rate * TARGET_S)
                self.cap, self._unused_since, self._settled = max(FLOOR, first), now, False
                self._behind_since = None  # the drain gets an interval of its own before the cap shrinks
                self.window, self._window_lag = (now, self.arrived), 0.0
            return
        if lag <= TARGET_S:
            self._settled = True
            if refused:
                self.cap += 1
        elif not self._settled:  # the backlog that set the cap still draining: a standing queue shrinks it
            if standing:
                self.cap = max(FLOOR, self.cap * DECREASE)
        elif refused and busy >= BUSY:  # a cap that refuses nothing is not what makes the loop late
            self.cap = max(FLOOR, self.cap * LATE)
        if refused:
            self._unused_since = now
        elif now - self._unused_since >= RELEASE_S:
            self.cap = math.inf

    def spare(self, arrival_rate: float) -> None:
        """Judge a window over which requests arrived at ``arrival_rate`` a second: under ``SPARE`` of the loop's
        rate, the loop has time to spare and no cap."""
        if arrival_rate < SPARE * self.rate:
            self.cap, self._behind_since = math.inf, None

    def _schedule(self, now: float) -> None:
        self._due = now + PROBE_S
        self._late_at = time.monotonic() + PROBE_S + INTERVAL_S
        self._timer = self.loop.call_at(self._due, self._probe)

    def _probe(self) -> None:
        now, cpu = self.loop.time(), time.thread_time()
        inflight = len(self.tasks)
        try:
            since, answered = self._counted
            busy = (cpu - self._cpu) / (now - since) if now > since else 1.0
            answers = self.answered - answered
            if inflight and now > since and busy >= BUSY and answers >= MEASURED:
                rate = answers / (now - since)
                self.rate = rate if not self.rate else 0.8 * self.rate + 0.2 * rate
            self._counted, self._cpu = (now, self.answered), cpu
            lag = now - self._due
            self.judge(lag, now, busy)
            self._window_lag = max(self._window_lag, lag)
            began, arrived = self.window
            if now - began >= WINDOW_S:
                if self.cap != math.inf and self._window_lag <= STANDING_S:
                    self.spare((self.arrived - arrived) / (now - began))
                self.window, self._window_lag = (now, self.arrived), 0.0
        finally:  # the probe goes on whatever a judgement raised
            if inflight or self.cap != math.inf:
                self._schedule(now)
            else:
                self._timer, self._late_at = None, math.inf
