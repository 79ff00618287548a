"""``create_app``: the V2 REST app, one module per route family; all work happens in the DataPlane and codecs."""

from __future__ import annotations

from importlib.resources import files
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.rest.errors import install_error_handlers
from handler.rest.health import add_health_routes
from handler.rest.infer_middleware import InferFastPath
from handler.rest.inference import Inference, add_inference_routes
from handler.rest.metadata import add_metadata_routes
from handler.rest.openapi import install_openapi
from handler.rest.platforms import add_platform_routes
from handler.rest.repository import add_repository_routes
from handler.rest.statistics import add_statistics_routes

#: FastAPI's own OpenTelemetry instrumentation, off: it asks the global providers on every request.
NO_OPENTELEMETRY: Final = {"tracing": False, "metrics": False, "logs": False}


#: Where the app serves Swagger UI's and ReDoc's files (fastapi-offline's copies).
DOCS_ASSETS: Final = "/static-offline-docs"


class V2App(FastAPI):
    """FastAPI whose ASGI entry point hands inference requests to the infer fast path (handler/rest/infer_middleware.py)
    first, before FastAPI's own entry, its middleware (server errors, telemetry, body limit, exceptions), routing
    and request objects; every other request goes on to FastAPI. The fast path reads the body within its own limit
    and turns every error, unexpected ones included, into an answer itself."""

    def __init__(self, *, infer_fast_path: Inference | None, **options: Any) -> None:
        super().__init__(**options)
        self.entry: ASGIApp = super().__call__
        if infer_fast_path is not None:
            self.entry = InferFastPath(self.entry, infer_fast_path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.entry(scope, receive, send)


def add_docs_pages(app: FastAPI) -> None:
    """/docs and /redoc with Swagger UI and ReDoc served by the app itself, FastAPI's recipe for self-hosted docs
    with the files fastapi-offline ships: no CDN, so they work on an edge box or in a VPC without egress."""
    assets = str(files("fastapi_offline").joinpath("static"))
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="static-offline-docs")
    redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=redirect,
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            with_google_fonts=False,
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )

    app.get("/docs", include_in_schema=False)(swagger_ui)
    app.get(redirect, include_in_schema=False)(oauth2_redirect)
    app.get("/redoc", include_in_schema=False)(redoc)


def create_app(
    dataplane: DataPlane,
    settings: Settings | None = None,
    telemetry: Telemetry | None = None,
    lifespan: Lifespan[FastAPI] | None = None,
) -> FastAPI:
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call, ``lifespan`` runs while it serves.

    Inference requests take the infer fast path in front of FastAPI (``V2App``); with OpenTelemetry configured it
    sits inside FastAPI's own instrumentation instead (Starlette's ``middleware=``), so they are traced as every
    other request is, and still skip FastAPI's routing.
    """
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    inference = Inference(dataplane, settings, telemetry)
    traced = settings.opentelemetry
    # No trailing-slash redirects: Starlette builds their absolute Location from the request's Host header, so
    # `GET /v2/models/iris/` with `Host: evil.example` would send the client there; a path with a trailing slash
    # is a 404 as any other unknown path.
    app = V2App(
        infer_fast_path=None if traced else inference,
        middleware=[Middleware(InferFastPath, inference=inference)] if traced else None,
        redirect_slashes=False,
        telemetry=None if traced else NO_OPENTELEMETRY,
        title="oip-serverless",
        version=dataplane.server_version,
        description="Open Inference Protocol (KServe/Triton V2) with Triton's binary tensor extension.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    add_docs_pages(app)
    app.state.dataplane = dataplane
    # FastAPI's per-endpoint spans need its own routes; otherwise plain ones (rest/routes.py) start faster.
    app.state.api_routes = traced
    install_error_handlers(app)
    install_openapi(app)
    add_statistics_routes(app, dataplane)
    add_metadata_routes(app, dataplane)
    add_health_routes(app, dataplane)
    add_inference_routes(app, inference)
    add_repository_routes(app, dataplane, settings)
    add_platform_routes(app, dataplane, settings, telemetry)
    return app
