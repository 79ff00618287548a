"""Health routes: server live and ready, model ready (``{"live": bool}``, ``{"ready": bool}``; 400 when false).

A server that is draining (handler/runtime/drain.py) is not ready, so that a load balancer polling on a kept-alive
connection stops sending it requests."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import V2Route
from handler.runtime.drain import draining


def health_routes(dataplane: DataPlane) -> list[V2Route]:
    """``GET /v2/health/live``, ``/v2/health/ready`` and ``/v2/models/{m}[/versions/{v}]/ready``."""

    async def server_live(request: Request) -> Response:
        live = dataplane.live()
        return json_response({"live": live}, 200 if live else 400)

    async def server_ready(request: Request) -> Response:
        ready = not draining() and await dataplane.ready()
        return json_response({"ready": ready}, 200 if ready else 400)

    async def model_ready(request: Request) -> Response:
        name, version = request.path_params["model_name"], request.path_params.get("model_version")
        ready = await dataplane.model_ready(name, version)
        return json_response({"name": name, "ready": ready}, 200 if ready else 400)

    tags = ["health"]
    return [
        V2Route("/v2/health/live", server_live, "GET", tags=tags),
        V2Route("/v2/health/ready", server_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}/ready", model_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/ready", model_ready, "GET", tags=tags),
    ]
