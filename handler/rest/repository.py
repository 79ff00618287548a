"""Triton's model repository extension: the index (local and forwarded models); load/unload answer 501, as do
Triton's other stateful extensions (shared memory, trace and log settings: ``protocol/stateful_refusals.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from handler.codecs.request import load_json_object
from handler.config.settings import Settings
from handler.protocol.dataplane import DataPlane
from handler.protocol.stateful_refusals import not_honoured
from handler.rest.body import read_body
from handler.rest.responses import json_response
from handler.rest.routes import V2Route


def repository_routes(dataplane: DataPlane, settings: Settings) -> list[V2Route]:
    """``POST /v2/repository/index``, ``/v2/repository/models/{m}/load|unload`` and the stateful extensions'."""

    async def repository_index(request: Request) -> Response:
        body = await read_body(request, settings.max_body_bytes)
        only_ready = bool(load_json_object(body).get("ready", False)) if body.strip() else False
        rows = [
            {"name": r.name, "version": r.version, "state": r.state, **({"reason": r.reason} if r.reason else {})}
            for r in await dataplane.index(only_ready)
        ]
        return json_response(rows)

    tags = ["repository"]
    return [
        V2Route("/v2/repository/index", repository_index, "POST", tags=tags),
        V2Route(
            "/v2/repository/models/{model_name}/unload",
            _refusal("model_repository"),
            "POST",
            tags=tags,
            name="repository_control",
        ),
        V2Route(
            "/v2/repository/models/{model_name}/load",
            _refusal("model_repository"),
            "POST",
            tags=tags,
            name="repository_control",
        ),
        *_stateful_routes(),
    ]


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


def _stateful_routes() -> list[V2Route]:
    """501 with what to do instead, rather than 404, for a client written for Triton; left out of the OpenAPI
    document (they serve nothing)."""
    return [
        V2Route(path, _refusal(extension), method, tags=["repository"], name="refuse", include_in_schema=False)
        for extension, routes in STATEFUL_ROUTES.items()
        for method, path in routes
    ]


def _refusal(extension: str) -> Callable[[Request], Awaitable[Response]]:
    async def refuse(request: Request) -> Response:
        raise not_honoured(extension)

    return refuse
