"""Metadata routes: server metadata, model metadata and Triton's model configuration extension."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.responses import Response

from adapters.types import ModelMetadata
from handler.protocol.dataplane import DataPlane
from handler.rest.responses import json_response
from handler.rest.routes import route


def metadata_document(metadata: ModelMetadata) -> dict[str, Any]:
    """``$metadata_model_response`` from domain metadata."""
    return {
        "name": metadata.name,
        "versions": list(metadata.versions),
        "platform": metadata.platform,
        "inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.inputs],
        "outputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.outputs],
    }


def add_metadata_routes(app: Starlette, dataplane: DataPlane) -> None:
    """``GET /v2``, ``/v2/models/{m}[/versions/{v}]`` and ``.../config``."""

    @route(app, "GET", "/v2", tags=["metadata"])
    async def server_metadata() -> Response:
        return json_response(dataplane.server_metadata("rest"))

    @route(app, "GET", "/v2/models/{model_name}", tags=["metadata"])
    @route(app, "GET", "/v2/models/{model_name}/versions/{model_version}", tags=["metadata"])
    async def model_metadata(model_name: str, model_version: str | None = None) -> Response:
        return json_response(metadata_document(await dataplane.model_metadata(model_name, model_version)))

    @route(app, "GET", "/v2/models/{model_name}/config", tags=["metadata"])
    @route(app, "GET", "/v2/models/{model_name}/versions/{model_version}/config", tags=["metadata"])
    async def model_config(model_name: str, model_version: str | None = None) -> Response:
        return json_response(await dataplane.model_config(model_name, model_version))
