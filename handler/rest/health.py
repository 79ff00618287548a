"""Health routes: server live and ready, model ready (``{"live": bool}``, ``{"ready": bool}``; 400 when false).

A server that is draining (handler/runtime/drain.py) is not ready, so that a load balancer polling on a kept-alive
connection stops sending it requests."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import route
from handler.runtime.drain import draining


def add_health_routes(app: Starlette, dataplane: DataPlane) -> None:
    """``GET /v2/health/live``, ``/v2/health/ready`` and ``/v2/models/{m}[/versions/{v}]/ready``."""

    @route(app, "GET", "/v2/health/live", tags=["health"])
    async def server_live() -> Response:
        live = dataplane.live()
        return json_response({"live": live}, 200 if live else 400)

    @route(app, "GET", "/v2/health/ready", tags=["health"])
    async def server_ready() -> Response:
        ready = not draining() and await dataplane.ready()
        return json_response({"ready": ready}, 200 if ready else 400)

    @route(app, "GET", "/v2/models/{model_name}/ready", tags=["health"])
    @route(app, "GET", "/v2/models/{model_name}/versions/{model_version}/ready", tags=["health"])
    async def model_ready(model_name: str, model_version: str | None = None) -> Response:
        ready = await dataplane.model_ready(model_name, model_version)
        return json_response({"name": model_name, "ready": ready}, 200 if ready else 400)
