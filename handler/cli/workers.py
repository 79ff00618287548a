"""``Workers``: the supervisor of ``oip serve --workers N``, forking uvicorn servers that share one listening socket.

Each worker is a process forked from the supervisor (multiprocessing's ``fork`` context) after it imported the
app's modules (``handler.server.preload``), so a worker starts with numpy, FastAPI and our modules imported, as
gunicorn's preloaded workers do, and runs ``uvicorn.Server(config).run(sockets=...)``: uvicorn's own server with
its own SIGTERM handling (stop accepting, let requests in flight finish within ``timeout_graceful_shutdown``).
The supervisor, single-threaded, waits on its workers' sentinels and on the signals it is sent:

- a worker that dies is replaced; one that exits with uvicorn's startup failure (3: the app could not be built,
  e.g. a model that does not load) stops ``oip serve`` with that code instead, since its replacement would fail
  the same way;
- SIGTERM, SIGINT or SIGQUIT: every worker gets SIGTERM and drains; the supervisor waits for them (a worker still
  there ``timeout_graceful_shutdown`` + 10 s later is killed) and returns 0; a second one reaches the workers as
  SIGINT, on which uvicorn stops waiting for requests in flight;
- SIGHUP: every worker is replaced by a fresh one (started first, then the old one drains); SIGTTIN one worker
  more, SIGTTOU one fewer (never below one): uvicorn's supervisor's signals. SIGUSR1, SIGUSR2 and SIGWINCH are
  caught and do nothing, as there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Final

import uvicorn

from handler.cli.serve import STARTUP_FAILURE

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
#: Caught and let be, as uvicorn's supervisor does (SIGUSR1 and SIGUSR2 would otherwise end the supervisor alone).
IGNORED: Final = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH)
SIGNALS: Final = (*STOP_SIGNALS, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, *IGNORED)
#: How much longer than its graceful-shutdown timeout a draining worker may take before it is killed.
KILL_MARGIN_SECONDS: Final = 10.0
logger = logging.getLogger("uvicorn.error")


def _serve(config: uvicorn.Config, sockets: list[socket.socket], wakeup: list[socket.socket]) -> None:
    """A worker: the signal handling of a fresh interpreter, then uvicorn's server until it stops."""
    signal.set_wakeup_fd(-1)
    for end in wakeup:
        end.close()
    for signum in SIGNALS:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)


class Workers:
    """Fork ``count`` workers serving ``config`` on ``sockets``, keep them running, stop them on a signal."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], count: int) -> None:
        self.config, self.sockets, self.count = config, sockets, count
        self.context = multiprocessing.get_context("fork")
        self.processes: list[BaseProcess] = []
        self.retired: list[BaseProcess] = []  # replaced (SIGHUP) or dropped (SIGTTOU), still draining
        self.received: list[int] = []
        self.stopping = False
        self.exit_code = 0
        # Signals wake the supervisor through this pair (signal.set_wakeup_fd) while it waits on its workers.
        self.wakeup = socket.socketpair()
        for end in self.wakeup:
            end.setblocking(False)

    def run(self) -> int:
        """Serve until a stop signal (0) or a worker's startup failure (3)."""
        previous = {signum: signal.signal(signum, self._receive) for signum in SIGNALS}
        previous_fd = signal.set_wakeup_fd(self.wakeup[1].fileno())
        try:
            logger.info("Started parent process [%d]", os.getpid())
            for _ in range(self.count):
                self.processes.append(self._start())
            while not self.stopping:
                wait([*(process.sentinel for process in [*self.processes, *self.retired]), self.wakeup[0]])
                with contextlib.suppress(BlockingIOError):
                    self.wakeup[0].recv(4096)
                self._handle_signals()
                self._replace_the_dead()
            self._stop_all()
            logger.info("Stopping parent process [%d]", os.getpid())
            return self.exit_code
        finally:
            signal.set_wakeup_fd(previous_fd)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for end in self.wakeup:
                end.close()

    def _receive(self, signum: int, frame: object) -> None:
        self.received.append(signum)

    def _start(self) -> BaseProcess:
        process = self.context.Process(target=_serve, args=(self.config, self.sockets, list(self.wakeup)))
        process.start()
        return process

    def _handle_signals(self) -> None:
        while self.received and not self.stopping:
            signum = self.received.pop(0)
            if signum in STOP_SIGNALS:
                logger.info("Received %s, stopping the workers.", signal.Signals(signum).name)
                self.stopping = True
            elif signum == signal.SIGHUP:
                logger.info("Received SIGHUP, replacing the workers.")
                for index, old in enumerate(self.processes):
                    self.processes[index] = self._start()
                    self._terminate(old)
            elif signum == signal.SIGTTIN:
                self.processes.append(self._start())
            elif signum == signal.SIGTTOU and len(self.processes) > 1:
                self._terminate(self.processes.pop())

    def _terminate(self, process: BaseProcess) -> None:
        """SIGTERM: the worker drains and exits; joined by ``_replace_the_dead`` or ``_stop_all``."""
        if process.exitcode is None:
            process.terminate()
        self.retired.append(process)

    def _replace_the_dead(self) -> None:
        for process in [p for p in self.retired if p.exitcode is not None]:
            process.join()
            self.retired.remove(process)
        for index, process in enumerate(self.processes):
            if self.stopping or process.exitcode is None:
                continue
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                logger.error("Worker [%d] failed to start: stopping.", process.pid)
                self.stopping, self.exit_code = True, STARTUP_FAILURE
                return
            logger.info("Worker [%d] died (exit code %s): starting another.", process.pid, process.exitcode)
            self.processes[index] = self._start()

    def _stop_all(self) -> None:
        """SIGTERM to every worker, then wait for them to drain; a second stop signal reaches them as SIGINT."""
        running = [*self.processes, *self.retired]
        for process in running:
            if process.exitcode is None:
                process.terminate()
        grace = self.config.timeout_graceful_shutdown
        deadline = math.inf if grace is None else time.monotonic() + grace + KILL_MARGIN_SECONDS
        while (left := [p for p in running if p.exitcode is None]) and time.monotonic() < deadline:
            wait([*(p.sentinel for p in left), self.wakeup[0]], min(deadline - time.monotonic(), 3600))
            with contextlib.suppress(BlockingIOError):
                self.wakeup[0].recv(4096)
            if any(signum in STOP_SIGNALS for signum in self.received):
                for process in left:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGINT)  # type: ignore[arg-type]
            self.received.clear()
        for process in running:
            if process.exitcode is None:
                logger.warning("Worker [%d] did not drain in time: killed.", process.pid)
                process.kill()
            process.join()
