"""``WorkerServer``: uvicorn's server as one ``oip serve`` worker runs it, with or without a supervisor.

Beside what uvicorn does, through its public methods (``on_tick``, ``handle_exit``):

- each tick of the event loop beats: to the supervisor's pipe (handler/runtime/heartbeat.py), or to the watchdog
  thread that ends a process with no supervisor whose loop is stuck;
- after ``max_requests`` HTTP requests it asks the supervisor for its replacement, and keeps serving until the
  supervisor stops it (SIGTERM) once the replacement serves;
- SIGTERM (or SIGINT) begins the one drain of every transport at once (handler/runtime/drain.py: readiness false,
  gRPC stops accepting) and closes the HTTP listeners on the loop's next turn; requests in flight finish within
  ``timeout_graceful_shutdown``, and the server returns instead of raising the signal again, so that a clean
  drain ends the process with 0;
- a pipe found closed (the supervisor is gone) drains the worker as SIGTERM would.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from types import FrameType

import uvicorn

from handler.runtime.drain import begin_drain
from handler.runtime.heartbeat import Heartbeat, Watchdog

logger = logging.getLogger("uvicorn.error")


class WorkerServer(uvicorn.Server):
    """uvicorn's server with a heartbeat, a request limit and a drain that begins at the signal."""

    def __init__(
        self,
        config: uvicorn.Config,
        heartbeat: Heartbeat | None = None,
        watchdog: Watchdog | None = None,
        max_requests: int | None = None,
    ) -> None:
        super().__init__(config)
        self.heartbeat, self.watchdog, self.max_requests = heartbeat, watchdog, max_requests
        self.replacement_asked = False
        self.loop: asyncio.AbstractEventLoop | None = None

    async def on_tick(self, counter: int) -> bool:
        should_exit = await super().on_tick(counter)
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if self.watchdog is not None:
            self.watchdog.beat()
        if self.heartbeat is not None and not self.should_exit:
            if not self.heartbeat.beat(time.monotonic()):
                logger.warning("The supervisor is gone: draining.")
                self.handle_exit(signal.SIGTERM, None)
                return True
            served = self.server_state.total_requests
            if self.max_requests is not None and not self.replacement_asked and served >= self.max_requests:
                self.replacement_asked = True
                self.heartbeat.served()
        return should_exit or self.should_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin the drain (a second SIGINT stops waiting for requests in flight, as uvicorn's does)."""
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True
        if self.watchdog is not None:
            self.watchdog.stop()
        begin_drain()
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop_accepting)

    def _stop_accepting(self) -> None:
        """Close the HTTP listeners now rather than at uvicorn's next tick."""
        for server in getattr(self, "servers", []):
            server.close()
