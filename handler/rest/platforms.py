"""The route families beyond V2's core that every app carries: the ``model_versions`` extension, KServe V1 /
TF Serving, SageMaker's ``/ping`` and ``/invocations``, and Vertex AI's routes when the environment names them.
"""

from __future__ import annotations

from starlette.applications import Starlette

from handler.config.platform import Platform
from handler.inference.service import InferenceService
from handler.rest.sagemaker import add_sagemaker_routes
from handler.rest.v1 import add_v1_routes
from handler.rest.versions import add_version_routes
from handler.rest.vertex import add_vertex_routes


def add_platform_routes(app: Starlette, service: InferenceService, platform: Platform | None = None) -> None:
    """Register the routes, inference through the process's ``service``; ``platform`` defaults to the
    environment's (``settings.platform``)."""
    settings = service.settings
    platform = platform or settings.platform
    catalog = add_version_routes(app, service.dataplane, settings)
    add_v1_routes(app, service, catalog)
    add_sagemaker_routes(app, service, platform)
    add_vertex_routes(app, service, platform)
