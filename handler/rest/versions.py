"""The ``model_versions`` extension: ``GET /v2/models/{m}/versions`` and ``.../versions/{v}/resource``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import Response

from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.protocol.versions import Deployment, VersionCatalog
from handler.rest.responses import json_response
from handler.rest.routes import route


def add_version_routes(app: Starlette, dataplane: DataPlane, settings: Settings) -> VersionCatalog:
    """Version resources (AI Platform's ``Version``) of every local model; returns the catalog."""
    catalog = dataplane.version_catalog(settings.model_repository, Deployment.from_settings(settings))

    @route(app, "GET", "/v2/models/{model_name}/versions", tags=["model_versions"])
    async def list_versions(model_name: str) -> Response:
        return json_response({"versions": await catalog.list(model_name)})

    @route(app, "GET", "/v2/models/{model_name}/versions/{model_version}/resource", tags=["model_versions"])
    async def get_version(model_name: str, model_version: str) -> Response:
        return json_response(await catalog.get(model_name, model_version))

    return catalog
