"""``Restarts``: when ``oip serve``'s supervisor starts a worker that died early again, and when it gives up.

A worker dies early when it dies before it served (its first heartbeat) or within ``EARLY_SECONDS`` of it. Each
early death waits longer before the next start (``FIRST_DELAY`` doubling up to ``MAX_DELAY`` seconds, as the
early deaths within the window add up); ``BURST`` early deaths within ``WINDOW`` seconds stop the server, as
systemd's ``StartLimitBurst`` and ``StartLimitIntervalSec`` stop a unit. A worker that dies after serving longer is
replaced at once and does not count.
"""

from __future__ import annotations

from collections import deque
from typing import Final

EARLY_SECONDS: Final = 5.0
FIRST_DELAY: Final = 0.1
MAX_DELAY: Final = 10.0
BURST: Final = 10
WINDOW: Final = 120.0


class Restarts:
    """The early deaths of the last ``WINDOW`` seconds, and what each one means for the next start."""

    def __init__(self) -> None:
        self.deaths: deque[float] = deque()

    @staticmethod
    def early(now: float, served: float | None) -> bool:
        """Whether a worker that first served at ``served`` (None: never) and died at ``now`` died early."""
        return served is None or now - served < EARLY_SECONDS

    def delay(self, now: float) -> float | None:
        """Count an early death at ``now``: the seconds to wait before starting another worker, or None when this
        one makes ``BURST`` within ``WINDOW`` seconds (stop the server)."""
        while self.deaths and now - self.deaths[0] > WINDOW:
            self.deaths.popleft()
        self.deaths.append(now)
        if len(self.deaths) >= BURST:
            return None
        return min(MAX_DELAY, FIRST_DELAY * 2 ** (len(self.deaths) - 1))
