"""The ``s3_tensors`` extension's reads and writes: tensors by reference in S3, for every transport alike.

``InferenceService`` hands a call here when it has an input whose data the decoder left ``PENDING`` or a requested
output naming an S3 location (``codecs/s3_references.py`` says how the parameters read). ``S3Tensors.prepare``
checks every location against the configured prefixes (403 naming them, nothing read), then reads each input: a
HEAD first (a size over ``OIP_MAX_TENSOR_BYTES`` is 413, a size that does not fit the shape and datatype 400, both
naming the input, nothing downloaded), then one ranged GET, on the ETag the HEAD saw, into one buffer allocated to
the tensor's size, decoded as binary-extension data is. ``S3Tensors.store`` writes each output so named in the same
layout (s3transfer's multipart upload for a large one, straight from the array) and answers it with its location
and byte size in place of its data.

boto3 is imported on first use (the ``s3`` extra; Lambda's Python runtime has it). botocore's exceptions become
ours here, by type, in one table (``error_table``), most specific first.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Final, NamedTuple

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import ErrorCode, Forbidden, InvalidInput, PayloadTooLarge, UpstreamError, V2Error
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.codecs.binary_data import decode_binary_data, encode_binary_data
from handler.codecs.s3_references import (
    EXTENSION,
    PENDING,
    S3_BYTE_SIZE,
    S3_URI,
    STORED,
    Location,
    ViewReader,
    allowed,
    is_reference,
    location,
    model_parameters,
)
from handler.protocol.limits import element_count

#: Seconds a client is asked to wait before retrying when S3 could not be reached or asked us to slow down.
RETRY_AFTER: Final = 1.0
_SSE: Final = {"aes256": "AES256", "aws:kms": "aws:kms"}


class StoreUnavailable(V2Error):
    """S3 could not be reached, or answered that it cannot serve now: retryable (503 with Retry-After)."""

    code = ErrorCode.UNAVAILABLE
    retryable = True


class Access(NamedTuple):
    """What was being done when S3 failed: ``input 'x'`` or ``output 'y'``, ``read`` or ``write``, and where."""

    what: str
    verb: str
    place: Location


def mentions_references(call: InferCall) -> bool:
    """Whether a call has an input in S3 or asks for an output to be written there."""
    for tensor in call.inputs:
        if tensor.data is PENDING:
            return True
    # A loop, not any(): this runs on every request, and any() over a generator costs twice as much.
    for output in call.outputs:  # noqa: SIM110
        if output.parameters and is_reference(output.parameters):
            return True
    return False


def extension_off(call: InferCall) -> InvalidInput:
    """The error for a call that uses the extension on a server where it is off."""
    names = [f"input '{t.name}'" for t in call.inputs if t.data is PENDING]
    names += [f"output '{o.name}'" for o in call.outputs if o.parameters and is_reference(o.parameters)]
    return InvalidInput(
        f"{names[0]} names an S3 location ('{S3_URI}'), but this server's {EXTENSION} extension is off "
        "(OIP_S3_TENSOR_PREFIXES configures the locations it may read and write); send the data in the request"
    )


#: Where each requested output goes, by name.
Destinations = dict[str, Location]


class S3Tensors:
    """Reads and writes tensors under ``prefixes`` (``s3://bucket/prefix/``, normalised by the settings)."""

    def __init__(
        self,
        prefixes: Sequence[str],
        max_tensor_bytes: int,
        sse: str = "",
        kms_key: str = "",
        client: Any = None,
    ) -> None:
        self.prefixes = tuple(prefixes)
        self.max_tensor_bytes = max_tensor_bytes
        self.extra_args: dict[str, str] = {"ContentType": "application/octet-stream"}
        if kms_key or sse == "aws:kms":
            self.extra_args["ServerSideEncryption"] = "aws:kms"
            if kms_key:
                self.extra_args["SSEKMSKeyId"] = kms_key
        elif sse:
            self.extra_args["ServerSideEncryption"] = _SSE[sse]
        self._client = client

    @property
    def client(self) -> Any:
        """The S3 client (boto3's, made on first use; it honours ``AWS_ENDPOINT_URL``)."""
        if self._client is None:
            self._client = s3_client()
        return self._client

    def _checked(self, what: str, parameters: Mapping[str, Any]) -> Location:
        place = location(what, parameters)
        if not allowed(place, self.prefixes):
            raise Forbidden(
                f"{what}: {place.uri[:300]} is outside the locations this server may read and write "
                f"({', '.join(self.prefixes)}); nothing was read or written"
            )
        return place

    async def prepare(self, call: InferCall) -> tuple[InferCall, Destinations]:
        """The call with its inputs read from S3 and its outputs' S3 parameters taken off (the backend, ours or
        Triton's, never sees them), and where each of those outputs goes. Every location is checked before
        anything is read."""
        reads: list[tuple[int, Tensor, Location]] = []
        for index, tensor in enumerate(call.inputs):
            if tensor.data is PENDING:
                reads.append((index, tensor, self._checked(f"input '{tensor.name}'", tensor.parameters)))
        destinations: Destinations = {}
        outputs: list[RequestedOutput] = []
        for output in call.outputs:
            if output.parameters and is_reference(output.parameters):
                destinations[output.name] = self._output_location(output)
                output = replace(output, parameters=model_parameters(output.parameters))
            outputs.append(output)
        inputs = list(call.inputs)
        if reads:
            arrays = await asyncio.gather(*(asyncio.to_thread(self.read, tensor, place) for _, tensor, place in reads))
            for (index, tensor, _), array in zip(reads, arrays, strict=True):
                inputs[index] = replace(tensor, data=array, parameters=model_parameters(tensor.parameters))
        return replace(call, inputs=tuple(inputs), outputs=tuple(outputs)), destinations

    def _output_location(self, output: RequestedOutput) -> Location:
        what = f"output '{output.name}'"
        place = self._checked(what, output.parameters)
        if place.offset:
            raise InvalidInput(f"{what}: an S3 object is written whole; its offset must be 0, not {place.offset}")
        return place

    def read(self, tensor: Tensor, place: Location) -> np.ndarray:
        """The tensor ``place`` holds, checked as binary-extension data is (runs in a worker thread)."""
        what = f"input '{tensor.name}'"
        with translated(Access(what, "read", place)):
            head = self.client.head_object(Bucket=place.bucket, Key=place.key)
            size = self._size(tensor, place, int(head["ContentLength"]))
            buffer = bytearray(size)
            if size:
                got = self.client.get_object(
                    Bucket=place.bucket,
                    Key=place.key,
                    Range=f"bytes={place.offset}-{place.offset + size - 1}",
                    IfMatch=head["ETag"],
                )
                filled = _fill(got["Body"], memoryview(buffer))
                if filled != size:
                    raise InvalidInput(
                        f"{what}: {place.uri} gave {filled} of the {size} bytes asked for (it changed while it "
                        "was read?)"
                    )
        return decode_binary_data(tensor.name, tensor.datatype, tensor.shape, memoryview(buffer))

    def _size(self, tensor: Tensor, place: Location, length: int) -> int:
        """How many bytes to read: the declared size, or the object's rest; 413 over the tensor limit, 400 when it
        does not fit the object or the shape."""
        what = f"input '{tensor.name}'"
        rest = length - place.offset
        if rest < 0:
            raise InvalidInput(f"{what}: offset {place.offset} is past the end of {place.uri} ({length} bytes)")
        size = rest if place.size is None else place.size
        if size > self.max_tensor_bytes:
            raise PayloadTooLarge(
                f"{what}: {place.uri} holds {size} bytes for it, over the limit of {self.max_tensor_bytes} bytes "
                "(OIP_MAX_TENSOR_BYTES); nothing was read"
            )
        if size > rest:
            raise InvalidInput(
                f"{what}: {S3_BYTE_SIZE} {size} from offset {place.offset} runs past the end of {place.uri} "
                f"({length} bytes): a partial object?"
            )
        if tensor.datatype != "BYTES":
            needed = element_count(tensor.shape) * numpy_dtype(tensor.datatype).itemsize
            if size != needed:
                held = f"{S3_BYTE_SIZE} is {size}" if place.size is not None else f"{place.uri} holds {size} bytes"
                raise InvalidInput(
                    f"{what}: shape {list(tensor.shape)} of {tensor.datatype} needs {needed} bytes but {held}"
                    f"{' from offset ' + str(place.offset) if place.offset else ''}; nothing was read"
                )
        return size

    async def store(self, result: InferResult, destinations: Destinations) -> InferResult:
        """The result with each output of ``destinations`` written to S3 and answered by its location."""
        outputs = list(result.outputs)
        writes = [(i, t) for i, t in enumerate(outputs) if t.name in destinations]
        sizes = await asyncio.gather(*(asyncio.to_thread(self.write, t, destinations[t.name]) for _, t in writes))
        for (index, tensor), size in zip(writes, sizes, strict=True):
            parameters = {**tensor.parameters, S3_URI: destinations[tensor.name].uri, S3_BYTE_SIZE: size}
            outputs[index] = replace(tensor, data=STORED, parameters=parameters)
        return replace(result, outputs=tuple(outputs))

    def write(self, tensor: Tensor, place: Location) -> int:
        """Write a tensor in the binary extension's layout (runs in a worker thread); its byte size."""
        what = f"output '{tensor.name}'"
        data = _wire_bytes(tensor)
        if place.size is not None and len(data) > place.size:
            raise InvalidInput(f"{what} needs {len(data)} bytes, more than its {S3_BYTE_SIZE} of {place.size}")
        with translated(Access(what, "write", place)):
            self.client.upload_fileobj(ViewReader(data), place.bucket, place.key, ExtraArgs=self.extra_args)
        return len(data)


def _wire_bytes(tensor: Tensor) -> memoryview:
    """A tensor's binary-extension bytes: a view of the array itself when it is contiguous already."""
    if tensor.datatype == "BYTES":
        return memoryview(encode_binary_data("BYTES", tensor.data))
    array = np.ascontiguousarray(tensor.data, dtype=numpy_dtype(tensor.datatype))
    return memoryview(array.reshape(-1).view(np.uint8))


def _fill(body: Any, view: memoryview) -> int:
    """Read a streaming body into ``view``; how many bytes it gave."""
    filled = 0
    try:
        while filled < len(view):
            count = body.readinto(view[filled:])
            if not count:
                break
            filled += count
    finally:
        body.close()
    return filled


@functools.cache
def s3_client() -> Any:
    """This process's S3 client, made once in a session of its own (clients are safe to share between threads)."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=60, max_pool_connections=32)
    return boto3.session.Session().client("s3", config=config)


# The error table: botocore's exceptions by type, most specific first, each to ours.

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


def tensor_store(prefixes: Sequence[str], max_tensor_bytes: int, sse: str = "", kms_key: str = "") -> S3Tensors | None:
    """The extension's reads and writes under ``prefixes`` (OIP_S3_TENSOR_PREFIXES); None when none are configured
    (the extension is off)."""
    return S3Tensors(prefixes, max_tensor_bytes, sse, kms_key) if prefixes else None


async def prepare_references(store: S3Tensors | None, call: InferCall) -> tuple[InferCall, Destinations]:
    """``store.prepare(call)``; InvalidInput saying the extension is off when there is no store."""
    if store is None:
        raise extension_off(call)
    return await store.prepare(call)


async def store_references(store: S3Tensors | None, result: InferResult, destinations: Destinations) -> InferResult:
    """``store.store(result, destinations)`` (``prepare_references`` made both)."""
    if store is None or not destinations:
        return result
    return await store.store(result, destinations)
