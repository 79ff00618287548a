"""Triton's statistics extension over REST: ``GET v2/models[/${MODEL_NAME}[/versions/${MODEL_VERSION}]]/stats``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import V2Route


def statistics_routes(dataplane: DataPlane) -> list[V2Route]:
    """The three stats routes; they go before ``/v2/models/{m}`` so that ``stats`` is not read as a name."""

    async def model_statistics(request: Request) -> Response:
        name, version = request.path_params.get("model_name", ""), request.path_params.get("model_version", "")
        return json_response({"model_stats": await dataplane.model_statistics(name, version)})

    tags = ["statistics"]
    return [
        V2Route("/v2/models/{model_name}/versions/{model_version}/stats", model_statistics, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/stats", model_statistics, "GET", tags=tags),
        V2Route("/v2/models/stats", model_statistics, "GET", tags=tags),
    ]
