"""Vertex AI custom-container routes: ``AIP_HEALTH_ROUTE`` and ``AIP_PREDICT_ROUTE``.

The predict route takes ``{"instances": [...], "parameters": {...}}`` (TF Serving's row format; the columnar
``inputs`` works too) and answers ``{"predictions": [...]}`` from the platform's target model
(``OIP_DEFAULT_MODEL``, or the only one). The health route answers 200 once that model is ready, 503 before.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from handler.config.platform import Platform, target_model
from handler.inference.service import InferenceService
from handler.rest.responses import json_response
from handler.rest.routes import route
from handler.rest.v1 import predict


def add_vertex_routes(app: Starlette, service: InferenceService, platform: Platform) -> None:
    """The routes Vertex AI sends health checks and prediction requests to, when it names them."""
    dataplane = service.dataplane

    if platform.health_route:

        @route(app, "GET", platform.health_route, tags=["vertex"], include_in_schema=False)
        async def vertex_health() -> Response:
            name, version = target_model(dataplane.model_names(), platform.default_model)
            ready = await dataplane.model_ready(name, version)
            return json_response({"name": name, "ready": ready}, 200 if ready else 503)

    if platform.predict_route:

        @route(app, "POST", platform.predict_route, tags=["vertex"], include_in_schema=False)
        async def vertex_predict(request: Request) -> Response:
            name, version = target_model(dataplane.model_names(), platform.default_model)
            return await predict(request, service, name, version)
