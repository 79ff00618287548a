"""``oip serve``: the V2 app under uvicorn, with the V2 gRPC service beside it when a gRPC port is given.

With more than one worker, uvicorn's supervisor forks its workers from a process that has already imported the
app's modules (as gunicorn's ``--preload``) instead of spawning fresh interpreters that import them again each:
see ``preload_and_fork``. The port listens from the start, before those imports (``listen``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import inspect
import logging
import math
import multiprocessing
import os
import signal
import socket
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from handler.cli.errors import CliError

if TYPE_CHECKING:
    from uvicorn import Config

#: uvicorn's exit code for a server that did not start (``uvicorn.main.STARTUP_FAILURE``).
STARTUP_FAILURE = 3
#: ``oip serve``'s connection options (handler/cli/__init__.py) and the environment variables they set.
CONNECTION_OPTIONS = {
    "header_timeout": "OIP_HEADER_TIMEOUT",
    "body_timeout": "OIP_BODY_TIMEOUT",
    "keep_alive_timeout": "OIP_KEEP_ALIVE_TIMEOUT",
    "max_connections": "OIP_MAX_CONNECTIONS",
    "max_header_bytes": "OIP_MAX_HEADER_BYTES",
    "max_headers": "OIP_MAX_HEADERS",
}
GRPC_HINT = "--grpc-port needs the gRPC extra: pip install 'oip-serverless[grpc]'"
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
    from handler.protocol.platform import Platform

    # With no arguments, the platform's environment decides (Vertex AI's AIP_*, SageMaker's SAGEMAKER_*).
    platform = Platform.from_env()
    args.host, args.port = platform.address(args.host, args.port)
    args.model_repository = args.model_repository or platform.model_repository
    if args.grpc_port:
        _grpc_server_builder()
    from handler.protocol.settings import GRPC_ADDRESS_ENV, STATS_DIR_ENV, Settings

    # Every worker builds its app from the environment (handler.server:app_from_env), so options travel there.
    overrides = {
        "MODEL_REPOSITORY": args.model_repository,
        "OIP_MAX_BODY_BYTES": args.max_body_bytes,
        "OIP_DRAIN_TIMEOUT": args.drain_timeout,
        GRPC_ADDRESS_ENV: f"{args.host}:{args.grpc_port}" if args.grpc_port else None,
        **{env: getattr(args, option, None) for option, env in CONNECTION_OPTIONS.items()},
    }
    os.environ.update({name: str(value) for name, value in overrides.items() if value is not None})
    if not args.grpc_port:
        os.environ.pop(GRPC_ADDRESS_ENV, None)
    settings = Settings.from_env()
    # The workers' statistics counters live in files here, so a statistics request sums every worker's.
    with tempfile.TemporaryDirectory(prefix="oip-stats-") as stats_dir:
        os.environ[STATS_DIR_ENV] = stats_dir
        import uvicorn

        config = uvicorn.Config(
            "handler.server:app_from_env",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            ws="none",  # no WebSocket endpoint in the V2 protocols: the websockets library stays unimported (15-20 ms)
            log_level=args.log_level,
            access_log=args.access_log,
            timeout_graceful_shutdown=math.ceil(args.drain_timeout),
            http=http_protocol(),
            limit_concurrency=settings.max_connections,
            timeout_keep_alive=settings.keep_alive_timeout,
        )
        sock = listen(config)
        import_without_collection(args.workers)
        return run(config, sock)


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's HTTP protocol: httptools' with the limits of handler/cli/connections.py; uvicorn's choice (h11,
    with none of them but its 16 KiB head) where httptools is not installed."""
    from importlib.util import find_spec

    if find_spec("httptools") is None:
        logger.warning("httptools is not installed: no header or body timeouts, no header size limit but h11's")
        return "auto"
    from handler.cli.connections import GuardedHttpToolsProtocol

    return GuardedHttpToolsProtocol


def listen(config: Config) -> socket.socket:
    """The HTTP socket, bound and listening before anything else is imported, as gunicorn's arbiter listens before
    it forks: a client that connects while the workers start waits in the backlog and is answered by the first
    worker that serves, instead of being refused and retrying (uvicorn binds the port but leaves ``listen`` to the
    workers' ``create_server``). Answers, /v2/health/ready's included, still come only from a worker whose models
    are loaded. A port in use ends ``oip serve`` here, before the imports, with uvicorn's message and exit code (3)."""
    sock: socket.socket = config.bind_socket()
    sock.listen(config.backlog)
    return sock


def run(config: Config, sock: socket.socket) -> int:
    """What ``uvicorn.run`` does with a bound socket: its supervisor forks ``config.workers`` workers sharing it,
    or, with one worker, the server runs here; 3 (uvicorn's ``STARTUP_FAILURE``) when that server did not start."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    server = uvicorn.Server(config)
    if config.workers > 1:
        # uvicorn 0.30 (the lowest pyproject allows) takes the target, Server.run; the locked 0.54 makes its own.
        target = {"target": server.run} if "target" in inspect.signature(Multiprocess).parameters else {}
        Multiprocess(config, sockets=[sock], **target).run()
        return 0
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    return 0 if server.started else STARTUP_FAILURE


def import_without_collection(workers: int) -> None:
    """Import what a worker needs before its first answer, here (``preload_and_fork`` with several workers),
    without cyclic garbage collection; then freeze what was made and let collection resume.

    The imports make some 100,000 objects that live as long as the process and little garbage, yet cost about 150
    collections, one of them full (45-80 ms of a start on this project's 2-core machine). Python's ``gc``
    documentation gives the recipe for a process that forks without exec: collection disabled early in the parent,
    objects frozen right before the fork (a child's collections then never scan, nor copy on write, the pages of
    the parent's objects), collection on in the children. With one worker there is no fork: freezing keeps the
    serving process's full collections from scanning every module's objects.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        if workers > 1:
            preload_and_fork()
        else:
            from handler.server import preload

            preload()
        gc.freeze()
    finally:
        if collecting:
            gc.enable()


def preload_and_fork() -> bool:
    """Import the app's modules here and make uvicorn's supervisor fork its workers from this process; True if so.

    A spawned worker is a fresh interpreter that imports numpy, FastAPI and our modules again (about 1 s on a
    busy 2-core machine) before it opens its sessions; a forked one starts with them imported. The supervisor
    stays single-threaded (numpy's OpenBLAS is loaded with one thread unless ``OPENBLAS_NUM_THREADS`` says
    otherwise; nothing here reads it on the serving path), opens no session and starts no event loop: each worker
    builds its app, sessions and gRPC server after it starts. uvicorn has no option for this: its
    workers come from the multiprocessing context ``uvicorn._subprocess.spawn``, replaced here by a fork context;
    if a uvicorn release moves it, the workers are spawned (importing everything anew) and a warning says so
    (tests/component/test_serve_workers.py fails then).
    """
    from uvicorn import _subprocess

    context = getattr(_subprocess, "spawn", None)
    if (
        not isinstance(context, multiprocessing.context.BaseContext)
        or "spawn" not in _subprocess.get_subprocess.__code__.co_names
    ):
        logger.warning(
            "uvicorn.%s no longer starts workers from 'spawn': they import the app anew", _subprocess.__name__
        )
        return False
    _preload()
    os.register_at_fork(after_in_child=_fresh_signal_handlers)
    _subprocess.spawn = multiprocessing.get_context("fork")  # type: ignore[assignment]
    return True


def _preload() -> None:
    """``handler.server.preload`` with OpenBLAS held to one thread unless ``OPENBLAS_NUM_THREADS`` is set."""
    given = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = given or "1"
    try:
        from handler.server import preload

        preload()
    finally:
        if given is None:  # the workers' environment stays as it was given
            del os.environ["OPENBLAS_NUM_THREADS"]


def _fresh_signal_handlers() -> None:
    """In a forked worker, the signal handlers a fresh interpreter has, not the supervisor's."""
    for signum in signal.valid_signals():
        handler = signal.getsignal(signum)
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
