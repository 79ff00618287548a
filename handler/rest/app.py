"""``create_app``: the V2 REST app, one module per route family; all work happens in the DataPlane and codecs."""

from __future__ import annotations

import os
from typing import Final

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp

from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.rest.errors import install_error_handlers
from handler.rest.fast_path import InferFastPath
from handler.rest.health import add_health_routes
from handler.rest.inference import Inference, add_inference_routes
from handler.rest.metadata import add_metadata_routes
from handler.rest.openapi import install_openapi
from handler.rest.platforms import add_platform_routes
from handler.rest.repository import add_repository_routes
from handler.rest.statistics import add_statistics_routes

#: FastAPI's own OpenTelemetry instrumentation, off: it asks the global providers on every request.
NO_OPENTELEMETRY: Final = {"tracing": False, "metrics": False, "logs": False}


def opentelemetry_configured() -> bool:
    """Whether this process is set up for OpenTelemetry (``OIP_OTEL=1`` or the SDK's ``OTEL_*`` exporters)."""
    env = os.environ
    if env.get("OIP_OTEL") is not None:
        return env["OIP_OTEL"] not in ("0", "false", "False")
    return any(name in env for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"))


def put_in_front(app: FastAPI, inference: Inference) -> None:
    """Put the infer fast path in front of the app's middleware stack, wherever that stack is built.

    Inference requests then skip three ASGI layers (Starlette's server-error and FastAPI's telemetry and
    body-limit middleware) that have nothing to do for them: the fast path reads the body within its own limit
    and turns every error, unexpected ones included, into an answer itself. Everything else goes through the
    whole stack. (FastAPIOffline builds a plain FastAPI object, so this wraps the instance's builder.)
    """
    build_stack = app.build_middleware_stack

    def build_with_fast_path() -> ASGIApp:
        return InferFastPath(build_stack(), inference)

    app.build_middleware_stack = build_with_fast_path  # type: ignore[method-assign]


def create_app(dataplane: DataPlane, settings: Settings | None = None, telemetry: Telemetry | None = None) -> FastAPI:
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call."""
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    # /docs and /redoc with Swagger UI and ReDoc served by the app itself: no CDN, so they work on an edge box
    # or in a VPC without egress. No trailing-slash redirects: Starlette builds their absolute Location from the
    # request's Host header, so `GET /v2/models/iris/` with `Host: evil.example` would send the client there;
    # a path with a trailing slash is a 404 as any other unknown path.
    app = FastAPIOffline(
        redirect_slashes=False,
        telemetry=None if opentelemetry_configured() else NO_OPENTELEMETRY,
        title="oip-serverless",
        version=dataplane.server_version,
        description="Open Inference Protocol (KServe/Triton V2) with Triton's binary tensor extension.",
    )
    app.state.dataplane = dataplane
    # FastAPI's per-endpoint spans need its own routes; otherwise plain ones (rest/routes.py) start faster.
    app.state.api_routes = opentelemetry_configured()
    install_error_handlers(app)
    install_openapi(app)
    add_statistics_routes(app, dataplane)
    add_metadata_routes(app, dataplane)
    add_health_routes(app, dataplane)
    inference = Inference(dataplane, settings, telemetry)
    add_inference_routes(app, inference)
    put_in_front(app, inference)
    add_repository_routes(app, dataplane, settings)
    add_platform_routes(app, dataplane, settings, telemetry)
    return app
