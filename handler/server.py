"""The app ``oip serve`` runs: built from settings, once per worker process.

With ``--workers N`` uvicorn's supervisor binds the port once, imports this module and what ``preload`` names,
then forks N processes that share the port; each one calls ``app_from_env`` (uvicorn's ``factory``), so each
opens its own onnxruntime sessions after it starts (sessions do not survive a fork). A worker that dies is
replaced; SIGTERM lets requests in flight finish (``--drain-timeout``), then every worker and the supervisor
exit 0. When ``OIP_GRPC_ADDRESS`` is set, each worker also serves the V2 gRPC API there, on the same event loop
(uvloop where installed); gRPC binds with SO_REUSEPORT, so the workers share that port too.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.util import find_spec

from fastapi import FastAPI

from adapters.repository.model_config import model_config_pb2
from handler.observability.telemetry import Telemetry
from handler.protocol.container import build_dataplane
from handler.protocol.memory import keep_freed_memory
from handler.protocol.settings import GRPC_ADDRESS_ENV, Settings
from handler.rest.app import create_app

#: What a worker imports after this module and before its first answer, safe to import before a fork (no thread,
#: no event loop). Not grpc (not fork-safe; imported when a worker starts its server); onnxruntime only as
#: ``onnxruntime_fork_safe`` says.
FORK_SAFE_MODULES = (
    "adapters.onnx.batcher",
    "adapters.onnx.reshape",
    "adapters.validation",
    "anyio._backends._asyncio",  # the first run of a model goes to a worker thread
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
)


#: The ONNX backend, and with it onnxruntime: preloaded when ``onnxruntime_fork_safe``.
ONNX_BACKEND = "adapters.onnx.backend"


def onnxruntime_fork_safe() -> bool:
    """Whether onnxruntime may be imported before a fork: only with its telemetry off (``ORT_DISABLE_TELEMETRY=1``,
    adapters/onnx's default). Its import then starts no thread, and forked children run sessions and exit cleanly;
    with telemetry on (a deployment's choice) it starts an uploader thread and a forked child that exits normally
    hangs or aborts (tests/component/test_serve_workers.py holds both). Any other value keeps it out."""
    importlib.import_module("adapters.onnx")  # sets the default
    return os.environ.get("ORT_DISABLE_TELEMETRY") == "1"


def preload() -> None:
    """Import ``FORK_SAFE_MODULES``, uvloop, Triton's config schema and, when ``onnxruntime_fork_safe``, the ONNX
    backend with onnxruntime (30-60 ms a worker would otherwise spend after the fork): what a supervisor does before
    forking."""
    for module in FORK_SAFE_MODULES:
        importlib.import_module(module)
    if find_spec("uvloop") is not None:
        importlib.import_module("uvloop")
    model_config_pb2()
    if onnxruntime_fork_safe():
        importlib.import_module(ONNX_BACKEND)


def build_app(settings: Settings | None = None, telemetry: Telemetry | None = None) -> FastAPI:
    """The V2 app for ``settings`` (from the environment when None), models already loaded."""
    settings = settings or Settings.from_env()
    return create_app(build_dataplane(settings), settings, telemetry)


def app_from_env() -> FastAPI:
    """uvicorn's factory for one worker: settings from the environment, and gRPC beside HTTP if asked."""
    keep_freed_memory()  # large bodies reuse freed heap instead of faulting in fresh pages (protocol/memory.py)
    settings = Settings.from_env()
    app = build_app(settings)
    address = os.environ.get(GRPC_ADDRESS_ENV)
    if address:
        app.router.lifespan_context = _grpc_lifespan(app, settings, address)
    return app


def _grpc_lifespan(
    app: FastAPI, settings: Settings, address: str
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A lifespan that serves the V2 gRPC API at ``address`` while the app runs."""
    from handler.grpc.server import build_server

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        server = build_server(app.state.dataplane, settings, address)
        await server.start()
        try:
            yield
        finally:
            await server.stop(grace=drain_seconds())

    return lifespan


def drain_seconds() -> float:
    """How long in-flight gRPC calls may take to finish on shutdown (``OIP_DRAIN_TIMEOUT``, seconds)."""
    return float(os.environ.get("OIP_DRAIN_TIMEOUT", "30"))
