"""Health routes: server live and ready, model ready (``{"live": bool}``, ``{"ready": bool}``; 400 when false).

A server that is draining (handler/runtime/drain.py) is not ready, so that a load balancer polling on a kept-alive
connection stops sending it requests. handler/rest/probe_answers.py gives the same answers without the event loop."""

from __future__ import annotations

from typing import Final

import orjson
from starlette.requests import Request
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import JSON
from handler.rest.routes import V2Route
from handler.runtime.drain import draining

LIVE: Final = "/v2/health/live"
READY: Final = "/v2/health/ready"


def health_answer(key: str, value: bool) -> tuple[int, bytes]:
    """The status and body of a server health answer (the routes' and ``ProbeAnswers``')."""
    return (200 if value else 400), orjson.dumps({key: value})


def model_ready_answer(name: str, ready: bool) -> tuple[int, bytes]:
    """The status and body of a model readiness answer (the route's and ``ProbeAnswers``')."""
    return (200 if ready else 400), orjson.dumps({"name": name, "ready": ready})


def health_routes(dataplane: DataPlane) -> list[V2Route]:
    """``GET /v2/health/live``, ``/v2/health/ready`` and ``/v2/models/{m}[/versions/{v}]/ready``."""

    async def server_live(request: Request) -> Response:
        status, body = health_answer("live", dataplane.live())
        return Response(body, status, media_type=JSON)

    async def server_ready(request: Request) -> Response:
        status, body = health_answer("ready", not draining() and await dataplane.ready())
        return Response(body, status, media_type=JSON)

    async def model_ready(request: Request) -> Response:
        name, version = request.path_params["model_name"], request.path_params.get("model_version")
        status, body = model_ready_answer(name, await dataplane.model_ready(name, version))
        return Response(body, status, media_type=JSON)

    tags = ["health"]
    return [
        V2Route(LIVE, server_live, "GET", tags=tags),
        V2Route(READY, server_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}/ready", model_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/ready", model_ready, "GET", tags=tags),
    ]
