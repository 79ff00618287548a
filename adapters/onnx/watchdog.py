"""Stops onnxruntime runs at their request's deadline: ``RunOptions.terminate``, set by one thread for all runs.

onnxruntime checks the flag between a graph's nodes and then fails the run ("Exiting due to terminate flag being
set to true"); a run on the event loop's own thread (Lambda runs inline) is stopped the same way. One daemon
thread, started on the first run that has a deadline, sleeps until the earliest one; a run that ends first takes
its entry back (``Watch.done``), so an armed flag never reaches a later run (each run has its own ``RunOptions``).

The thread serves every run of the process, so nothing one request gives may stop it: a deadline past
``MAX_DURATION_S`` (or not a number) is watched as that far away, and an exception in its loop is logged once, the
entry that raised it dropped, and the loop goes on (a thread that ended anyway, or the lack of one in a forked
child, is made good by the next run).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from typing import Any

from adapters.deadline import MAX_DURATION_S

logger = logging.getLogger(__name__)


class Watch:
    """One run's ``RunOptions`` and whether the watchdog stopped it."""

    __slots__ = ("ended", "fired", "options")

    def __init__(self, options: Any) -> None:
        self.options = options
        self.fired = False
        self.ended = False

    def done(self) -> None:
        """The run ended: leave it alone (its entry is dropped when its time comes)."""
        self.ended = True


class Watchdog:
    """Sets ``terminate`` on each watched run's options at its deadline (``time.monotonic()`` seconds)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        #: The thread while its loop runs (None before the first watched run, and once the loop has ended).
        self._thread: threading.Thread | None = None
        #: Exceptions the loop survived (the first is logged).
        self.failures = 0

    def forked(self) -> None:
        """In a forked child: no thread, no runs, and a lock that no thread of the parent holds."""
        self._heap = []
        self._changed = threading.Condition()
        self._thread = None

    def watch(self, options: Any, at: float) -> Watch:
        """Stop the run made with ``options`` at ``at`` unless it ends first (``Watch.done``); ``at`` at most
        ``MAX_DURATION_S`` from now."""
        watch = Watch(options)
        latest = time.monotonic() + MAX_DURATION_S
        if not at <= latest:  # also NaN, which would break the heap's order
            at = latest
        with self._changed:
            if len(self._heap) >= 1024:  # runs that ended long before their deadline: drop them now
                self._heap = [entry for entry in self._heap if not entry[2].ended]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (at, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="oip-run-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is watch:
                self._changed.notify()
        return watch

    def _loop(self) -> None:
        try:
            with self._changed:
                while True:
                    head = self._heap[0] if self._heap else None
                    try:
                        self._step()
                    except Exception:  # one bad entry must not end the watch of every other run
                        self._survive(head)
        finally:  # ended anyway: the next watched run starts another
            self._thread = None

    def _step(self) -> None:
        """Wait for the earliest deadline, or act on it (the lock held)."""
        if not self._heap:
            self._changed.wait()
            return
        at, _, watch = self._heap[0]
        wait = at - time.monotonic()
        if watch.ended:
            heapq.heappop(self._heap)
        elif wait > 0:
            self._changed.wait(min(wait, MAX_DURATION_S))
        else:
            heapq.heappop(self._heap)
            watch.fired = True
            watch.options.terminate = True

    def _survive(self, head: tuple[float, int, Watch] | None) -> None:
        """After an exception in the loop: log the first one, drop the entry it came from if it is still first."""
        self.failures += 1
        if self.failures == 1:
            logger.exception("the run watchdog skipped a deadline it could not act on, and goes on")
        if head is not None and self._heap and self._heap[0] is head:
            heapq.heappop(self._heap)


#: The process's watchdog.
WATCHDOG = Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.forked)
