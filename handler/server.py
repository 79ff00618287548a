"""The app ``oip serve`` runs: built from settings, once per worker process.

With ``--workers N`` uvicorn's supervisor binds the port once and spawns N processes that share it; each one
imports this module and calls ``app_from_env`` (uvicorn's ``factory``), so each opens its own onnxruntime
sessions after it starts (sessions do not survive a fork). A worker that dies is replaced; SIGTERM lets
requests in flight finish (``--drain-timeout``), then every worker and the supervisor exit 0. When
``OIP_GRPC_ADDRESS`` is set, each worker also serves the V2 gRPC API there, on the same event loop (uvloop
where installed); gRPC binds with SO_REUSEPORT, so the workers share that port too.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from handler.observability.telemetry import Telemetry
from handler.protocol.container import build_dataplane
from handler.protocol.memory import keep_freed_memory
from handler.protocol.settings import GRPC_ADDRESS_ENV, Settings
from handler.rest.app import create_app


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
