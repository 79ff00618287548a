"""The ``s3_tensors`` extension's reads and writes: tensors by reference in S3, for every transport alike.

``InferenceService`` hands a call here when it has an input whose data the decoder left ``PENDING`` or a requested
output naming an S3 location (``codecs/s3_references.py`` says how the parameters read). ``S3Tensors.prepare``
checks every location against the configured prefixes (403 naming them, nothing read), then reads each input: a
HEAD first (a size over ``OIP_MAX_TENSOR_BYTES`` is 413, a size that does not fit the shape and datatype 400, both
naming the input, nothing downloaded), then one ranged GET, on the ETag the HEAD saw, into one buffer allocated to
the tensor's size, decoded as binary-extension data is. ``S3Tensors.store`` writes each output so named in the same
layout (s3transfer's multipart upload for a large one, straight from the array) and answers it with its location
and byte size in place of its data.

Before any S3 request, the inference service has checked the call against the model (``call_checks.py``); before
any GET, the HEADs' sizes are checked: each within ``OIP_MAX_TENSOR_BYTES`` and its shape, all of them with the
inline tensors within ``OIP_MAX_REQUEST_BYTES`` (413), and held of the process's bytes in flight
(``byte_budget.py``: 503 with Retry-After when other requests hold too many). Two outputs may not be written to
one object (400).

boto3 is imported on first use (the ``s3`` extra; Lambda's Python runtime has it). botocore's exceptions become
ours in ``s3_errors.py``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import Forbidden, InvalidInput, PayloadTooLarge
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
from handler.config.settings import MAX_REQUEST_BYTES, Settings
from handler.inference.byte_budget import Held
from handler.inference.s3_errors import Access, translated
from handler.inference.s3_errors import StoreUnavailable as StoreUnavailable  # re-exported: the error it raises
from handler.protocol.limits import element_count, over_request_budget

_SSE: Final = {"aes256": "AES256", "aws:kms": "aws:kms"}


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
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        self.prefixes = tuple(prefixes)
        self.max_tensor_bytes = max_tensor_bytes
        #: OIP_MAX_REQUEST_BYTES: the most a request's inline tensors and S3 objects may hold together.
        self.max_request_bytes = max_request_bytes
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

    async def prepare(self, call: InferCall, held: Held | None = None) -> tuple[InferCall, Destinations]:
        """The call with its inputs read from S3 and its outputs' S3 parameters taken off (the backend, ours or
        Triton's, never sees them), and where each of those outputs goes. Every location is checked before
        anything is read, and every input's size (a HEAD each) before any is downloaded: the sum with the inline
        tensors within ``max_request_bytes`` (413), and held of the process's bytes in flight (``held``: 503 when
        other requests hold too many) while the request runs."""
        reads: list[tuple[int, Tensor, Location]] = []
        for index, tensor in enumerate(call.inputs):
            if tensor.data is PENDING:
                reads.append((index, tensor, self._checked(f"input '{tensor.name}'", tensor.parameters)))
        destinations: Destinations = {}
        outputs: list[RequestedOutput] = []
        for output in call.outputs:
            if output.parameters and is_reference(output.parameters):
                destinations[output.name] = self._output_location(output, destinations)
                output = replace(output, parameters=model_parameters(output.parameters))
            outputs.append(output)
        inputs = list(call.inputs)
        if reads:
            heads = await asyncio.gather(*(asyncio.to_thread(self.head, tensor, place) for _, tensor, place in reads))
            self._within_budget(call, [size for size, _ in heads], held)
            arrays = await asyncio.gather(
                *(
                    asyncio.to_thread(self.get, tensor, place, head)
                    for (_, tensor, place), head in zip(reads, heads, strict=True)
                )
            )
            for (index, tensor, _), array in zip(reads, arrays, strict=True):
                inputs[index] = replace(tensor, data=array, parameters=model_parameters(tensor.parameters))
        return replace(call, inputs=tuple(inputs), outputs=tuple(outputs)), destinations

    def _within_budget(self, call: InferCall, sizes: list[int], held: Held | None) -> None:
        """413 when the inline tensors and the objects' bytes together are over ``max_request_bytes``; else the
        objects' bytes held of the process's budget (503 when other requests hold too many)."""
        referenced = sum(sizes)
        inline = sum(tensor.data.nbytes for tensor in call.inputs if tensor.data is not PENDING)
        if inline + referenced > self.max_request_bytes:
            raise over_request_budget(
                f"the request's tensors ({inline} bytes inline, {referenced} in S3)",
                inline + referenced,
                self.max_request_bytes,
                "; nothing was read from S3",
            )
        if held is not None:
            held.take(referenced, f"reading {len(sizes)} S3 object{'s' if len(sizes) > 1 else ''}")

    def _output_location(self, output: RequestedOutput, taken: Destinations) -> Location:
        what = f"output '{output.name}'"
        place = self._checked(what, output.parameters)
        if place.offset:
            raise InvalidInput(f"{what}: an S3 object is written whole; its offset must be 0, not {place.offset}")
        for other, elsewhere in taken.items():
            if (elsewhere.bucket, elsewhere.key) == (place.bucket, place.key):
                raise InvalidInput(
                    f"{what} and output '{other}' are both to be written to {place.uri}; give each output an S3 "
                    "object of its own"
                )
        return place

    def read(self, tensor: Tensor, place: Location) -> np.ndarray:
        """The tensor ``place`` holds, checked as binary-extension data is (runs in a worker thread)."""
        return self.get(tensor, place, self.head(tensor, place))

    def head(self, tensor: Tensor, place: Location) -> tuple[int, str]:
        """How many bytes of ``place`` hold the tensor, checked against its shape and the tensor limit, and the
        object's ETag (a HEAD; runs in a worker thread)."""
        with translated(Access(f"input '{tensor.name}'", "read", place)):
            head = self.client.head_object(Bucket=place.bucket, Key=place.key)
        return self._size(tensor, place, int(head["ContentLength"])), head["ETag"]

    def get(self, tensor: Tensor, place: Location, head: tuple[int, str]) -> np.ndarray:
        """The tensor's ``size`` bytes of the object ``head`` describes (``(size, etag)``), decoded (one ranged GET
        into one buffer; runs in a worker thread)."""
        what = f"input '{tensor.name}'"
        size, etag = head
        buffer = bytearray(size)
        if size:
            with translated(Access(what, "read", place)):
                got = self.client.get_object(
                    Bucket=place.bucket,
                    Key=place.key,
                    Range=f"bytes={place.offset}-{place.offset + size - 1}",
                    IfMatch=etag,
                )
                filled = _fill(got["Body"], memoryview(buffer))
            if filled != size:
                raise InvalidInput(
                    f"{what}: {place.uri} gave {filled} of the {size} bytes asked for (it changed while it was read?)"
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


def tensor_store(settings: Settings) -> S3Tensors | None:
    """The extension's reads and writes under OIP_S3_TENSOR_PREFIXES, within the settings' tensor and request
    limits; None when no prefix is configured (the extension is off)."""
    if not settings.s3_tensor_prefixes:
        return None
    return S3Tensors(
        settings.s3_tensor_prefixes,
        settings.max_tensor_bytes,
        settings.s3_tensor_sse,
        settings.s3_tensor_kms_key,
        max_request_bytes=settings.max_request_bytes,
    )


async def prepare_references(
    store: S3Tensors | None, call: InferCall, held: Held | None = None
) -> tuple[InferCall, Destinations]:
    """``store.prepare(call, held)``; InvalidInput saying the extension is off when there is no store."""
    if store is None:
        raise extension_off(call)
    return await store.prepare(call, held)


async def store_references(store: S3Tensors | None, result: InferResult, destinations: Destinations) -> InferResult:
    """``store.store(result, destinations)`` (``prepare_references`` made both)."""
    if store is None or not destinations:
        return result
    return await store.store(result, destinations)
