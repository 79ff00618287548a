"""SageMaker's container contract: ``GET /ping`` and ``POST /invocations``.

``/invocations`` takes a V2 inference request: JSON, or the binary tensor extension under Triton's SageMaker
content type ``application/vnd.sagemaker-triton.binary+json;json-header-size=N`` (SageMaker forwards no custom
headers, so the JSON header's length rides in the Content-Type, as Triton's SageMaker frontend reads it);
binary outputs come back under the same content type. A TF Serving body (``instances`` / ``inputs`` object)
is answered in its own format. The target model is the one ``X-Amzn-SageMaker-Custom-Attributes:
model=<name>[,version=<v>]`` names, else ``OIP_DEFAULT_MODEL`` / ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``, else
the only one.
"""

from __future__ import annotations

from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from adapters.errors import InvalidInput, UnsupportedMediaType
from adapters.types import InferCall, InferResult
from handler.codecs.request import DECODER
from handler.codecs.response import encode_infer_response
from handler.codecs.tfserving import decode_predict
from handler.config.platform import Platform, custom_attributes, target_model
from handler.config.settings import Settings
from handler.inference.byte_budget import Held
from handler.inference.exchange import Encoded, Exchange
from handler.inference.service import InferenceService
from handler.protocol.limits import byte_count
from handler.protocol.resolved_model import ResolvedModel
from handler.rest.body import decompress, read_body
from handler.rest.responses import JSON, json_response
from handler.rest.routes import route
from handler.rest.v1 import predict_response

SAGEMAKER_TRITON_BINARY: Final = "application/vnd.sagemaker-triton.binary+json"
JSON_HEADER_SIZE: Final = "json-header-size"
CUSTOM_ATTRIBUTES: Final = "x-amzn-sagemaker-custom-attributes"


def json_header_size(content_type: str | None) -> int | None:
    """None for a JSON body; the JSON header's length for Triton's SageMaker binary content type."""
    media_type, *params = [part.strip() for part in (content_type or "").split(";")]
    media_type = media_type.lower()
    if media_type in ("", "application/json"):
        return None
    if media_type != SAGEMAKER_TRITON_BINARY:
        raise UnsupportedMediaType(
            f"Content-Type '{media_type}' is not supported on /invocations; send application/json or "
            f"{SAGEMAKER_TRITON_BINARY};{JSON_HEADER_SIZE}=<length of the JSON header>"
        )
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == JSON_HEADER_SIZE:
            text = value.strip()
            size = byte_count(text)
            if size is not None:
                return size
            if text.isdecimal():
                raise InvalidInput(f"{JSON_HEADER_SIZE} of {len(text)} digits is larger than any body")
            raise InvalidInput(f"{JSON_HEADER_SIZE} '{value}' is not a non-negative integer")
    raise InvalidInput(f"Content-Type {SAGEMAKER_TRITON_BINARY} needs the parameter {JSON_HEADER_SIZE}=<n>")


def add_sagemaker_routes(app: Starlette, service: InferenceService, platform: Platform) -> None:
    """``/ping`` (200 once every model is ready, 503 before) and ``/invocations``."""
    dataplane, settings = service.dataplane, service.settings

    @route(app, "GET", "/ping", tags=["sagemaker"])
    async def ping() -> Response:
        ready = await dataplane.ready()
        return json_response({"ready": ready}, 200 if ready else 503)

    @route(app, "POST", "/invocations", tags=["sagemaker"])
    async def invocations(request: Request) -> Response:
        attributes = custom_attributes(request.headers.get(CUSTOM_ATTRIBUTES))
        name, version = target_model(dataplane.model_names(), platform.default_model, attributes)
        return await service.answer(name, version, InvocationExchange(request, settings))


class InvocationExchange(Exchange[Response]):
    """One ``/invocations`` request: a V2 inference request (JSON, or Triton's SageMaker binary content type) or a
    TF Serving body, answered in its own format."""

    __slots__ = ("body", "header_size", "kind", "request", "settings")

    def __init__(self, request: Request, settings: Settings) -> None:
        self.request, self.settings = request, settings
        self.body, self.header_size, self.kind = b"", None, ""

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        model.backend  # noqa: B018 - an unknown model or version is 404 before the body is read
        headers, limit = self.request.headers, self.settings.max_body_bytes
        header_size = self.header_size = json_header_size(headers.get("content-type"))
        wire = await read_body(self.request, limit)
        body = self.body = decompress(wire, headers.get("content-encoding"), limit)
        if header_size is not None and header_size > len(body):
            raise InvalidInput(f"{JSON_HEADER_SIZE} {header_size} is larger than the body ({len(body)} bytes)")
        return len(wire)

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        view, header_size = memoryview(self.body), self.header_size
        document = DECODER.parse(view[:header_size] if header_size is not None else view, service.cap_counts)
        if header_size is None and ("instances" in document or isinstance(document.get("inputs"), dict)):
            metadata = await service.metadata(model)
            call, self.kind = decode_predict(document, metadata.inputs, service.max_tensor_bytes)
            return call
        binary = view[header_size:] if header_size is not None else None
        counts = await service.counts(model)
        return DECODER.decode_document(document, binary, service.max_tensor_bytes, counts)

    def encode(self, result: InferResult, call: InferCall) -> Encoded[Response]:
        if self.kind:
            response = predict_response(result, call, self.kind)
        else:
            content, json_length = encode_infer_response(result, call)
            media_type = JSON if json_length is None else f"{SAGEMAKER_TRITON_BINARY};{JSON_HEADER_SIZE}={json_length}"
            response = Response(content, 200, media_type=media_type)
        return Encoded(response, len(response.body), self.body, bytes(response.body))
