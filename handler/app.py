"""``create_app``: the V2 REST routes, thin; all work happens in the DataPlane and the codec."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from adapters.errors import InvalidInput, Unsupported, V2Error
from adapters.types import InferCall, ModelMetadata
from handler.body import (
    INFERENCE_HEADER_CONTENT_LENGTH,
    check_media_type,
    compress,
    decompress,
    negotiate_encoding,
    read_body,
)
from handler.codec import decode_infer_request, decode_raw_request, encode_infer_response, load_json_object
from handler.dataplane import DataPlane
from handler.errors import install_error_handlers, status_of
from handler.openapi import install_openapi
from handler.settings import Settings
from handler.telemetry import InferObservation, Telemetry

JSON = "application/json"


def json_response(document: Any, status: int = 200) -> Response:
    """Serialise with orjson (numpy-aware)."""
    return Response(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), status, media_type=JSON)


def metadata_document(metadata: ModelMetadata) -> dict[str, Any]:
    """``$metadata_model_response`` from domain metadata."""
    return {
        "name": metadata.name,
        "versions": list(metadata.versions),
        "platform": metadata.platform,
        "inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.inputs],
        "outputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.outputs],
    }


def _parse_header_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        raise InvalidInput(f"Inference-Header-Content-Length '{value}' is not an integer") from None
    if length < 0:
        raise InvalidInput("Inference-Header-Content-Length must not be negative")
    return length


def create_app(dataplane: DataPlane, settings: Settings | None = None, telemetry: Telemetry | None = None) -> FastAPI:
    """The V2 app over a DataPlane; ``telemetry`` observes every infer call."""
    settings = settings or Settings()
    telemetry = telemetry or Telemetry()
    app = FastAPI(
        title="oip-serverless",
        version=dataplane.server_version,
        description="Open Inference Protocol (KServe/Triton V2) with Triton's binary tensor extension.",
    )
    app.state.dataplane = dataplane
    install_error_handlers(app)
    install_openapi(app)

    @app.get("/v2", tags=["metadata"])
    async def server_metadata() -> Response:
        return json_response(dataplane.server_metadata())

    @app.get("/v2/health/live", tags=["health"])
    async def server_live() -> Response:
        live = dataplane.live()
        return json_response({"live": live}, 200 if live else 400)

    @app.get("/v2/health/ready", tags=["health"])
    async def server_ready() -> Response:
        ready = await dataplane.ready()
        return json_response({"ready": ready}, 200 if ready else 400)

    @app.get("/v2/models/{model_name}/ready", tags=["health"])
    @app.get("/v2/models/{model_name}/versions/{model_version}/ready", tags=["health"])
    async def model_ready(model_name: str, model_version: str | None = None) -> Response:
        ready = await dataplane.model_ready(model_name, model_version)
        return json_response({"name": model_name, "ready": ready}, 200 if ready else 400)

    @app.get("/v2/models/{model_name}", tags=["metadata"])
    @app.get("/v2/models/{model_name}/versions/{model_version}", tags=["metadata"])
    async def model_metadata(model_name: str, model_version: str | None = None) -> Response:
        return json_response(metadata_document(await dataplane.model_metadata(model_name, model_version)))

    @app.get("/v2/models/{model_name}/config", tags=["metadata"])
    @app.get("/v2/models/{model_name}/versions/{model_version}/config", tags=["metadata"])
    async def model_config(model_name: str, model_version: str | None = None) -> Response:
        return json_response(await dataplane.model_config(model_name, model_version))

    @app.post("/v2/models/{model_name}/infer", tags=["inference"])
    @app.post("/v2/models/{model_name}/versions/{model_version}/infer", tags=["inference"])
    async def infer(request: Request, model_name: str, model_version: str | None = None) -> Response:
        with telemetry.observe(model_name, model_version) as observation:
            try:
                response = await _infer(request, model_name, model_version, observation)
            except V2Error as exc:
                observation.status = status_of(exc)
                raise
            observation.status = response.status_code
            return response

    async def _infer(
        request: Request, model_name: str, model_version: str | None, observation: InferObservation
    ) -> Response:
        check_media_type(request.headers.get("content-type"))
        body = await read_body(request, settings.max_body_bytes)
        observation.bytes_in = len(body)
        body = decompress(body, request.headers.get("content-encoding"), settings.max_body_bytes)
        header_length = _parse_header_length(request.headers.get(INFERENCE_HEADER_CONTENT_LENGTH))
        call: InferCall
        with telemetry.span("decode"):
            if header_length == 0:
                call = await _raw_call(body, model_name, model_version)
            else:
                call = decode_infer_request(body, header_length, settings.max_tensor_bytes)
        with telemetry.span("run"):
            result = await dataplane.infer(model_name, model_version, call)
        observation.version = result.model_version
        with telemetry.span("encode"):
            content, json_length = encode_infer_response(result, call)
        observation.request_body, observation.response_body = body, content
        headers: dict[str, str] = {}
        media_type = JSON
        if json_length is not None:
            headers["Inference-Header-Content-Length"] = str(json_length)
            media_type = "application/octet-stream"
        encoding = negotiate_encoding(request.headers.get("accept-encoding"))
        if encoding is not None:
            content = compress(content, encoding)
            headers["Content-Encoding"] = encoding
            headers["Vary"] = "Accept-Encoding"
        observation.bytes_out = len(content)
        return Response(content, 200, headers, media_type=media_type)

    async def _raw_call(body: bytes, model_name: str, model_version: str | None) -> InferCall:
        metadata = await dataplane.model_metadata(model_name, model_version)
        if len(metadata.inputs) != 1:
            raise InvalidInput(
                "a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input; "
                f"'{model_name}' has {len(metadata.inputs)}"
            )
        return decode_raw_request(body, metadata.inputs[0], settings.max_tensor_bytes)

    @app.post("/v2/repository/index", tags=["repository"])
    async def repository_index(request: Request) -> Response:
        body = await read_body(request, settings.max_body_bytes)
        only_ready = bool(load_json_object(body).get("ready", False)) if body.strip() else False
        rows = [
            {"name": r.name, "version": r.version, "state": r.state, **({"reason": r.reason} if r.reason else {})}
            for r in await dataplane.index()
            if not only_ready or r.state == "READY"
        ]
        return json_response(rows)

    @app.post("/v2/repository/models/{model_name}/load", tags=["repository"])
    @app.post("/v2/repository/models/{model_name}/unload", tags=["repository"])
    async def repository_control(model_name: str) -> Response:
        raise Unsupported(
            "this server is stateless: models load from the repository at start-up (default versions) or on "
            "first use, and cannot be loaded or unloaded on request"
        )

    return app
