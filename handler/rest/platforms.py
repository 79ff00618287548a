"""The route families beyond V2's core that every app carries: the ``model_versions`` extension, KServe V1 /
TF Serving, SageMaker's ``/ping`` and ``/invocations``, and Vertex AI's routes when the environment names them.
"""

from __future__ import annotations

from starlette.applications import Starlette

from handler.inference.service import InferenceService
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.platform import Platform
from handler.protocol.settings import Settings
from handler.rest.sagemaker import add_sagemaker_routes
from handler.rest.v1 import add_v1_routes
from handler.rest.versions import add_version_routes
from handler.rest.vertex import add_vertex_routes


def add_platform_routes(
    app: Starlette, dataplane: DataPlane, settings: Settings, telemetry: Telemetry, platform: Platform | None = None
) -> None:
    """Register the routes; ``platform`` defaults to the environment's (``settings.platform``)."""
    platform = platform or settings.platform
    service = InferenceService(dataplane, settings, telemetry)
    catalog = add_version_routes(app, dataplane, settings)
    add_v1_routes(app, service, catalog)
    add_sagemaker_routes(app, service, platform)
    add_vertex_routes(app, service, platform)
