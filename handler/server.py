"""The app ``oip serve`` runs: built from settings, once per worker process.

With ``--workers N`` the supervisor (handler/cli/workers.py) binds the port once, imports this module and what
``preload`` names, then forks N processes that share the port; each one calls ``app_from_env`` (uvicorn's
``factory``), so each opens its own onnxruntime sessions after it starts (sessions do not survive a fork). A worker
that dies is replaced; SIGTERM lets requests in flight finish (``--drain-timeout``), then every worker and the
supervisor exit 0. When ``OIP_GRPC_ADDRESS`` is set, each worker also serves the V2 gRPC API there, on the same
event loop (uvloop where installed); gRPC binds with SO_REUSEPORT, so the workers share that port too.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.util import find_spec
from typing import Any, NoReturn

from starlette.applications import Starlette
from starlette.types import Lifespan, Receive, Scope, Send

from adapters.repository.model_config import model_config_pb2
from handler.config.platform import Platform
from handler.config.settings import Settings, inherited_settings, onnxruntime_telemetry_off
from handler.inference.loop_shedding import RECORD
from handler.inference.service import InferenceService
from handler.observability.telemetry import Telemetry
from handler.observability.worker_telemetry import worker_telemetry
from handler.rest.probe_answers import PROBES, ProbeAnswers
from handler.rest.starlette_app import create_serving_app
from handler.runtime.banner import Processes, what_runs
from handler.runtime.container import build_dataplane
from handler.runtime.drain import on_drain
from handler.runtime.memory import keep_freed_memory
from handler.runtime.startup import (
    SAID_WITHIN_S,
    STARTUP_FAILURE,
    app_failure,
    first_to_say,
    say_failure,
    unloaded_models,
)

#: What a worker imports after this module and before its first answer, safe to import before a fork (no thread,
#: no event loop). Not grpc (not fork-safe; imported when a worker starts its server); onnxruntime only as
#: ``onnxruntime_fork_safe`` says. uvicorn's and anyio's own modules come in through their public API (``preload``).
FORK_SAFE_MODULES = (
    "adapters.onnx.batcher",
    "adapters.onnx.reshape",
    "adapters.validation",
)


#: The ONNX backend, and with it onnxruntime: preloaded when ``onnxruntime_fork_safe``.
ONNX_BACKEND = "adapters.onnx.backend"
#: uvicorn's own logger: the start-up log reads as the server's other lines do.
logger = logging.getLogger("uvicorn.error")


def onnxruntime_fork_safe() -> bool:
    """Whether onnxruntime may be imported before a fork: only with its telemetry off (``ORT_DISABLE_TELEMETRY=1``,
    adapters/onnx's default). Its import then starts no thread, and forked children run sessions and exit cleanly;
    with telemetry on (a deployment's choice) it starts an uploader thread and a forked child that exits normally
    hangs or aborts (tests/component/test_serve_workers.py holds both). Any other value keeps it out."""
    importlib.import_module("adapters.onnx")  # sets the default
    return onnxruntime_telemetry_off()


def preload(http: type[asyncio.Protocol] | str = "auto") -> None:
    """Import ``FORK_SAFE_MODULES``, uvloop, Triton's config schema and, when ``onnxruntime_fork_safe``, the ONNX
    backend with onnxruntime (which a worker would otherwise import after the fork): what a supervisor does before
    forking. uvicorn's lifespan and ``http`` protocol modules are imported by loading a uvicorn config of a bare ASGI
    app, and anyio's asyncio backend (the first run of a model goes to a worker thread) by running it once: a loop
    that is closed again and no thread, so that no worker does it."""
    import anyio
    import uvicorn

    for module in FORK_SAFE_MODULES:
        importlib.import_module(module)
    if find_spec("uvloop") is not None:
        importlib.import_module("uvloop")
    uvicorn.Config(_no_app, http=http, ws="none", lifespan="on", log_config=None).load()
    anyio.run(asyncio.sleep, 0)
    model_config_pb2()
    if onnxruntime_fork_safe():
        importlib.import_module(ONNX_BACKEND)


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    """An ASGI app that is never called: ``preload`` loads a uvicorn config around it."""


def build_app(
    settings: Settings | None = None, telemetry: Telemetry | None = None, lifespan: Lifespan[Starlette] | None = None
) -> Starlette:
    """The V2 app for ``settings`` (from the environment when None), models already loaded."""
    settings = settings or Settings.from_env()
    dataplane = build_dataplane(settings)
    telemetry = telemetry or worker_telemetry(settings, dataplane)
    service = InferenceService(dataplane, settings, telemetry)  # the worker's one, REST's and gRPC's
    app = create_serving_app(dataplane, settings, telemetry, lifespan, service)
    app.state.telemetry = telemetry  # the gRPC server's too (_grpc_served)
    return app


def app_from_env() -> Starlette:
    """uvicorn's factory for one worker: the settings ``oip serve``'s supervisor handed it, else the environment's
    (``inherited_settings``), and gRPC beside HTTP if asked; the first worker of a server to build it logs what it
    serves (handler/runtime/banner.py).

    Whatever stops the build ends the process with uvicorn's ``STARTUP_FAILURE`` (3), on which the supervisor stops
    ``oip serve``, after one line on stderr naming the cause and the setting to change (handler/runtime/startup.py;
    the traceback before it at ``--log-level debug``), said by the first worker that fails. ``SystemExit`` leaves
    uvicorn's ``Server.run`` as it is: through ``serve``'s one-worker path, or a forked worker's ``Process.run``."""
    try:
        settings = inherited_settings()
    except Exception as exc:
        _stop_worker(exc, None)
    try:
        keep_freed_memory(settings.malloc_keep_mb)  # large bodies reuse freed heap instead of faulting in fresh pages
        app = build_app(settings, lifespan=_worker_lifespan(settings))
        if settings.exit_on_error:
            _stop_on_unloaded(app)
    except Exception as exc:
        _stop_worker(exc, settings)
    if first_to_say(settings.stats_dir, "banner", ""):
        log_what_runs(app, settings)
    return app


def _stop_on_unloaded(app: Starlette) -> None:
    """StartupFailure when a model version served here (not forwarded to Triton) failed to load."""
    router = app.state.dataplane.router
    rows = router.repository.states()
    reasons = [row.reason for row in rows if row.state == "UNAVAILABLE" and router.route(row.name) is None]
    if reasons:
        raise unloaded_models(reasons)


def _stop_worker(exc: Exception, settings: Settings | None) -> NoReturn:
    """Say why this worker could not start (once for the workers that fail together), and exit with 3."""
    failure = app_failure(exc)
    platform = settings.platform if settings is not None else Platform()
    line = failure.line(platform.repository_options())
    if first_to_say(settings.stats_dir if settings else None, "failure", line, SAID_WITHIN_S):
        debug = settings is not None and settings.log_level in ("debug", "trace")
        say_failure("oip serve", line, exc if debug else None)
    raise SystemExit(STARTUP_FAILURE) from None


def log_what_runs(app: Starlette, settings: Settings) -> None:
    """The start-up log (handler/runtime/banner.py) of the worker serving ``app``."""
    from handler.config.cores import available_cores
    from handler.inference.admission import default_inflight, largest_dynamic_batch

    router = app.state.dataplane.router
    repository = router.repository
    configs = [repository.entry(name).config for name in repository.names()] if settings.dynamic_batching else []
    inflight = settings.max_inflight or default_inflight(available_cores(), largest_dynamic_batch(configs))
    workers = settings.workers or 1
    processes = Processes(workers, os.getppid() if workers > 1 else os.getpid())
    routed = [name for name in router.names() if router.route(name) is not None]
    rows = [row for row in repository.states() if router.route(row.name) is None]
    options = settings.platform.repository_options()
    for level, line in what_runs(settings, processes, inflight, rows, routed, options):
        logger.log(level, line)


def _worker_lifespan(settings: Settings) -> Lifespan[Starlette]:
    """A worker's lifespan (Starlette's ``lifespan=``): its state hands the HTTP protocol what records the event
    loop's refusals (handler/inference/loop_shedding.py: the worker's inference service), and the worker's
    acceptors what answers a probe's requests (handler/cli/probes.py); with ``OIP_GRPC_ADDRESS``, the V2 gRPC API
    is served there while the app runs."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        state = {RECORD: app.state.service.refused, PROBES: ProbeAnswers(app.state.dataplane, settings.eager_load)}
        if not settings.grpc_address:
            yield state
            return
        async with _grpc_served(app, settings, settings.grpc_address):
            yield state

    return lifespan


@asynccontextmanager
async def _grpc_served(app: Starlette, settings: Settings, address: str) -> AsyncIterator[None]:
    """The V2 gRPC API served at ``address`` while the block runs."""
    from handler.grpc.server import build_server

    server = build_server(app.state.dataplane, settings, address, app.state.telemetry, app.state.service)
    await server.start()
    stopping: list[asyncio.Task[None]] = []
    # The drain begins at the worker's SIGTERM (handler/runtime/drain.py): gRPC stops accepting then, and its
    # calls in flight finish beside HTTP's, within the same OIP_DRAIN_TIMEOUT.
    on_drain(lambda: stopping.append(asyncio.ensure_future(server.stop(grace=settings.drain_timeout))))
    try:
        yield
    finally:
        await (stopping[0] if stopping else server.stop(grace=settings.drain_timeout))
