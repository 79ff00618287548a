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
from adapters.types import InferCall
from handler.codecs.request import decode_infer_document, load_json_object
from handler.codecs.response import encode_infer_response
from handler.codecs.tfserving import ROW, decode_predict, encode_outputs, encode_predictions
from handler.inference.service import InferenceService
from handler.observability.telemetry import InferObservation
from handler.protocol.platform import Platform, custom_attributes, target_model
from handler.rest.body import decompress, read_body
from handler.rest.responses import JSON, json_response
from handler.rest.routes import route

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
            if not value.strip().isdigit():
                raise InvalidInput(f"{JSON_HEADER_SIZE} '{value}' is not a non-negative integer")
            return int(value)
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
        with service.observe(name, version) as observation:
            response = await _invoke(request, name, version, observation)
            observation.bytes_out = len(response.body)
            return response

    async def _invoke(request: Request, name: str, version: str | None, observation: InferObservation) -> Response:
        dataplane.check_model(name, version)  # an unknown model or version is 404 before the body is read
        header_size = json_header_size(request.headers.get("content-type"))
        body = await read_body(request, settings.max_body_bytes)
        observation.bytes_in = len(body)
        body = decompress(body, request.headers.get("content-encoding"), settings.max_body_bytes)
        view = memoryview(body)
        if header_size is not None and header_size > len(body):
            raise InvalidInput(f"{JSON_HEADER_SIZE} {header_size} is larger than the body ({len(body)} bytes)")
        call: InferCall
        with service.span("decode"):
            document = load_json_object(view[:header_size] if header_size is not None else view)
            if header_size is None and ("instances" in document or isinstance(document.get("inputs"), dict)):
                metadata = await dataplane.model_metadata(name, version)
                call, kind = decode_predict(document, metadata.inputs, service.max_tensor_bytes)
            else:
                binary = view[header_size:] if header_size is not None else None
                counts = await service.counts(name, version)
                call, kind = decode_infer_document(document, binary, service.max_tensor_bytes, counts), ""
        result = await service.infer(name, version, call, observation)
        with service.span("encode"):
            if kind:
                rows = call.inputs[0].shape[0] if kind == ROW else 0
                response = json_response(encode_predictions(result, rows) if kind == ROW else encode_outputs(result))
            else:
                content, json_length = encode_infer_response(result, call)
                media_type = (
                    JSON if json_length is None else f"{SAGEMAKER_TRITON_BINARY};{JSON_HEADER_SIZE}={json_length}"
                )
                response = Response(content, 200, media_type=media_type)
        observation.request_body, observation.response_body = body, bytes(response.body)
        return response
