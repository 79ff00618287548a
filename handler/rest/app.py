"""``create_app``: the V2 REST app as a FastAPI application, to embed in a FastAPI service of one's own.

Its routes, error handlers and documents are ``rest/serving.py``'s (``add_routes``), so it answers as the app
``oip serve`` and the Lambda function run does; on top it has FastAPI's validation handler for routes a user adds,
``app.openapi()`` giving the same document as ``/openapi.json``, and, with OpenTelemetry on, FastAPI's own routes
and instrumentation.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.rest.docs import ApiInfo, OpenApiDocument
from handler.rest.errors import error_response
from handler.rest.infer_middleware import InferFastPath
from handler.rest.inference import Inference
from handler.rest.serving import add_routes

#: FastAPI's own OpenTelemetry instrumentation, off: it asks the global providers on every request.
NO_OPENTELEMETRY: Final = {"tracing": False, "metrics": False, "logs": False}


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


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    """FastAPI's validation errors (routes with typed parameters a user adds): 400 naming the first problems."""
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}" for error in exc.errors()[:5]
    )
    return error_response(400, f"invalid request: {problems}")


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
    info = ApiInfo("oip-serverless", dataplane.server_version)
    app = V2App(
        infer_fast_path=None if traced else inference,
        middleware=[Middleware(InferFastPath, inference=inference)] if traced else None,
        redirect_slashes=False,  # as ServingApp's (rest/serving.py)
        telemetry=None if traced else NO_OPENTELEMETRY,
        title=info.title,
        version=info.version,
        description=info.description,
        openapi_url=None,  # rest/docs.py serves it, and /docs and /redoc
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    # FastAPI's per-endpoint spans need its own routes; otherwise plain ones (rest/routes.py) start faster.
    app.state.api_routes = traced
    document = OpenApiDocument(app, info)
    app.openapi = document  # type: ignore[method-assign]
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    add_routes(app, dataplane, settings, telemetry, inference, document)
    return app
