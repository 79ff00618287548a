"""Health routes: server live and ready, model ready (``{"live": bool}``, ``{"ready": bool}``; 400 when false).

A server that is draining (handler/runtime/drain.py) is not ready, so that a load balancer polling on a kept-alive
connection stops sending it requests. ``ServerHealth`` gives the server's two answers without the event loop, to
the thread that accepts ``oip serve``'s connections (handler/cli/acceptor.py), which answers a new connection's
health check there: the same status and bytes as these routes."""

from __future__ import annotations

from typing import Final

import orjson
from starlette.requests import Request
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import JSON, json_response
from handler.rest.routes import V2Route
from handler.runtime.drain import draining

#: The key of a worker's lifespan state under which the app hands its ``ServerHealth`` to the worker's acceptors.
HEALTH: Final = "oip.health"
LIVE: Final = "/v2/health/live"
READY: Final = "/v2/health/ready"


def _health(key: str, value: bool) -> tuple[int, bytes]:
    """The status and body of a server health answer (the routes' and ``ServerHealth``'s)."""
    return (200 if value else 400), orjson.dumps({key: value})


class ServerHealth:
    """``GET /v2/health/live`` and ``/v2/health/ready`` answered from any thread, as status and JSON body, when the
    answer needs no waiting: always for liveness; for readiness when every model is local and its default version
    loaded at start-up (``OIP_EAGER_LOAD``), so that telling it reads what is loaded and creates nothing (models
    forwarded to Triton make readiness ask Triton, on the event loop)."""

    def __init__(self, dataplane: DataPlane, eager_load: bool) -> None:
        self.dataplane = dataplane
        self.ready_at_once = eager_load and dataplane.serves_only_locally()

    def answer(self, path: str) -> tuple[int, bytes] | None:
        """The answer to ``GET path``; None for any other path, and for readiness that must wait."""
        if path == LIVE:
            return _health("live", self.dataplane.live())
        if path != READY:
            return None
        if draining():
            return _health("ready", False)
        if not self.ready_at_once:
            return None
        ready = self.dataplane.local_ready()
        return None if ready is None else _health("ready", ready)


def health_routes(dataplane: DataPlane) -> list[V2Route]:
    """``GET /v2/health/live``, ``/v2/health/ready`` and ``/v2/models/{m}[/versions/{v}]/ready``."""

    async def server_live(request: Request) -> Response:
        status, body = _health("live", dataplane.live())
        return Response(body, status, media_type=JSON)

    async def server_ready(request: Request) -> Response:
        status, body = _health("ready", not draining() and await dataplane.ready())
        return Response(body, status, media_type=JSON)

    async def model_ready(request: Request) -> Response:
        name, version = request.path_params["model_name"], request.path_params.get("model_version")
        ready = await dataplane.model_ready(name, version)
        return json_response({"name": name, "ready": ready}, 200 if ready else 400)

    tags = ["health"]
    return [
        V2Route(LIVE, server_live, "GET", tags=tags),
        V2Route(READY, server_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}/ready", model_ready, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/ready", model_ready, "GET", tags=tags),
    ]
