"""One transport-neutral exception hierarchy.

Every failure a user can cause or meet is a ``V2Error``; the transports map its
``code`` to an HTTP status or a gRPC status (``handler/protocol/status.py``). Foreign
exceptions (onnxruntime, tritonclient, boto3) are translated into these at the
adapter boundary and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum


class ErrorCode(StrEnum):
    """Transport-neutral error kinds, named after gRPC status codes."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    UNAVAILABLE = "UNAVAILABLE"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    UPSTREAM = "UPSTREAM"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    INTERNAL = "INTERNAL"


class V2Error(Exception):
    """Base of every error this server reports; ``str(err)`` is the user-facing message."""

    code: ErrorCode = ErrorCode.INTERNAL
    retryable: bool = False
    #: Triton's failure reason for a server error of this kind (``nv_inference_request_failure``'s ``reason``):
    #: ``REJECTED`` for a refusal before the model runs; None leaves it to the metrics (BACKEND for a 5xx).
    failure_reason: str | None = None

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class InvalidInput(V2Error):
    """Malformed or inconsistent request: bad JSON, shape/data mismatch, unknown tensor."""

    code = ErrorCode.INVALID_ARGUMENT


class ModelNotFound(V2Error):
    """No such model, or no such version of it.

    The messages begin as Triton's do ("Request for unknown model: 'm' is not found"): Triton's own example clients
    look for that phrase.
    """

    code = ErrorCode.NOT_FOUND

    @classmethod
    def unknown_model(cls, name: str, known: Sequence[str]) -> ModelNotFound:
        """``name`` is no model of this server, which has ``known``."""
        models = ", ".join(known) or "no models"
        return cls(f"Request for unknown model: '{name}' is not found; this server has {models}")

    @classmethod
    def unknown_version(cls, name: str, version: str, versions: Sequence[str]) -> ModelNotFound:
        """``name`` has no version ``version``; it has ``versions``."""
        return cls(
            f"Request for unknown model: '{name}' version {version} is not found; "
            f"available versions: {', '.join(versions)}"
        )


class Forbidden(V2Error):
    """A request for something this server may not touch (an S3 location outside the configured prefixes)."""

    code = ErrorCode.PERMISSION_DENIED


class PayloadTooLarge(V2Error):
    """The request body (or what it would allocate) is over the configured limit."""

    code = ErrorCode.PAYLOAD_TOO_LARGE


class UnsupportedMediaType(V2Error):
    """A Content-Type or Content-Encoding this server does not read."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class ModelNotReady(V2Error):
    """The model exists but cannot serve now (failed to load, backend down)."""

    code = ErrorCode.UNAVAILABLE
    retryable = True


class Unsupported(V2Error):
    """A valid request for a feature this server does not implement."""

    code = ErrorCode.UNIMPLEMENTED


class UpstreamError(V2Error):
    """A remote backend answered with an error of its own."""

    code = ErrorCode.UPSTREAM


class UpstreamTimeout(V2Error):
    """A remote backend did not answer in time."""

    code = ErrorCode.DEADLINE_EXCEEDED
    retryable = True


class InternalError(V2Error):
    """A bug on our side; the message never carries internals."""

    code = ErrorCode.INTERNAL
