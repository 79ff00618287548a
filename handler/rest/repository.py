"""Triton's model repository extension: the index (local and forwarded models); load/unload answer 501."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from adapters.errors import Unsupported
from handler.codecs.request import load_json_object
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.rest.body import read_body
from handler.rest.responses import json_response
from handler.rest.routes import route


def add_repository_routes(app: FastAPI, dataplane: DataPlane, settings: Settings) -> None:
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
        raise Unsupported(
            "this server is stateless: models load from the repository at start-up (default versions) or on "
            "first use, and cannot be loaded or unloaded on request"
        )
