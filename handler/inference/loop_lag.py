"""The worker's own overload: CoDel over the event loop's lag, for the queue that no model's gate sees.

A model's gate (``admission.py``) bounds the wait in front of the model. A fast model's requests wait elsewhere: in
the kernel's socket buffers and the event loop's ready queue, where HTTP parsing, JSON decoding and every other
request share one thread. Offered more than that thread serves, every request (health and metadata too) waits
longer and longer, while each model's gate sees an idle model.

``LoopLag`` measures that wait as the loop's lag: a probe asks to wake every ``PROBE_S`` and records how late it
woke. As CoDel treats a queue's sojourn time, a lag above ``TARGET_S`` for a whole ``INTERVAL_S`` means a standing
queue, not a burst: the worker then admits only a share of the new inference requests and refuses the others at
once (503 / ``UNAVAILABLE``, before their bodies are read), halving the share for each further interval the lag
stays above target; each probe below target gives back a little (``RECOVERY``), so the share settles where the loop
keeps up. Health, metadata, statistics and metrics are never refused: they are answered as soon as the loop reaches
them.

The probe runs in ``oip serve``'s workers (``watch``); on Lambda, where one request at a time reaches an execution
environment, nothing is watched and every request is admitted.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

#: The lag the loop may run behind (s): past it for a whole interval, the worker refuses a share of the requests.
TARGET_S: Final = 0.02
#: How long the lag must stay above target before (each further) halving of the admitted share (s).
INTERVAL_S: Final = 0.1
#: How often the probe asks to wake (s).
PROBE_S: Final = 0.01
#: The admitted share that is never gone below: some requests still pass, and measure the way back.
LEAST_SHARE: Final = 1 / 64
#: The share given back by each probe below target: from the least share to all in about half a second.
RECOVERY: Final = 0.02
logger = logging.getLogger("uvicorn.error")


class LoopLag:
    """The loop's measured lag, and the share of inference requests the worker admits because of it."""

    __slots__ = ("above_since", "credit", "lag_s", "refused", "share", "watching")

    def __init__(self) -> None:
        #: The lag of the last probe (s).
        self.lag_s = 0.0
        #: When the lag went above target and has stayed there since (loop time), None when it is below.
        self.above_since: float | None = None
        #: The share of new inference requests admitted (1: all).
        self.share = 1.0
        #: The admitted share's running credit: a request is admitted for each whole unit (a deterministic spread).
        self.credit = 0.0
        #: Requests refused since the process started.
        self.refused = 0
        self.watching = False

    def sample(self, lag_s: float, now: float) -> None:
        """One probe's lag, measured at ``now`` (loop time)."""
        self.lag_s = lag_s
        if lag_s <= TARGET_S:
            self.above_since = None
            if self.share < 1.0:
                self.share = min(1.0, self.share + RECOVERY)
                if self.share == 1.0:
                    logger.info("The event loop keeps up again: every inference request is admitted.")
            return
        if self.above_since is None:
            self.above_since = now
        elif now - self.above_since >= INTERVAL_S:
            if self.share == 1.0:
                logger.warning(
                    "The event loop runs %.0f ms behind (over %.0f ms for %.0f ms): refusing a share of the "
                    "inference requests until it keeps up.",
                    lag_s * 1000,
                    TARGET_S * 1000,
                    INTERVAL_S * 1000,
                )
            self.share = max(LEAST_SHARE, self.share / 2)
            self.above_since = now  # the next halving after another whole interval above target

    def admits(self) -> bool:
        """Whether to admit one more inference request now (counted in ``refused`` when not)."""
        if self.share >= 1.0:
            return True
        self.credit += self.share
        if self.credit >= 1.0:
            self.credit -= 1.0
            return True
        self.refused += 1
        return False

    async def watch(self) -> None:
        """The probe, until cancelled: each wake-up's lateness is one sample."""
        loop = asyncio.get_running_loop()
        self.watching = True
        try:
            while True:
                due = loop.time() + PROBE_S
                await asyncio.sleep(PROBE_S)
                now = loop.time()
                self.sample(max(now - due, 0.0), now)
        finally:
            self.watching = False
