"""The API's documents: ``/openapi.json``, Swagger UI at ``/docs`` and ReDoc at ``/redoc``.

Swagger UI and ReDoc are served by the app itself with the files fastapi-offline ships (FastAPI's recipe for
self-hosted docs): no CDN, so they work on an edge box or in a VPC without egress. FastAPI's page builders and the
OpenAPI document (``rest/openapi.py``, pydantic's schemas) are imported the first time one of these pages is asked
for, never when the app is built: no other request needs them, and importing FastAPI is about half of a cold start
(docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from handler.rest.routes import V2Route

OPENAPI_URL: Final = "/openapi.json"
SWAGGER_URL: Final = "/docs"
OAUTH2_REDIRECT_URL: Final = "/docs/oauth2-redirect"
REDOC_URL: Final = "/redoc"
#: Where the app serves Swagger UI's and ReDoc's files.
DOCS_ASSETS: Final = "/static-offline-docs"
DESCRIPTION: Final = "Open Inference Protocol (KServe/Triton V2) with Triton's binary tensor extension."


@dataclass(frozen=True)
class ApiInfo:
    """The document's title, version and description."""

    title: str
    version: str
    description: str = DESCRIPTION


def _assets() -> str:
    """fastapi-offline's static files, found without importing the package (its ``__init__`` imports FastAPI)."""
    spec = find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("fastapi-offline is not installed: it is one of oip-serverless' dependencies")
    return str(Path(next(iter(spec.submodule_search_locations))) / "static")


class OpenApiDocument:
    """The app's OpenAPI document, built by FastAPI from its routes the first time it is asked for."""

    def __init__(self, app: Starlette, info: ApiInfo) -> None:
        self.app = app
        self.info = info
        self.document: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self.document is None:
            from handler.rest.openapi import build_openapi

            self.document = build_openapi(self.app.routes, self.info.title, self.info.version, self.info.description)
        return self.document


def docs_routes(document: OpenApiDocument) -> list[BaseRoute]:
    """``/openapi.json``, ``/docs`` (with its OAuth2 redirect page), ``/redoc`` and their static files."""
    title = document.info.title

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(document())

    async def swagger_ui(request: Request) -> HTMLResponse:
        from fastapi.openapi.docs import get_swagger_ui_html

        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{OPENAPI_URL}",
            title=f"{title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )

    async def swagger_ui_redirect(request: Request) -> HTMLResponse:
        from fastapi.openapi.docs import get_swagger_ui_oauth2_redirect_html

        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        from fastapi.openapi.docs import get_redoc_html

        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{OPENAPI_URL}",
            title=f"{title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            with_google_fonts=False,
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        )

    return [
        Mount(DOCS_ASSETS, StaticFiles(directory=_assets()), name="static-offline-docs"),
        *(
            V2Route(path, endpoint, "GET", tags=[], include_in_schema=False)
            for path, endpoint in (
                (OPENAPI_URL, openapi),
                (SWAGGER_URL, swagger_ui),
                (OAUTH2_REDIRECT_URL, swagger_ui_redirect),
                (REDOC_URL, redoc),
            )
        ),
    ]
