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

``serve`` and ``export`` are what a process forked by the supervisor runs (``forked``): a worker, and the metrics
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import os
import signal
import socket
import sys
import time
from importlib.util import find_spec
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import TYPE_CHECKING, Final

import uvicorn

from handler.cli.acceptor import Acceptor
from handler.cli.metrics_endpoint import MetricsEndpoint
from handler.rest.probe_answers import PROBES
from handler.runtime.drain import begin_drain
from handler.runtime.heartbeat import Heartbeat, Watchdog
from handler.runtime.parent import die_with_parent
from handler.runtime.startup import STARTUP_FAILURE

if TYPE_CHECKING:
    from handler.cli.probes import Probes

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
#: Caught and let be, as uvicorn's supervisor does (SIGUSR1 and SIGUSR2 would otherwise end the supervisor alone).
IGNORED: Final = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH)
#: The supervisor's signals (handler/cli/workers.py), which a forked child handles as a fresh interpreter does.
SIGNALS: Final = (*STOP_SIGNALS, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, *IGNORED)
#: Seconds between closing a draining worker's listeners and uvicorn's shutdown, which closes every connection that
#: has no request in progress: a client whose connection was accepted just before the close has sent its request
#: by then, and is answered instead of disconnected (as nginx's lingering close and Envoy's drain time allow).
LINGER_S: Final = 0.5
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
        self.draining = False
        self.loop: asyncio.AbstractEventLoop | None = None
        #: The probes' requests its acceptors answer (none before ``startup``).
        self.probes: Probes | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup (the lifespan, then the listeners), with an ``Acceptor`` on each socket in place of the
        loop's own server, which under uvloop takes one connection per turn of the loop (handler/cli/acceptor.py);
        its thread answers a probe's requests with the app's ``ProbeAnswers``, which the app's lifespan state hands
        over (``PROBES``)."""
        await super().startup(sockets=[] if sockets is not None else None)
        if sockets is None or self.should_exit:
            return
        config, state, app_state = self.config, self.server_state, self.lifespan.state
        protocol_class = config.http_protocol_class

        def create_protocol() -> asyncio.Protocol:
            return protocol_class(config=config, server_state=state, app_state=app_state)  # type: ignore[call-arg]

        loop = asyncio.get_running_loop()
        answers = self.lifespan.state.get(PROBES)
        if answers is not None and find_spec("httptools") is not None:  # else uvicorn's h11 answers everything
            from handler.cli.connections import process_limits
            from handler.cli.probes import Probes

            self.probes = Probes(answers, state, process_limits())
        probes = self.probes
        self.servers = [  # type: ignore[misc]
            Acceptor(loop, sock, create_protocol, config.backlog, state.connections, config.limit_concurrency, probes)
            for sock in sockets
        ]

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
            served = self.server_state.total_requests + (self.probes.answered if self.probes else 0)
            if self.max_requests is not None and not self.replacement_asked and served >= self.max_requests:
                self.replacement_asked = True
                self.heartbeat.served()
        return should_exit or self.should_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin the drain: the listeners close at once, uvicorn's shutdown follows ``LINGER_S`` later (a second
        signal stops lingering; a second SIGINT also stops waiting for requests in flight, as uvicorn's does)."""
        if self.draining and sig == signal.SIGINT:
            self.force_exit = True
        if self.watchdog is not None:
            self.watchdog.stop()
        begin_drain()
        loop = self.loop
        if self.draining or loop is None or loop.is_closed():
            self.should_exit = True
        else:
            loop.call_soon_threadsafe(self._stop_accepting)
        self.draining = True

    def _stop_accepting(self) -> None:
        """Close the HTTP listeners now rather than at uvicorn's next tick; shut down ``LINGER_S`` later."""
        for server in getattr(self, "servers", []):
            server.close()
        asyncio.get_running_loop().call_later(LINGER_S, self._shut_down)

    def _shut_down(self) -> None:
        self.should_exit = True


def fresh(closed: list[socket.socket], fds: list[int], supervisor: int) -> None:
    """A forked child: the signal handling of a fresh interpreter, the supervisor's sockets and pipes it does not
    use closed, and SIGTERM from the kernel when the supervisor dies."""
    signal.set_wakeup_fd(-1)
    for end in closed:
        end.close()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    for signum in SIGNALS:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    die_with_parent(supervisor)
    # Blocked since before the fork (``forked``): one sent to the child until now waited, and is handled as a
    # fresh interpreter would.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def forked(process: BaseProcess) -> None:
    """Start ``process`` with the supervisor's signals blocked across the fork: a signal sent to the child before it
    has reset its handlers (``fresh``) would otherwise reach the supervisor's handler there and be lost."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def serve(config: uvicorn.Config, sockets: list[socket.socket], closed: list[socket.socket], fds: list[int],
          supervisor: int, beats: int, interval: float, max_requests: int | None) -> None:  # fmt: skip
    """A worker: ``WorkerServer`` until it stops."""
    fresh(closed, fds, supervisor)
    faulthandler.enable()  # SIGABRT from the supervisor (a stuck loop): every thread's traceback on stderr
    server = WorkerServer(config, Heartbeat(beats, interval), max_requests=max_requests)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def export(metrics: MetricsEndpoint, closed: list[socket.socket], fds: list[int], supervisor: int) -> None:
    """The metrics process: the Prometheus endpoint until SIGTERM."""
    from handler.observability.exporter import run_exporter

    fresh(closed, fds, supervisor)
    run_exporter(metrics.sock, metrics.stats_dir, supervisor)
