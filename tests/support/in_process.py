"""The V2 REST app under uvicorn and the V2 gRPC server in a thread of the test process, over one data plane on one
event loop, as an ``oip serve`` worker runs them; each on a loopback port held for it (``HeldPort``, until both stop).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

import uvicorn

from handler.config.settings import Settings
from handler.grpc.server import build_server
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.rest.app import create_app
from tests.support.servers import LOOPBACK, STARTUP_TIMEOUT, STOP_TIMEOUT, HeldPort, ServerFailed, wait_for


class InProcessServers:
    """REST (unless ``rest`` is false) and gRPC over ``dataplane``, ``settings`` (default: ``Settings()``) and
    ``telemetry`` (each transport's own when None); ``rest`` and ``grpc`` say where they listen. Stopping closes the
    router's Triton clients on the loop they were opened on."""

    def __init__(
        self,
        dataplane: DataPlane,
        settings: Settings | None = None,
        telemetry: Telemetry | None = None,
        *,
        rest: bool = True,
    ) -> None:
        self.dataplane = dataplane
        self.settings = settings or Settings()
        self.telemetry = telemetry
        self.held = [HeldPort() for _ in range(2 if rest else 1)]
        self.grpc = f"{LOOPBACK}:{self.held[0].port}"
        self.uvicorn: uvicorn.Server | None = None
        if rest:
            app = create_app(dataplane, self.settings, telemetry)
            self.uvicorn = uvicorn.Server(
                uvicorn.Config(app, host=LOOPBACK, port=self.held[1].port, log_level="warning")
            )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.serving: Future[None] | None = None
        self.grpc_server: Any = None

    @property
    def rest(self) -> str:
        """http://127.0.0.1:port."""
        assert self.uvicorn is not None, "built with rest=False"
        return f"http://{LOOPBACK}:{self.held[1].port}"

    def _on_loop(self, work: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()

        async def start_grpc() -> Any:
            server = build_server(self.dataplane, self.settings, self.grpc, self.telemetry)
            await server.start()
            return server

        self.grpc_server = self._on_loop(start_grpc(), STARTUP_TIMEOUT)
        if self.uvicorn is None:
            return
        uvicorn_server = self.uvicorn
        serving = self.serving = asyncio.run_coroutine_threadsafe(uvicorn_server.serve(), self.loop)
        wait_for(lambda: uvicorn_server.started or serving.done() or not self.thread.is_alive(), "uvicorn started")
        if not uvicorn_server.started:  # it exits (SystemExit, which ends the loop too) when it cannot bind
            failure = serving.exception(STOP_TIMEOUT) if serving.done() else "its event loop ended"
            raise ServerFailed(f"uvicorn did not start on {self.rest}: {failure!r}")

    def stop(self) -> None:
        if self.uvicorn is not None:
            self.uvicorn.should_exit = True
        if self.thread.is_alive():
            if self.serving is not None and not self.serving.done():
                self.serving.result(STOP_TIMEOUT)
            if self.grpc_server is not None:
                self._on_loop(self.grpc_server.stop(None), STOP_TIMEOUT)
            self._on_loop(self._close_triton_clients(), STOP_TIMEOUT)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(STOP_TIMEOUT)
        self.loop.close()
        for port in self.held:
            port.close()

    async def _close_triton_clients(self) -> None:
        router = self.dataplane.router
        if router.passthrough is not None:
            await router.passthrough.close()
        if router.client is not None:
            await router.client.close()

    def __enter__(self) -> InProcessServers:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
