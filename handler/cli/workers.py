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

With a metrics port, one more process forked the same way serves the Prometheus endpoint
(handler/observability/exporter.py), replaced when it dies and stopped last; a worker that ends keeps its
statistics counters, and its pending requests are dropped (handler/protocol/statistics.py's ``retire``).
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

from handler.cli.serve import STARTUP_FAILURE, MetricsEndpoint

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
#: Caught and let be, as uvicorn's supervisor does (SIGUSR1 and SIGUSR2 would otherwise end the supervisor alone).
IGNORED: Final = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH)
SIGNALS: Final = (*STOP_SIGNALS, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, *IGNORED)
#: How much longer than its graceful-shutdown timeout a draining worker may take before it is killed.
KILL_MARGIN_SECONDS: Final = 10.0
logger = logging.getLogger("uvicorn.error")


def _fresh(closed: list[socket.socket]) -> None:
    """A forked child: the signal handling of a fresh interpreter, and the supervisor's sockets it does not use
    closed."""
    signal.set_wakeup_fd(-1)
    for end in closed:
        end.close()
    for signum in SIGNALS:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    # Blocked since before the fork (``_forked``): one sent to the child until now waited, and is handled as a
    # fresh interpreter would.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def _forked(process: BaseProcess) -> None:
    """Start ``process`` with the supervisor's signals blocked across the fork: a signal sent to the child before it
    has reset its handlers (``_fresh``) would otherwise reach the supervisor's handler there and be lost."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _serve(config: uvicorn.Config, sockets: list[socket.socket], closed: list[socket.socket]) -> None:
    """A worker: uvicorn's server until it stops."""
    _fresh(closed)
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def _export(metrics: MetricsEndpoint, closed: list[socket.socket], supervisor: int) -> None:
    """The metrics process: the Prometheus endpoint until SIGTERM."""
    from handler.observability.exporter import run_exporter

    _fresh(closed)
    run_exporter(metrics.sock, metrics.stats_dir, supervisor)


class Workers:
    """Fork ``count`` workers serving ``config`` on ``sockets``, keep them running, stop them on a signal."""

    def __init__(
        self, config: uvicorn.Config, sockets: list[socket.socket], count: int, metrics: MetricsEndpoint | None = None
    ) -> None:
        self.config, self.sockets, self.count, self.metrics = config, sockets, count, metrics
        self.exporter: BaseProcess | None = None
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
            self._start_exporter()
            while not self.stopping:
                exporter = [self.exporter] if self.exporter is not None else []
                wait([*(process.sentinel for process in [*self.processes, *self.retired, *exporter]), self.wakeup[0]])
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
        closed = [*self.wakeup, *([self.metrics.sock] if self.metrics is not None else [])]
        process = self.context.Process(target=_serve, args=(self.config, self.sockets, closed))
        _forked(process)
        return process

    def _start_exporter(self) -> None:
        if self.metrics is not None:
            closed = [*self.wakeup, *self.sockets]
            self.exporter = self.context.Process(target=_export, args=(self.metrics, closed, os.getpid()))
            _forked(self.exporter)

    def _ended(self, process: BaseProcess) -> None:
        """A worker that exited: joined, and the requests it never answered off the pending count."""
        process.join()
        if self.metrics is not None and process.pid is not None:
            from handler.protocol.statistics import retire

            retire(self.metrics.stats_dir, process.pid)

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
            self._ended(process)
            self.retired.remove(process)
        if self.exporter is not None and self.exporter.exitcode is not None and not self.stopping:
            self.exporter.join()
            logger.info("Metrics process [%d] died (exit code %s): starting another.", self.exporter.pid,
                        self.exporter.exitcode)  # fmt: skip
            self._start_exporter()
        for index, process in enumerate(self.processes):
            if self.stopping or process.exitcode is None:
                continue
            self._ended(process)
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
            self._ended(process)
        if self.exporter is not None:  # last: a scrape during the drain still answers
            if self.exporter.exitcode is None:
                self.exporter.terminate()
            self.exporter.join(KILL_MARGIN_SECONDS)
            if self.exporter.exitcode is None:
                self.exporter.kill()
                self.exporter.join()
