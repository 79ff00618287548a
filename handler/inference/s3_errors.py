"""botocore's exceptions as ours, by type, in one table (``error_table``), most specific first: what the
``s3_tensors`` extension (``s3_tensors.py``) answers when S3 fails it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, NamedTuple

from adapters.errors import ErrorCode, Forbidden, InvalidInput, UpstreamError, V2Error
from handler.codecs.s3_references import Location

#: Seconds a client is asked to wait before retrying when S3 could not be reached or asked us to slow down.
RETRY_AFTER: Final = 1.0


class StoreUnavailable(V2Error):
    """S3 could not be reached, or answered that it cannot serve now: retryable (503 with Retry-After)."""

    code = ErrorCode.UNAVAILABLE
    retryable = True


class Access(NamedTuple):
    """What was being done when S3 failed: ``input 'x'`` or ``output 'y'``, ``read`` or ``write``, and where."""

    what: str
    verb: str
    place: Location


ErrorRow = tuple[type[BaseException], Callable[[Any, Access], V2Error | None]]

#: S3's error codes (a HEAD's bare status, for a HEAD has no body to name one) and what they mean here.
_MISSING: Final = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchBucket"})
_DENIED: Final = frozenset({"AccessDenied", "403", "Forbidden", "AllAccessDisabled", "KMS.AccessDeniedException"})
_ELSEWHERE: Final = frozenset(
    {"PermanentRedirect", "301", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}
)
_CHANGED: Final = frozenset({"PreconditionFailed", "412", "InvalidRange", "416"})
_BUSY: Final = frozenset(
    {"SlowDown", "503", "ServiceUnavailable", "InternalError", "500", "RequestTimeout", "RequestTimeTooSkewed"}
)


def _client_error(exc: Any, access: Access) -> V2Error:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    what, verb, place = access
    if code in _MISSING:
        missing = f"no bucket '{place.bucket}'" if code == "NoSuchBucket" else f"no object at {place.uri}"
        return InvalidInput(f"{what}: there is {missing}")
    if code in _DENIED:
        reason = "the object may not exist (so S3 answers without s3:ListBucket), or " if verb == "read" else ""
        return Forbidden(
            f"{what}: S3 denied this server access to {verb} {place.uri} ({code}): {reason}its role may not {verb} "
            "there"
        )
    if code in _ELSEWHERE:
        region = headers.get("x-amz-bucket-region") or error.get("Region") or "another region"
        return InvalidInput(
            f"{what}: bucket '{place.bucket}' is in {region}, which this server cannot reach through its S3 endpoint; "
            "use a bucket in the server's own region"
        )
    if code in _CHANGED:
        return InvalidInput(f"{what}: {place.uri} changed while it was read ({code}); send the request again")
    if code in _BUSY:
        return StoreUnavailable(
            f"{what}: S3 could not {verb} {place.uri} now ({code}); retry shortly", retry_after=RETRY_AFTER
        )
    return UpstreamError(f"{what}: S3 refused to {verb} {place.uri} ({code or 'no error code'})")


def _unreachable(exc: Any, access: Access) -> V2Error:
    return StoreUnavailable(
        f"{access.what}: S3 could not be reached to {access.verb} {access.place.uri}; retry shortly",
        retry_after=RETRY_AFTER,
    )


def _no_credentials(exc: Any, access: Access) -> V2Error:
    return StoreUnavailable(f"{access.what}: this server has no AWS credentials to {access.verb} S3 objects with")


@functools.cache
def error_table() -> tuple[ErrorRow, ...]:
    """botocore's exceptions, most specific first, to ours (None: not ours to translate, a bug)."""
    from botocore import exceptions as botocore

    return (
        (botocore.ClientError, _client_error),
        (botocore.NoCredentialsError, _no_credentials),
        (botocore.PartialCredentialsError, _no_credentials),
        (botocore.CredentialRetrievalError, _no_credentials),
        (botocore.ConnectionError, _unreachable),
        (botocore.HTTPClientError, _unreachable),
        (botocore.IncompleteReadError, _unreachable),
    )


@contextmanager
def translated(access: Access) -> Iterator[None]:
    """botocore's exceptions raised inside the block, raised as ours by ``error_table``; others go through."""
    try:
        yield
    except V2Error:
        raise
    except Exception as exc:
        for row, read in error_table():
            if isinstance(exc, row):
                mapped = read(exc, access)
                if mapped is not None:
                    raise mapped from None
        raise
