"""``Workers``: the supervisor of ``oip serve --workers N``, forking uvicorn servers that share one listening socket.

Each worker is a process forked from the supervisor (multiprocessing's ``fork`` context) after it imported the
app's modules (``handler.server.preload``), so a worker starts with numpy, FastAPI and our modules imported, as
gunicorn's preloaded workers do, and runs ``WorkerServer`` (handler/cli/worker.py), uvicorn's server with a
heartbeat. The supervisor, single-threaded, waits on its workers' sentinels, their heartbeat pipes and the signals
it is sent:

- a worker that dies after serving is replaced at once; one that dies before serving or soon after is started
  again after a delay that doubles, and too many such deaths stop ``oip serve`` with exit code 1
  (handler/cli/restarts.py). A worker that exits 3 (its app could not be built) before any worker has served stops
  ``oip serve`` with that code at once;
- a worker whose heartbeat stops for ``worker_timeout`` seconds is sent SIGABRT (its threads' tracebacks go to the
  log), SIGKILL ``ABORT_GRACE_SECONDS`` later, and replaced at once;
- a worker that has answered its ``max_requests`` is replaced: its replacement starts, and once that one serves
  the old one gets SIGTERM and drains;
- SIGTERM, SIGINT or SIGQUIT: the supervisor closes its copy of the listening socket (a new connection is refused
  once the workers have closed theirs), every worker gets SIGTERM and drains; the supervisor waits for them (a
  worker still there ``timeout_graceful_shutdown`` + 10 s later is killed) and returns 0; a second one reaches the
  workers as SIGINT, on which uvicorn stops waiting for requests in flight;
- SIGHUP replaces every worker from the code the supervisor loaded (no re-import): each replacement starts first,
  and its old worker drains once it serves; a replacement that cannot start leaves its old worker serving. SIGTTIN
  starts one worker more, SIGTTOU stops one (never the last); SIGUSR1, SIGUSR2 and SIGWINCH are caught and do
  nothing.

Every worker (and the metrics process) gets SIGTERM from the kernel when the supervisor dies
(handler/runtime/parent.py). With a metrics port, one more process forked the same way serves the Prometheus
endpoint (handler/observability/exporter.py), replaced when it dies and stopped last. A worker that ends keeps its
statistics counters, and its pending requests count as failed (handler/protocol/statistics_counters.py's ``retire``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import random
import signal
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import Final

import uvicorn

from handler.cli.metrics_endpoint import MetricsEndpoint
from handler.cli.restarts import Restarts
from handler.cli.worker import SIGNALS, STOP_SIGNALS, export, forked, serve
from handler.runtime.heartbeat import SERVED, beat_interval, read_beats
from handler.runtime.startup import STARTUP_FAILURE

#: How much longer than its graceful-shutdown timeout a draining worker may take before it is killed.
KILL_MARGIN_SECONDS: Final = 10.0
#: How long a stuck worker has, after SIGABRT, to write its tracebacks and end before it is killed.
ABORT_GRACE_SECONDS: Final = 5.0
#: ``oip serve``'s exit code when its workers keep dying right after they start.
CRASH_LOOP: Final = 1
logger = logging.getLogger("uvicorn.error")


@dataclass(frozen=True)
class Supervision:
    """How the supervisor watches its workers: ``worker_timeout`` seconds of silence (0: never), and the HTTP
    requests after which a worker is replaced (``max_requests`` plus up to ``max_requests_jitter``; 0: never)."""

    worker_timeout: float = 60.0
    max_requests: int = 0
    max_requests_jitter: int = 0
    stats_dir: str | None = None

    def request_limit(self) -> int | None:
        """One worker's limit, drawn for it."""
        if not self.max_requests:
            return None
        return self.max_requests + random.randint(0, self.max_requests_jitter)


@dataclass
class Worker:
    """A worker process, the supervisor's end of its heartbeat pipe, and what the supervisor knows of it."""

    process: BaseProcess
    beats: int  # -1 once its write end is closed
    started: float
    served: float | None = None  # its first heartbeat
    last_beat: float = 0.0
    kill_at: float = math.inf  # SIGKILL then (stuck, or draining past its time)
    replaces: Worker | None = None  # the worker it takes over from once it serves (SIGHUP, max requests)
    replaced_by: Worker | None = None

    @property
    def pid(self) -> int:
        return self.process.pid or 0


def _cause(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


class Workers:
    """Fork ``count`` workers serving ``config`` on ``sockets``, keep them running, stop them on a signal."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], count: int,
                 metrics: MetricsEndpoint | None = None, supervision: Supervision | None = None) -> None:  # fmt: skip
        self.config, self.sockets, self.count, self.metrics = config, sockets, count, metrics
        self.supervision = supervision or Supervision(stats_dir=metrics.stats_dir if metrics else None)
        self.exporter: BaseProcess | None = None
        self.context = multiprocessing.get_context("fork")
        self.workers: list[Worker] = []  # serving, or starting to
        self.incoming: list[Worker] = []  # replacements (SIGHUP, max requests) not serving yet
        self.retired: list[Worker] = []  # replaced, dropped (SIGTTOU) or stuck: on their way out
        self.due: list[float] = []  # when the workers that died early are started again
        self.restarts = Restarts()
        self.received: list[int] = []
        self.stopping = False
        self.has_served = False
        self.exit_code = 0
        # Signals wake the supervisor through this pair (signal.set_wakeup_fd) while it waits on its workers.
        self.wakeup = socket.socketpair()
        for end in self.wakeup:
            end.setblocking(False)

    def run(self) -> int:
        """Serve until a stop signal (0), a startup failure (3) or a crash loop (1)."""
        previous = {signum: signal.signal(signum, self._receive) for signum in SIGNALS}
        previous_fd = signal.set_wakeup_fd(self.wakeup[1].fileno())
        try:
            logger.info("Started parent process [%d]", os.getpid())
            self.workers = [self._start() for _ in range(self.count)]
            self._start_exporter()
            while not self.stopping:
                ready = wait([*self._waited(), self.wakeup[0]], self._timeout())
                with contextlib.suppress(BlockingIOError):
                    self.wakeup[0].recv(4096)
                self._read_heartbeats([fd for fd in ready if isinstance(fd, int)])
                self._handle_signals()
                self._reap()
                self._watch(time.monotonic())
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

    def _all(self) -> list[Worker]:
        return [*self.workers, *self.incoming, *self.retired]

    def _waited(self) -> list[int]:
        exporter = [self.exporter.sentinel] if self.exporter is not None else []
        return [*(w.process.sentinel for w in self._all()), *(w.beats for w in self._all() if w.beats >= 0), *exporter]

    def _timeout(self) -> float | None:
        """Seconds until the next thing to do without a wake-up: a delayed start, a heartbeat due, a kill."""
        timeout = self.supervision.worker_timeout
        moments = [*self.due, *(w.kill_at for w in self._all())]
        if timeout > 0:
            moments += [w.last_beat + timeout for w in [*self.workers, *self.incoming] if w.served is not None]
        soonest = min(moments, default=math.inf)
        return None if soonest == math.inf else max(0.0, soonest - time.monotonic())

    def _start(self, replaces: Worker | None = None) -> Worker:
        closed = [*self.wakeup, *([self.metrics.sock] if self.metrics is not None else [])]
        fds = [w.beats for w in self._all() if w.beats >= 0]
        read_end, write_end = os.pipe()
        interval = beat_interval(self.supervision.worker_timeout)
        args = (self.config, self.sockets, closed, [*fds, read_end], os.getpid(), write_end, interval,
                self.supervision.request_limit())  # fmt: skip
        process = self.context.Process(target=serve, args=args)
        try:
            forked(process)
        finally:
            os.close(write_end)
        os.set_blocking(read_end, False)
        worker = Worker(process, read_end, time.monotonic(), replaces=replaces)
        if replaces is not None:
            replaces.replaced_by = worker
        return worker

    def _start_exporter(self) -> None:
        if self.metrics is not None:
            closed = [*self.wakeup, *self.sockets]
            fds = [w.beats for w in self._all() if w.beats >= 0]
            args = (self.metrics, closed, fds, os.getpid())
            self.exporter = self.context.Process(target=export, args=args)
            forked(self.exporter)

    def _read_heartbeats(self, ready: list[int]) -> None:
        now = time.monotonic()
        for worker in self._all():
            if worker.beats < 0 or worker.beats not in ready:
                continue
            beats = read_beats(worker.beats)
            if beats is None:
                os.close(worker.beats)
                worker.beats = -1
            if beats:
                worker.last_beat = now
                if worker.served is None:
                    worker.served = now
                    logger.debug("Worker [%d] sent its first heartbeat: timed from now (--worker-timeout).", worker.pid)
                    self.has_served = True
                    self._serving(worker)
                if SERVED in beats and worker in self.workers and worker.replaced_by is None and not self.stopping:
                    logger.info("Worker [%d] answered its --max-requests: starting its replacement.", worker.pid)
                    self.incoming.append(self._start(replaces=worker))

    def _serving(self, worker: Worker) -> None:
        """A replacement that serves takes its old worker's place; the old one drains."""
        if worker not in self.incoming:
            return
        self.incoming.remove(worker)
        old = worker.replaces
        if old is not None and old in self.workers:
            self.workers[self.workers.index(old)] = worker
            self._terminate(old)
        else:
            self.workers.append(worker)

    def _handle_signals(self) -> None:
        while self.received and not self.stopping:
            signum = self.received.pop(0)
            if signum in STOP_SIGNALS:
                logger.info("Received %s, stopping the workers.", signal.Signals(signum).name)
                self.stopping = True
            elif signum == signal.SIGHUP:
                logger.info("Received SIGHUP, replacing the workers.")
                for old in [w for w in self.workers if w.replaced_by is None]:
                    self.incoming.append(self._start(replaces=old))
            elif signum == signal.SIGTTIN:
                self.workers.append(self._start())
            elif signum == signal.SIGTTOU and len(self.workers) > 1:
                self._terminate(self.workers.pop())

    def _terminate(self, worker: Worker) -> None:
        """SIGTERM: the worker drains and exits, or is killed once its drain has had its time."""
        if worker.process.exitcode is None:
            worker.process.terminate()
        grace = self.config.timeout_graceful_shutdown or 0
        worker.kill_at = min(worker.kill_at, time.monotonic() + grace + KILL_MARGIN_SECONDS)
        self.retired.append(worker)

    def _ended(self, worker: Worker) -> None:
        """A worker that exited: joined, its pipe closed, the requests it never answered counted as failed."""
        worker.process.join()
        if worker.beats >= 0:
            os.close(worker.beats)
            worker.beats = -1
        if self.supervision.stats_dir is not None and worker.process.pid is not None:
            from handler.protocol.statistics_counters import retire

            retire(self.supervision.stats_dir, worker.process.pid)

    def _reap(self) -> None:
        for worker in [w for w in self.retired if w.process.exitcode is not None]:
            self._ended(worker)
            self.retired.remove(worker)
        if self.exporter is not None and self.exporter.exitcode is not None and not self.stopping:
            self.exporter.join()
            logger.info("Metrics process [%d] %s: starting another.", self.exporter.pid, _cause(self.exporter.exitcode))
            self._start_exporter()
        for worker in [w for w in self.incoming if w.process.exitcode is not None]:
            self._ended(worker)
            self.incoming.remove(worker)
            old = worker.replaces
            if old is not None and old in self.workers:
                old.replaced_by = None
                logger.error("Replacement worker [%d] %s before it served: worker [%d] keeps serving.",
                             worker.pid, _cause(worker.process.exitcode), old.pid)  # fmt: skip
            else:  # its old worker is gone: a place to fill
                self._restart(worker)
        for worker in [w for w in self.workers if w.process.exitcode is not None]:
            if self.stopping:
                return
            self._ended(worker)
            self._died(worker)

    def _died(self, worker: Worker) -> None:
        """A serving worker died: replaced at once, later (an early death), or never (a startup failure, a crash
        loop: ``oip serve`` stops)."""
        if worker.process.exitcode == STARTUP_FAILURE and not self.has_served:
            logger.error("Worker [%d] failed to start: stopping.", worker.pid)
            self.stopping, self.exit_code = True, STARTUP_FAILURE
            return
        self.workers.remove(worker)
        if worker.replaced_by is not None:  # its replacement, already starting, takes the free place
            logger.warning("Worker [%d] %s: its replacement [%d] takes its place.", worker.pid,
                           _cause(worker.process.exitcode), worker.replaced_by.pid)  # fmt: skip
            worker.replaced_by.replaces = None
            return
        self._restart(worker)

    def _restart(self, worker: Worker) -> None:
        """Another worker in the place of ``worker``, which died: at once, or after a delay if it died early."""
        now, exitcode = time.monotonic(), worker.process.exitcode
        if not self.restarts.early(now, worker.served):
            logger.warning("Worker [%d] %s: starting another.", worker.pid, _cause(exitcode))
            self.workers.append(self._start())
            return
        delay = self.restarts.delay(now)
        after = f"{now - worker.started:.1f} s after it started"
        if delay is None:
            logger.error("Worker [%d] %s %s, the %dth early death within %.0f s: stopping.", worker.pid,
                         _cause(exitcode), after, len(self.restarts.deaths), now - self.restarts.deaths[0])  # fmt: skip
            self.stopping, self.exit_code = True, CRASH_LOOP
            return
        logger.warning("Worker [%d] %s %s: starting another in %.1f s.", worker.pid, _cause(exitcode), after, delay)
        self.due.append(now + delay)

    def _watch(self, now: float) -> None:
        """Start the workers whose delay has passed, abort the silent ones, kill the ones past their time."""
        if self.stopping:
            return
        for moment in [m for m in self.due if m <= now]:
            self.due.remove(moment)
            self.workers.append(self._start())
        timeout = self.supervision.worker_timeout
        for worker in [*self.workers, *self.incoming]:
            if timeout > 0 and worker.served is not None and now - worker.last_beat > timeout:
                logger.error("Worker [%d] sent no heartbeat for %.0f s (--worker-timeout): aborted (SIGABRT) and "
                             "replaced.", worker.pid, now - worker.last_beat)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGABRT)
                worker.kill_at = now + ABORT_GRACE_SECONDS
                self.retired.append(worker)
                if worker in self.workers:
                    self.workers[self.workers.index(worker)] = self._start()
                else:
                    self.incoming.remove(worker)
        for worker in self.retired:
            if worker.kill_at <= now and worker.process.exitcode is None:
                logger.warning("Worker [%d] did not end in time: killed.", worker.pid)
                worker.process.kill()
                worker.kill_at = math.inf

    def _stop_all(self) -> None:
        """Stop accepting (the supervisor's listening sockets closed), SIGTERM to every worker, then wait for them
        to drain; a second stop signal reaches them as SIGINT."""
        for sock in self.sockets:
            sock.close()
        running = self._all()
        for worker in running:
            if worker.process.exitcode is None:
                worker.process.terminate()
        grace = self.config.timeout_graceful_shutdown
        deadline = math.inf if grace is None else time.monotonic() + grace + KILL_MARGIN_SECONDS
        while (left := [w for w in running if w.process.exitcode is None]) and time.monotonic() < deadline:
            for worker in left:
                if worker.kill_at <= time.monotonic():  # stuck: its SIGABRT's grace is over
                    worker.process.kill()
            soonest = min([deadline, *(w.kill_at for w in left)])
            wait([*(w.process.sentinel for w in left), self.wakeup[0]], min(max(0.0, soonest - time.monotonic()), 3600))
            with contextlib.suppress(BlockingIOError):
                self.wakeup[0].recv(4096)
            if any(signum in STOP_SIGNALS for signum in self.received):
                for worker in left:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, signal.SIGINT)
            self.received.clear()
        for worker in running:
            if worker.process.exitcode is None:
                logger.warning("Worker [%d] did not drain in time: killed.", worker.pid)
                worker.process.kill()
            self._ended(worker)
        if self.exporter is not None:  # last: a scrape during the drain still answers
            if self.exporter.exitcode is None:
                self.exporter.terminate()
            self.exporter.join(KILL_MARGIN_SECONDS)
            if self.exporter.exitcode is None:
                self.exporter.kill()
                self.exporter.join()
