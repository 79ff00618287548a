"""Metadata routes: server metadata, model metadata and Triton's model configuration extension."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from adapters.types import ModelMetadata
from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import V2Route


def metadata_document(metadata: ModelMetadata) -> dict[str, Any]:
    """``$metadata_model_response`` from domain metadata."""
    return {
        "name": metadata.name,
        "versions": list(metadata.versions),
        "platform": metadata.platform,
        "inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.inputs],
        "outputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.outputs],
    }


def metadata_routes(dataplane: DataPlane) -> list[V2Route]:
    """``GET /v2``, ``/v2/models/{m}[/versions/{v}]`` and ``.../config``."""

    async def server_metadata(request: Request) -> Response:
        return json_response(dataplane.server_metadata("rest"))

    async def model_metadata(request: Request) -> Response:
        name, version = request.path_params["model_name"], request.path_params.get("model_version")
        return json_response(metadata_document(await dataplane.model_metadata(name, version)))

    async def model_config(request: Request) -> Response:
        name, version = request.path_params["model_name"], request.path_params.get("model_version")
        return json_response(await dataplane.model_config(name, version))

    tags = ["metadata"]
    return [
        V2Route("/v2", server_metadata, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}", model_metadata, "GET", tags=tags),
        V2Route("/v2/models/{model_name}", model_metadata, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}/config", model_config, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/config", model_config, "GET", tags=tags),
    ]
