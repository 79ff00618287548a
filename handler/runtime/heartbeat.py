"""A worker's proof that its event loop runs: bytes through a pipe to its supervisor, or a watchdog thread.

Under ``oip serve``'s supervisor (handler/cli/workers.py) each worker writes ``ALIVE`` to its own pipe from its
event loop (uvicorn's tick) at least every ``interval`` seconds, and ``SERVED`` once it has answered its
``--max-requests``; the supervisor reads them (``read_beats``) and replaces a worker silent for ``--worker-timeout``
seconds, as gunicorn's arbiter does with its workers' temporary files and uvicorn's supervisor with its ping pipes.
A write that finds the pipe closed means the supervisor is gone. With one worker and no supervisor, a
``Watchdog`` thread of the serving process ends it when its loop stops beating.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Final

#: The event loop ran.
ALIVE: Final = b"."
#: The worker has answered its ``--max-requests``: the supervisor starts its replacement, then stops it.
SERVED: Final = b"M"
#: The exit code of a process whose event loop the watchdog found stuck (``EX_SOFTWARE``).
STUCK_EXIT: Final = 70
logger = logging.getLogger("uvicorn.error")


def beat_interval(timeout: float) -> float:
    """Seconds between two beats for a ``--worker-timeout`` of ``timeout`` (0: off): a quarter of it, at most 1 s."""
    return min(1.0, timeout / 4) if timeout > 0 else 1.0


class Heartbeat:
    """The worker's end of its heartbeat pipe (``fd``, written without blocking)."""

    def __init__(self, fd: int, interval: float) -> None:
        self.fd, self.interval = fd, interval
        self.last = -float("inf")
        os.set_blocking(fd, False)

    def beat(self, now: float) -> bool:
        """Write ``ALIVE`` when ``interval`` has passed since the last beat; False once the supervisor is gone."""
        if now - self.last < self.interval:
            return True
        self.last = now
        return self._write(ALIVE)

    def served(self) -> bool:
        """Tell the supervisor this worker has answered its ``--max-requests``; False once it is gone."""
        return self._write(SERVED)

    def _write(self, message: bytes) -> bool:
        try:
            os.write(self.fd, message)
        except BlockingIOError:  # a full pipe: the supervisor has beats enough to read
            return True
        except OSError:  # EPIPE: no reader left
            return False
        return True


def read_beats(fd: int) -> bytes | None:
    """What a worker wrote to its pipe since the last read (empty: nothing); None once its write end is closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return None if not chunks else b"".join(chunks)
        chunks.append(chunk)


class Watchdog:
    """A daemon thread that ends the process (``STUCK_EXIT``, after every thread's traceback on stderr) when
    ``beat`` has not been called for ``timeout`` seconds since the first call."""

    def __init__(self, timeout: float, exit: Callable[[int], object] = os._exit) -> None:
        self.timeout, self.exit = timeout, exit
        self.last: float | None = None
        self.thread = threading.Thread(target=self._watch, name="oip-watchdog", daemon=True)
        self.stopped = threading.Event()

    def beat(self) -> None:
        if self.last is None and not self.thread.is_alive():
            self.thread.start()
        self.last = time.monotonic()

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while not self.stopped.wait(beat_interval(self.timeout)):
            try:
                silent = time.monotonic() - (self.last or time.monotonic())
                if silent > self.timeout:
                    logger.error("The event loop has not run for %.0f s (--worker-timeout, OIP_WORKER_TIMEOUT): "
                                 "exiting with code %d.", silent, STUCK_EXIT)  # fmt: skip
                    faulthandler.dump_traceback(sys.stderr, all_threads=True)
                    self.exit(STUCK_EXIT)
                    return
            except Exception:  # a watchdog that raised would watch no more: log it and keep watching
                logger.exception("The watchdog failed; it keeps watching.")
