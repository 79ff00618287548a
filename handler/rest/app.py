"""``create_app``: the V2 REST app as a FastAPI application, to embed in a FastAPI service of one's own.

Its routes, error handlers, documents and ASGI entry are ``rest/starlette_app.py``'s (``assemble``, ``app_entry``),
the same route objects, so it answers as the app ``oip serve`` and the Lambda function run does; on top it has
FastAPI's validation handler for routes a user adds, and ``app.openapi()`` giving the same document as
``/openapi.json``.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.responses import Response
from starlette.types import Lifespan, Receive, Scope, Send

from handler.config.settings import Settings
from handler.inference.service import InferenceService
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.rest.docs import ApiInfo, OpenApiDocument
from handler.rest.errors import error_response
from handler.rest.inference import Inference
from handler.rest.starlette_app import app_entry, assemble

#: FastAPI's own OpenTelemetry instrumentation, off: with OpenTelemetry on, the app's entry has its server span
#: (``app_entry``), as the served app's has.
NO_OPENTELEMETRY: Final = {"tracing": False, "metrics": False, "logs": False}


class V2App(FastAPI):
    """FastAPI whose ASGI entry is ``app_entry``'s: inference requests are answered before FastAPI's own entry, its
    middleware, routing and request objects; every other request goes on to FastAPI."""

    def __init__(self, inference: Inference, settings: Settings, lifespan: Lifespan[FastAPI] | None, info: ApiInfo):
        super().__init__(
            redirect_slashes=False,  # as ServingApp's (rest/starlette_app.py)
            telemetry=NO_OPENTELEMETRY,
            title=info.title,
            version=info.version,
            description=info.description,
            openapi_url=None,  # rest/docs.py serves it, and /docs and /redoc
            docs_url=None,
            redoc_url=None,
            lifespan=lifespan,
        )
        self.entry = app_entry(super().__call__, inference, settings)

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
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call, ``lifespan`` runs while it serves."""
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    inference = Inference(InferenceService(dataplane, settings, telemetry))
    info = ApiInfo("oip-serverless", dataplane.server_version)
    app = V2App(inference, settings, lifespan, info)
    document = OpenApiDocument(app, info)
    app.openapi = document  # type: ignore[method-assign]
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    assemble(app, dataplane, settings, telemetry, inference, document)
    return app
