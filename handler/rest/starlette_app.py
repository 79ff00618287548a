"""``create_serving_app``: the V2 app that ``oip serve`` and the Lambda function run.

It is a Starlette application with the routes, error handlers and documents of ``rest/app.py``'s FastAPI app,
added by the same functions (``add_routes``), so it answers every request with the same bytes; FastAPI and pydantic
are imported only when ``/docs``, ``/redoc`` or ``/openapi.json`` is first asked for (``rest/docs.py``), which
keeps them off the cold path. With OpenTelemetry on it is the FastAPI app itself: FastAPI's instrumentation traces
its routes.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.rest.docs import ApiInfo, OpenApiDocument, add_docs_routes
from handler.rest.errors import install_error_handlers
from handler.rest.health import add_health_routes
from handler.rest.infer_middleware import InferFastPath
from handler.rest.inference import Inference, add_inference_routes
from handler.rest.metadata import add_metadata_routes
from handler.rest.platforms import add_platform_routes
from handler.rest.repository import add_repository_routes
from handler.rest.statistics import add_statistics_routes


class ServingApp(Starlette):
    """Starlette whose ASGI entry hands inference requests to the infer fast path (``rest/infer_middleware.py``)
    before its middleware and routing; every other request goes on to Starlette."""

    def __init__(self, inference: Inference, lifespan: Lifespan[Starlette] | None = None) -> None:
        super().__init__(lifespan=lifespan)
        # No trailing-slash redirects: Starlette builds their absolute Location from the request's Host header, so
        # `GET /v2/models/iris/` with `Host: evil.example` would send the client there; a path with a trailing
        # slash is a 404 as any other unknown path.
        self.router.redirect_slashes = False
        self.entry: ASGIApp = InferFastPath(super().__call__, inference)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.entry(scope, receive, send)


def add_routes(
    app: Starlette,
    dataplane: DataPlane,
    settings: Settings,
    telemetry: Telemetry,
    inference: Inference,
    document: OpenApiDocument,
) -> None:
    """Every route of the V2 app and its error handlers, for ``create_serving_app`` and ``rest/app.py`` alike."""
    app.state.dataplane = dataplane
    install_error_handlers(app)
    add_docs_routes(app, document)
    add_statistics_routes(app, dataplane)
    add_metadata_routes(app, dataplane)
    add_health_routes(app, dataplane)
    add_inference_routes(app, inference)
    add_repository_routes(app, dataplane, settings)
    add_platform_routes(app, dataplane, settings, telemetry)


def create_serving_app(
    dataplane: DataPlane,
    settings: Settings | None = None,
    telemetry: Telemetry | None = None,
    lifespan: Lifespan[Starlette] | None = None,
) -> Starlette:
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call, ``lifespan`` runs while it serves."""
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    if settings.opentelemetry:
        from handler.rest.app import create_app

        return create_app(dataplane, settings, telemetry, lifespan)
    inference = Inference(dataplane, settings, telemetry)
    app = ServingApp(inference, lifespan)
    add_routes(
        app,
        dataplane,
        settings,
        telemetry,
        inference,
        OpenApiDocument(app, ApiInfo("oip-serverless", dataplane.server_version)),
    )
    return app
