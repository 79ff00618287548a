"""The one table from our error codes to HTTP statuses and gRPC status codes (cf. Triton's HttpCodeFromError)."""

from __future__ import annotations

from typing import Final

from adapters.errors import ErrorCode, V2Error

#: ErrorCode -> HTTP status (cf. Triton's HttpCodeFromError).
HTTP_STATUS: Final[dict[ErrorCode, int]] = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.PERMISSION_DENIED: 403,
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
    ErrorCode.PERMISSION_DENIED: "PERMISSION_DENIED",
    ErrorCode.PAYLOAD_TOO_LARGE: "RESOURCE_EXHAUSTED",
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: "INVALID_ARGUMENT",
    ErrorCode.UNIMPLEMENTED: "UNIMPLEMENTED",
    ErrorCode.UPSTREAM: "UNKNOWN",
    ErrorCode.UNAVAILABLE: "UNAVAILABLE",
    ErrorCode.DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
    ErrorCode.INTERNAL: "INTERNAL",
}


def status_of(exc: V2Error) -> int:
    """The HTTP status of a V2Error."""
    return HTTP_STATUS[exc.code]
