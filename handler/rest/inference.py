"""The inference route: JSON, binary-extension and raw binary requests, compressed or not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from adapters.errors import InvalidInput
from adapters.types import InferCall, InferResult
from handler.codecs.request import DECODER, decode_raw_request
from handler.codecs.response import encode_infer_response
from handler.inference.byte_budget import Held
from handler.inference.exchange import Encoded, Exchange
from handler.inference.service import InferenceService
from handler.protocol.limits import byte_count, over_request_budget
from handler.protocol.resolved_model import ResolvedModel
from handler.rest.body import (
    INFERENCE_HEADER_CONTENT_LENGTH,
    check_media_type,
    declared_size,
    decompress,
    read_receive,
)
from handler.rest.responses import infer_response
from handler.rest.routes import V2Route
from handler.rest.triton_passthrough import as_is, forwarded_answer

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded


def _parse_header_length(value: str | None) -> int | None:
    if value is None:
        return None
    if value.isdecimal():  # of more than SIZE_DIGITS digits: ``receive`` reads the others
        raise InvalidInput(f"Inference-Header-Content-Length of {len(value)} digits is larger than any body")
    try:
        length = int(value)
    except ValueError:
        raise InvalidInput(f"Inference-Header-Content-Length '{value}' is not an integer") from None
    if length < 0:
        raise InvalidInput("Inference-Header-Content-Length must not be negative")
    return length


#: JSON texts (a body, or a binary request's header) of this many bytes or more are decoded in a thread of their
#: own, one at a time: a body of many small JSON values that the counts do not bound takes long to decode in
#: Python, and meanwhile the event loop still answers other requests (it gets the GIL back every
#: ``sys.getswitchinterval``). Below it, the hand-over would cost more than it saves (docs/performance.md).
DECODE_ON_LOOP_BYTES: Final = 256 * 1024

#: The inference routes' paths.
INFER_PATHS: tuple[str, ...] = (
    "/v2/models/{model_name}/infer",
    "/v2/models/{model_name}/versions/{model_version}/infer",
)


class Inference:
    """The inference endpoint, whichever way the request arrived (the fast path or the route): each request is an
    ``InferExchange`` answered by the process's ``InferenceService``."""

    def __init__(self, service: InferenceService) -> None:
        self.service = service
        self.settings = service.settings
        self._decoding: ThreadPoolExecutor | None = None

    def decoder(self) -> ThreadPoolExecutor:
        """The thread that decodes large JSON texts, started on first use (a process that never sees one has none)."""
        if self._decoding is None:
            self._decoding = ThreadPoolExecutor(1, thread_name_prefix="oip-decode")
        return self._decoding

    def __call__(
        self, model_name: str, model_version: str | None, headers: Mapping[str, str], receive: Receive
    ) -> Awaitable[Response]:
        """Answer one request whose body comes from the ASGI ``receive`` (the app's own on the fast path, the
        ``Request``'s on the route): the service's coroutine, awaited by the caller; V2Error for the error handlers
        (``rest/errors.py``) to turn into ``{"error"}``."""
        return self.service.answer(model_name, model_version, InferExchange(self, headers, receive))


class InferExchange(Exchange[Response]):
    """One V2 inference request over HTTP: its body read within the limits and budgets, decoded (JSON, binary
    extension, raw binary) and answered (compressed as the client accepts), or passed through to Triton as it is."""

    __slots__ = ("body", "headers", "inference", "json_length", "receive_body", "wire")

    def __init__(self, inference: Inference, headers: Mapping[str, str], receive: Receive) -> None:
        self.inference, self.headers, self.receive_body = inference, headers, receive
        self.wire: bytes | memoryview = b""
        self.body: bytes | memoryview = b""
        #: Inference-Header-Content-Length when it is ASCII digits (most requests that have it); None otherwise.
        self.json_length: int | None = None

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        """The body as it came (``wire``) and decompressed (``body``); its size as it came.

        The body is read within the body limit and the request budget, held of the bytes in flight before it is
        read (by its Content-Length; by the most it may be when it has none, then by what it was). A chunked body's
        Content-Length, if it came with one, says nothing of it (RFC 9112 6.3: Transfer-Encoding overrides it): its
        size is what arrives. A binary-extension body to be decoded here, joined from several messages, has its
        tensor bytes aligned as it is joined (``read_receive``)."""
        headers, settings = self.headers, self.inference.settings
        check_media_type(headers.get("content-type"))
        value = headers.get(INFERENCE_HEADER_CONTENT_LENGTH)
        # a byte count, as most requests send, read at once; any other value is ``decode``'s error
        json_length = self.json_length = None if value is None else byte_count(value)
        encoding = headers.get("content-encoding")
        limit, budget = settings.max_body_bytes, settings.max_request_bytes
        declared = None if "transfer-encoding" in headers else headers.get("content-length")
        size = declared_size(declared, limit)  # over the body limit: its 413
        if size is not None:
            if size > budget:
                raise over_request_budget("request body", size, budget, "; nothing was read")
            held.take(size, "a request body")
        else:
            held.take(min(limit, budget), "a request body of unknown length")
        aligned = json_length if encoding is None and not model.passes_through else None
        # the declared length was checked above: the reader only counts what arrives
        wire = self.wire = await read_receive(self.receive_body, None, limit, aligned)
        if len(wire) != held.size:
            held.settle(len(wire))
        if len(wire) > budget:
            raise over_request_budget("request body", len(wire), budget)
        body = self.body = wire if encoding is None else decompress(wire, encoding, settings.max_body_bytes)
        if body is not wire:  # decompressed: its bytes are in memory beside the compressed ones
            held.count(len(body))
            if len(body) > settings.max_request_bytes:
                raise over_request_budget("decompressed request body", len(body), settings.max_request_bytes)
        return len(wire)

    def pass_through(self, model: ResolvedModel) -> tuple[bytes, dict[str, str]] | None:
        return as_is(self.headers, bytes(self.wire))  # bytes as it came: only a body to decode is joined aligned

    def encode_forwarded(self, model: ResolvedModel, forwarded: Forwarded) -> Encoded[Response]:
        response, content = forwarded_answer(forwarded, model.name, self.headers.get("accept-encoding"))
        return Encoded(response, len(response.body), self.wire, content)

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        body = self.body
        header_length = self.json_length
        if header_length is None:
            header_length = _parse_header_length(self.headers.get(INFERENCE_HEADER_CONTENT_LENGTH))
        if header_length == 0:
            return await _raw_call(service, model, body)
        counts = service.known_counts(model) or await service.counts(model)
        text = len(body) if header_length is None else header_length
        if text < DECODE_ON_LOOP_BYTES:
            return DECODER.decode(body, header_length, service.max_tensor_bytes, counts)
        # walking a large JSON text may take long: other requests go on meanwhile
        return await asyncio.get_running_loop().run_in_executor(
            self.inference.decoder(), DECODER.decode, body, header_length, service.max_tensor_bytes, counts
        )

    def encode(self, result: InferResult, call: InferCall) -> Encoded[Response]:
        content, json_length = encode_infer_response(result, call)
        response = infer_response(content, json_length, self.headers.get("accept-encoding"))
        return Encoded(response, len(response.body), self.body, content)


async def _raw_call(service: InferenceService, model: ResolvedModel, body: bytes | memoryview) -> InferCall:
    metadata = await service.metadata(model)
    if len(metadata.inputs) != 1:
        raise InvalidInput(
            "a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input; "
            f"'{model.name}' has {len(metadata.inputs)}"
        )
    return decode_raw_request(body, metadata.inputs[0], service.max_tensor_bytes, metadata.max_batch_size)


def inference_routes(inference: Inference) -> list[V2Route]:
    """``POST /v2/models/{m}[/versions/{v}]/infer``.

    ``InferEntry`` (``rest/infer_entry.py``) answers these requests before routing; the routes keep the routing
    table's answers for other methods (405) and serve when the app runs without that entry.
    """

    async def infer(request: Request) -> Response:
        params = request.path_params
        return await inference(params["model_name"], params.get("model_version"), request.headers, request.receive)

    return [V2Route(path, infer, "POST", tags=["inference"]) for path in INFER_PATHS]
