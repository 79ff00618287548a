"""Where a model's next run goes, on the event loop's own thread or in a worker thread, decided from its measured
run time (``OIP_INLINE_RUN_MS``): handing a short run to a worker thread costs more than the run, while a long
run on the event loop holds up every other request and the worker's heartbeat."""

from __future__ import annotations

from typing import Final

#: A run this long sets its model's estimate to itself, so that the next run goes to a worker thread whatever the
#: runs before it took. A run stalled by a busy machine (its thread descheduled) is far shorter.
SLOW_RUN_MS: Final = 100.0


def running_estimate(estimate_ms: float, elapsed_ms: float, inline_ms: float) -> float:
    """The next estimate of a model's run time: an exponential average in which one run counts at most twice
    the estimate plus the inline threshold, so a run stalled by a busy machine (the thread descheduled mid-run)
    does not send a fast model to a worker thread for the next several requests, while a model that really got
    slower moves there after a few runs. The first run, and any run of ``SLOW_RUN_MS`` or more, is the estimate
    as it is: one slow run moves the model off the event loop at once, and its runs come back to it once the
    average of the fast ones after it is under ``inline_ms`` again."""
    if estimate_ms == float("inf") or elapsed_ms >= SLOW_RUN_MS:
        return elapsed_ms
    return 0.8 * estimate_ms + 0.2 * min(elapsed_ms, 2 * estimate_ms + inline_ms)


class Placement:
    """One model version's run-time estimate (ms), and whether its next run is quick enough for the event loop.
    Unmeasured, a model runs in a thread; with ``inline_ms`` infinite (Lambda: no thread to start), always inline."""

    __slots__ = ("estimate_ms", "inline_ms")

    def __init__(self, inline_ms: float) -> None:
        self.inline_ms = inline_ms
        self.estimate_ms = float("inf")

    def inline(self) -> bool:
        return self.estimate_ms < self.inline_ms or self.inline_ms == float("inf")

    def record(self, elapsed_ms: float) -> None:
        """Count a run that took ``elapsed_ms`` (wall time) in the estimate."""
        self.estimate_ms = running_estimate(self.estimate_ms, elapsed_ms, self.inline_ms)
