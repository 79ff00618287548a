"""HTTP statuses for the error hierarchy, and the FastAPI handlers that always answer ``{"error": ...}``."""

from __future__ import annotations

import logging
from typing import Final

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from adapters.errors import ErrorCode, V2Error

logger = logging.getLogger(__name__)

#: ErrorCode -> HTTP status (cf. Triton's HttpCodeFromError).
HTTP_STATUS: Final[dict[ErrorCode, int]] = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.UNIMPLEMENTED: 501,
    ErrorCode.UPSTREAM: 502,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.INTERNAL: 500,
}

#: ErrorCode -> gRPC status code name.
GRPC_STATUS: Final[dict[ErrorCode, str]] = {
    ErrorCode.INVALID_ARGUMENT: "INVALID_ARGUMENT",
    ErrorCode.NOT_FOUND: "NOT_FOUND",
    ErrorCode.PAYLOAD_TOO_LARGE: "RESOURCE_EXHAUSTED",
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: "INVALID_ARGUMENT",
    ErrorCode.UNIMPLEMENTED: "UNIMPLEMENTED",
    ErrorCode.UPSTREAM: "UNKNOWN",
    ErrorCode.UNAVAILABLE: "UNAVAILABLE",
    ErrorCode.DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    ErrorCode.INTERNAL: "INTERNAL",
}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """``{"error": message}`` with a status."""
    return Response(orjson.dumps({"error": message}), status, headers, media_type="application/json")


def status_of(exc: V2Error) -> int:
    """The HTTP status of a V2Error."""
    return HTTP_STATUS[exc.code]


async def _on_v2_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, V2Error)
    headers = {"Retry-After": str(max(1, round(exc.retry_after)))} if exc.retry_after is not None else None
    return error_response(status_of(exc), exc.message, headers)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}" for error in exc.errors()[:5]
    )
    return error_response(400, f"invalid request: {problems}")


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {
        404: f"no such endpoint: {request.method} {request.url.path}",
        405: f"method {request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, message, dict(exc.headers or {}) or None)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal server error; the server log has the details")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers: V2Error by code, 400 for validation, HTTP errors and a hidden 500."""
    app.add_exception_handler(V2Error, _on_v2_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_http_exception)
    app.add_exception_handler(Exception, _on_unexpected)
