"""The ``model_versions`` extension: ``GET /v2/models/{m}/versions`` and ``.../versions/{v}/resource``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from handler.config.settings import Settings
from handler.protocol.dataplane import DataPlane
from handler.protocol.version_catalog import Deployment, VersionCatalog
from handler.rest.responses import json_response
from handler.rest.routes import V2Route


def add_version_routes(app: Starlette, dataplane: DataPlane, settings: Settings) -> VersionCatalog:
    """Add the routes of the version resources (AI Platform's ``Version``) of every local model; returns the
    catalog."""
    catalog = dataplane.version_catalog(settings.model_repository, Deployment.from_settings(settings))

    async def list_versions(request: Request) -> Response:
        return json_response({"versions": await catalog.list(request.path_params["model_name"])})

    async def get_version(request: Request) -> Response:
        params = request.path_params
        return json_response(await catalog.get(params["model_name"], params["model_version"]))

    tags = ["model_versions"]
    app.router.routes += [
        V2Route("/v2/models/{model_name}/versions", list_versions, "GET", tags=tags),
        V2Route("/v2/models/{model_name}/versions/{model_version}/resource", get_version, "GET", tags=tags),
    ]
    return catalog
