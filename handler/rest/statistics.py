"""Triton's statistics extension over REST: ``GET v2/models[/${MODEL_NAME}[/versions/${MODEL_VERSION}]]/stats``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import route


def add_statistics_routes(app: Starlette, dataplane: DataPlane) -> None:
    """The three stats routes; add them before ``/v2/models/{m}`` so that ``stats`` is not read as a name."""

    @route(app, "GET", "/v2/models/stats", tags=["statistics"])
    @route(app, "GET", "/v2/models/{model_name}/stats", tags=["statistics"])
    @route(app, "GET", "/v2/models/{model_name}/versions/{model_version}/stats", tags=["statistics"])
    async def model_statistics(model_name: str = "", model_version: str = "") -> Response:
        return json_response({"model_stats": await dataplane.model_statistics(model_name, model_version)})
