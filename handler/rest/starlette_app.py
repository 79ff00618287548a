"""``create_serving_app``: the V2 app that ``oip serve`` and the Lambda function run, a Starlette application.

Its routes are plain Starlette routes (``rest/routes.py``), declared once in the route modules and listed here
(``v2_routes``); ``rest/app.py``'s FastAPI app for embedding carries the same ones (``assemble``), so both answer
every request with the same bytes. FastAPI and pydantic are imported only when ``/docs``, ``/redoc`` or
``/openapi.json`` is first asked for (``rest/docs.py``). The app's ASGI entry answers inference requests before
Starlette's middleware and routing (``rest/infer_entry.py``); with OpenTelemetry on, a server span wraps that entry
(``observability/tracing.py``'s ``ServerSpans``), and the app is the same class either way.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from handler.config.settings import Settings
from handler.inference.service import InferenceService
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.rest.docs import ApiInfo, OpenApiDocument, docs_routes
from handler.rest.errors import install_error_handlers
from handler.rest.health import health_routes
from handler.rest.infer_entry import InferEntry
from handler.rest.inference import Inference, inference_routes
from handler.rest.metadata import metadata_routes
from handler.rest.platforms import add_platform_routes
from handler.rest.repository import repository_routes
from handler.rest.statistics import statistics_routes


def app_entry(app: ASGIApp, inference: Inference, settings: Settings) -> ASGIApp:
    """What the app's ``__call__`` runs: ``InferEntry`` in front of ``app``, in a server span with OpenTelemetry on."""
    entry: ASGIApp = InferEntry(app, inference)
    if settings.opentelemetry:
        from handler.observability.tracing import ServerSpans

        entry = ServerSpans(entry)
    return entry


class ServingApp(Starlette):
    """Starlette whose ASGI entry is ``app_entry``'s: inference requests are answered before its middleware and
    routing; every other request goes on to Starlette."""

    def __init__(self, inference: Inference, settings: Settings, lifespan: Lifespan[Starlette] | None = None) -> None:
        super().__init__(lifespan=lifespan)
        # No trailing-slash redirects: Starlette builds their absolute Location from the request's Host header, so
        # `GET /v2/models/iris/` with `Host: evil.example` would send the client there; a path with a trailing
        # slash is a 404 as any other unknown path.
        self.router.redirect_slashes = False
        self.entry = app_entry(super().__call__, inference, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.entry(scope, receive, send)


def v2_routes(
    dataplane: DataPlane, settings: Settings, inference: Inference, document: OpenApiDocument
) -> list[BaseRoute]:
    """The routes of the documents and of V2 with its extensions, in the order they are matched."""
    return [
        *docs_routes(document),
        *statistics_routes(dataplane),
        *metadata_routes(dataplane),
        *health_routes(dataplane),
        *inference_routes(inference),
        *repository_routes(dataplane, settings),
    ]


def assemble(
    app: Starlette,
    dataplane: DataPlane,
    settings: Settings,
    telemetry: Telemetry,
    inference: Inference,
    document: OpenApiDocument,
) -> None:
    """Every route of the V2 app and its error handlers, for ``create_serving_app`` and ``rest/app.py`` alike."""
    app.state.dataplane = dataplane
    app.state.service = inference.service
    install_error_handlers(app)
    app.router.routes.extend(v2_routes(dataplane, settings, inference, document))
    add_platform_routes(app, inference.service)


def create_serving_app(
    dataplane: DataPlane,
    settings: Settings | None = None,
    telemetry: Telemetry | None = None,
    lifespan: Lifespan[Starlette] | None = None,
    service: InferenceService | None = None,
) -> ServingApp:
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call, ``lifespan`` runs while it serves.
    ``service``: the process's inference service (``app.state.service``), which other transports share; built
    from the other arguments when not given."""
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    inference = Inference(service or InferenceService(dataplane, settings, telemetry))
    app = ServingApp(inference, settings, lifespan)
    info = ApiInfo("oip-serverless", dataplane.server_version)
    assemble(app, dataplane, settings, telemetry, inference, OpenApiDocument(app, info))
    return app
