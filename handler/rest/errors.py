"""The exception handlers that always answer ``{"error": ...}``, with the status the protocol's table gives."""

from __future__ import annotations

import logging

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from adapters.errors import V2Error
from handler.protocol.status import status_of
from handler.protocol.unexpected import report_unexpected

logger = logging.getLogger(__name__)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """``{"error": message}`` with a status."""
    return Response(orjson.dumps({"error": message}), status, headers, media_type="application/json")


def v2_error_response(exc: V2Error) -> Response:
    """The answer to one of our errors: its status from the protocol's table, Retry-After when it has one."""
    headers = {"Retry-After": str(max(1, round(exc.retry_after)))} if exc.retry_after is not None else None
    return error_response(status_of(exc), exc.message, headers)


def unexpected_error_response(method: str, path: str) -> Response:
    """A 500 that hides internals; the exception being handled goes to the log under the error id it names."""
    return error_response(500, report_unexpected(logger, f"on {method} {path}"))


async def _on_v2_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, V2Error)
    return v2_error_response(exc)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {
        404: f"no such endpoint: {request.method} {request.url.path}",
        405: f"method {request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, dict(exc.headers or {}) or None)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return unexpected_error_response(request.method, request.url.path)


def install_error_handlers(app: Starlette) -> None:
    """Register the handlers: V2Error by code, HTTP errors and a hidden 500."""
    app.add_exception_handler(V2Error, _on_v2_error)
    app.add_exception_handler(HTTPException, _on_http_exception)
    app.add_exception_handler(Exception, _on_unexpected)
