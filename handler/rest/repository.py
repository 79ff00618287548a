"""Triton's model repository extension: the index (local and forwarded models); load/unload answer 501, as do
Triton's other stateful extensions (shared memory, trace and log settings: ``protocol/stateful.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from handler.codecs.request import load_json_object
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.protocol.stateful import not_honoured
from handler.rest.body import read_body
from handler.rest.responses import json_response
from handler.rest.routes import route


def add_repository_routes(app: Starlette, dataplane: DataPlane, settings: Settings) -> None:
    """``POST /v2/repository/index`` and ``/v2/repository/models/{m}/load|unload``."""

    @route(app, "POST", "/v2/repository/index", tags=["repository"])
    async def repository_index(request: Request) -> Response:
        body = await read_body(request, settings.max_body_bytes)
        only_ready = bool(load_json_object(body).get("ready", False)) if body.strip() else False
        rows = [
            {"name": r.name, "version": r.version, "state": r.state, **({"reason": r.reason} if r.reason else {})}
            for r in await dataplane.index(only_ready)
        ]
        return json_response(rows)

    @route(app, "POST", "/v2/repository/models/{model_name}/load", tags=["repository"])
    @route(app, "POST", "/v2/repository/models/{model_name}/unload", tags=["repository"])
    async def repository_control(model_name: str) -> Response:
        raise not_honoured("model_repository")

    _add_stateful_routes(app)


#: Triton's HTTP routes of its other stateful extensions, by extension (``{region}``: a shared-memory region).
STATEFUL_ROUTES: dict[str, tuple[tuple[str, str], ...]] = {
    **{
        extension: (
            ("GET", f"/v2/{kind}/status"),
            ("GET", f"/v2/{kind}/region/{{region}}/status"),
            ("POST", f"/v2/{kind}/region/{{region}}/register"),
            ("POST", f"/v2/{kind}/unregister"),
            ("POST", f"/v2/{kind}/region/{{region}}/unregister"),
        )
        for extension, kind in (
            ("system_shared_memory", "systemsharedmemory"),
            ("cuda_shared_memory", "cudasharedmemory"),
        )
    },
    "trace": tuple(
        (method, path)
        for method in ("GET", "POST")
        for path in ("/v2/trace/setting", "/v2/models/{model}/trace/setting")
    ),
    "logging": (("GET", "/v2/logging"), ("POST", "/v2/logging")),
}


def _add_stateful_routes(app: Starlette) -> None:
    """501 with what to do instead, rather than 404, for a client written for Triton; left out of the OpenAPI
    document (they serve nothing)."""
    for extension, routes in STATEFUL_ROUTES.items():
        for method, path in routes:
            route(app, method, path, tags=["repository"], include_in_schema=False)(_refusal(extension))


def _refusal(extension: str) -> Callable[[Request], Awaitable[Response]]:
    async def refuse(request: Request) -> Response:
        raise not_honoured(extension)

    return refuse
