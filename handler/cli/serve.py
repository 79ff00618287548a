"""``oip serve``: the V2 app under uvicorn, with the V2 gRPC service beside it when a gRPC port is given.

With more than one worker, a supervisor of ours (handler/cli/workers.py) forks them from a process that has
already imported the app's modules (as gunicorn's preloaded workers) instead of spawning fresh interpreters that
import them again each (uvicorn's ``--workers``): see ``import_without_collection``. The port listens from the
start, before those imports (``listen``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import math
import os
import socket
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from handler.cli.errors import CliError
from handler.cli.metrics_endpoint import MetricsEndpoint
from handler.runtime.startup import STARTUP_FAILURE, StartupFailure, check_repository

if TYPE_CHECKING:
    from uvicorn import Config

    from handler.config.settings import Settings

GRPC_HINT = "--grpc-port needs the gRPC extra: pip install 'oip-serverless[grpc]'"
METRICS_HINT = "--metrics-port 0 turns metrics off, --metrics-port PORT moves them"
GRPC_PORT_HINT = "--grpc-port 0 turns gRPC off, --grpc-port PORT or OIP_GRPC_PORT moves it"
logger = logging.getLogger(__name__)


def _grpc_server_builder() -> Callable[..., Any]:
    """``handler.grpc.server.build_server``; CliError with the pip command when grpcio is not installed."""
    from importlib.util import find_spec

    if find_spec("grpc") is None:  # handler.grpc imports grpcio only when a server starts: ask first
        raise CliError(f"{GRPC_HINT} (grpcio is missing)")
    try:
        from handler.grpc.server import build_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in ("grpc", "tritonclient", "google"):
            raise CliError(f"{GRPC_HINT} ({exc.name} is missing)") from None
        raise
    return build_server


def serve(args: argparse.Namespace) -> int:
    """Run ``oip serve`` until interrupted; 0 on a clean stop (SIGTERM drains requests in flight first)."""
    from dataclasses import replace

    from handler.cli import setting_overrides
    from handler.config.cores import available_cores
    from handler.config.settings import Settings, hand_to_workers

    # Options over the environment's variables; with neither, the platform's environment decides where to listen and
    # what to serve (Vertex AI's AIP_*, SageMaker's SAGEMAKER_*). SettingsError for a value a variable does not take.
    settings = Settings.from_env(**setting_overrides(args))
    args.host, args.port = settings.platform.address(args.host, args.port)
    args.workers = settings.workers or available_cores()
    try:  # the mistakes found without reading the repository, said here once rather than by every worker
        check_repository(settings.model_repository)
    except StartupFailure as failure:
        raise CliError(failure.line(settings.platform.repository_options()), STARTUP_FAILURE) from None
    if settings.grpc_port:
        _grpc_server_builder()
    grpc_address = _address(args.host, settings.grpc_port) if settings.grpc_port else None
    metrics_port = settings.metrics_port
    metrics_host = settings.metrics_host or args.host
    # The workers' statistics counters live in files here, so a statistics request (and a scrape of the metrics
    # endpoint) sums every worker's.
    with tempfile.TemporaryDirectory(prefix="oip-stats-") as stats_dir:
        # Every worker builds its app from these settings (handler.server:app_from_env), which it inherits.
        settings = replace(
            settings,
            grpc_address=grpc_address,
            http_address=_address(args.host, args.port),
            stats_dir=stats_dir,
            workers=args.workers,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        hand_to_workers(settings)
        import uvicorn

        config = uvicorn.Config(
            "handler.server:app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            ws="none",  # no WebSocket endpoint in the V2 protocols: the websockets library stays unimported
            log_level=settings.log_level,
            access_log=settings.access_log,
            timeout_graceful_shutdown=math.ceil(settings.drain_timeout),
            http=http_protocol(),
            limit_concurrency=settings.max_connections,
            timeout_keep_alive=settings.keep_alive_timeout,
        )
        sock = listen(config, settings.platform.port_variable)
        if settings.grpc_port:
            check_grpc_port(args.host, settings.grpc_port)
        metrics = (
            listen_metrics(metrics_host, metrics_port, stats_dir, (args.port, settings.grpc_port))
            if metrics_port
            else None
        )
        import_without_collection(args.workers, config.http)
        return run(config, sock, settings, metrics)


def listen_metrics(host: str, port: int, stats_dir: str, others: tuple[int, int]) -> MetricsEndpoint:
    """The metrics socket, bound and listening before the workers start. A port in use (or the HTTP or gRPC port,
    ``others``) ends ``oip serve`` here with exit code 3, as the HTTP port's does, the default 8002 included: as
    with Triton, whose metrics port taken stops it, a Prometheus scraping that port never silently gets another
    server's metrics."""
    from handler.observability.exporter import listen as listen_on

    hint = METRICS_HINT
    if port in others:
        raise CliError(f"cannot serve metrics on {_address(host, port)}: it is the HTTP or gRPC port too ({hint})",
                       STARTUP_FAILURE)  # fmt: skip
    try:
        sock = listen_on(host, port)
    except OSError as exc:
        raise CliError(
            f"cannot serve metrics on {_address(host, port)}: {exc.strerror or exc} ({hint})", STARTUP_FAILURE
        ) from None
    return MetricsEndpoint(sock, stats_dir)


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's HTTP protocol: httptools' with the limits of handler/cli/connections.py; uvicorn's choice (h11,
    with none of them but its 16 KiB head) where httptools is not installed."""
    from importlib.util import find_spec

    if find_spec("httptools") is None:
        logger.warning("httptools is not installed: no header or body timeouts, no header size limit but h11's")
        return "auto"
    from handler.cli.connections import GuardedHttpToolsProtocol

    return GuardedHttpToolsProtocol


def listen(config: Config, port_variable: str = "OIP_PORT") -> socket.socket:
    """The HTTP socket, bound and listening before anything else is imported, as gunicorn's arbiter listens before
    it forks: a client that connects while the workers start waits in the backlog and is answered by the first
    worker that serves, instead of being refused and retrying (uvicorn binds the port but leaves ``listen`` to the
    workers' ``create_server``). Answers, /v2/health/ready's included, still come only from a worker whose models
    are loaded. A port in use ends ``oip serve`` here, before the imports, with exit code 3 and a line naming the
    port and ``--port`` (and ``port_variable``, where the platform sets it)."""
    host, port = config.host, config.port
    sock = _tcp_socket(host)
    if hasattr(socket, "TCP_DEFER_ACCEPT"):  # Linux: a connection is accepted once its first bytes are there, so
        # that the accepting thread reads it at once instead of watching it for them (nginx's ``deferred``)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, 1)
    try:
        sock.bind((host, port))
        sock.listen(config.backlog)
    except OSError as exc:
        sock.close()
        hint = f"--port PORT or {port_variable} moves it"
        raise CliError(f"cannot serve HTTP on {_address(host, port)}: {exc.strerror or exc} ({hint})",
                       STARTUP_FAILURE) from None  # fmt: skip
    return sock


def check_grpc_port(host: str, port: int) -> None:
    """CliError (exit code 3) naming the port and ``--grpc-port`` when something listens on the gRPC port. Each
    worker binds it itself (with ``SO_REUSEPORT``, grpc's way, so that they share it), so nothing may hold it here: a
    socket bound without ``SO_REUSEPORT`` and closed again finds any listener there, another ``oip serve``'s gRPC
    included, before a worker would fail on it."""
    sock = _tcp_socket(host)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise CliError(f"cannot serve gRPC on {_address(host, port)}: {exc.strerror or exc} ({GRPC_PORT_HINT})",
                       STARTUP_FAILURE) from None  # fmt: skip
    finally:
        sock.close()


def _tcp_socket(host: str) -> socket.socket:
    """A TCP socket for ``host`` (IPv6 when it has a colon) with ``SO_REUSEADDR``, as uvicorn's, not yet bound."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def _address(host: str, port: int) -> str:
    """``host:port``, ``[host]:port`` for an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run(config: Config, sock: socket.socket, settings: Settings, metrics: MetricsEndpoint | None = None) -> int:
    """Serve on the bound socket: ``config.workers`` forked workers under handler/cli/workers.py's supervisor, or,
    with one worker, its server (handler/cli/worker.py) here, whose watchdog thread ends the process (exit code 70)
    when its event loop stops for ``--worker-timeout``; 3 (uvicorn's ``STARTUP_FAILURE``) when a server did not
    start. ``metrics``: the Prometheus endpoint, in a process of the supervisor's or, with one worker, a thread
    here. ``settings``: those handed to the workers (``serve``), supervision's included."""
    from handler.cli.worker import WorkerServer
    from handler.runtime.heartbeat import Watchdog

    if config.workers > 1:
        from handler.cli.workers import Supervision, Workers

        supervision = Supervision(
            settings.worker_timeout, settings.max_requests, settings.max_requests_jitter, settings.stats_dir
        )
        return Workers(config, [sock], config.workers, metrics, supervision).run()
    if settings.max_requests:
        logging.getLogger("uvicorn.error").warning(
            "--max-requests (OIP_MAX_REQUESTS) replaces workers under a supervisor: with one worker it is ignored."
        )
    if metrics is not None:
        from handler.observability.exporter import registry, serve_in_thread

        serve_in_thread(metrics.sock, registry(metrics.stats_dir, os.getpid()))
    server = WorkerServer(config, watchdog=Watchdog(settings.worker_timeout) if settings.worker_timeout else None)
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    return 0 if server.started else STARTUP_FAILURE


def import_without_collection(workers: int, http: type[asyncio.Protocol] | str = "auto") -> None:
    """Import what a worker needs before its first answer, here (before the fork with several workers), without
    cyclic garbage collection; then freeze what was made and let collection resume.

    The imports make some 100,000 objects that live as long as the process and little garbage, yet cost many
    collections, one of them full, which scans them all. Python's ``gc``
    documentation gives the recipe for a process that forks without exec: collection disabled early in the parent,
    objects frozen right before the fork (a child's collections then never scan, nor copy on write, the pages of
    the parent's objects), collection on in the children. With one worker there is no fork: freezing keeps the
    serving process's full collections from scanning every module's objects.

    A forked worker starts with numpy, FastAPI and our modules imported, where a spawned one (a fresh interpreter)
    imports them again before it opens its sessions. The supervisor stays
    single-threaded (numpy's OpenBLAS is loaded with one thread unless ``OPENBLAS_NUM_THREADS`` says otherwise;
    nothing here reads it on the serving path), opens no session and keeps no event loop: each worker builds its
    app, sessions and gRPC server after it starts.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        if workers > 1:
            _preload(http)
        else:
            from handler.server import preload

            preload(http)
        gc.freeze()
    finally:
        if collecting:
            gc.enable()


def _preload(http: type[asyncio.Protocol] | str = "auto") -> None:
    """``handler.server.preload`` with OpenBLAS held to one thread unless ``OPENBLAS_NUM_THREADS`` is set."""
    given = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = given or "1"
    try:
        from handler.server import preload

        preload(http)
    finally:
        if given is None:  # the workers' environment stays as it was given
            del os.environ["OPENBLAS_NUM_THREADS"]
