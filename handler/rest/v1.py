"""KServe V1 / TF Serving REST: model status and ``:predict`` in the row and columnar formats.

``GET /`` (KServe's liveness, ``{"status": "alive"}``), ``GET /v1/models`` (KServe's list), ``GET
/v1/models/{m}[/versions/{v}]`` (KServe's ``{"name", "ready"}`` and TF Serving's ``model_version_status`` in one
document; 200 when ready, 503 otherwise), ``POST /v1/models/{m}[/versions/{v}]:predict``. Starlette matches the
literal ``:predict`` after the ``{m}`` parameter.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from adapters.errors import ModelNotReady
from adapters.types import InferCall, InferResult
from handler.codecs.request import load_json_object
from handler.codecs.tfserving import ROW, decode_predict, encode_outputs, encode_predictions
from handler.config.settings import Settings
from handler.inference.byte_budget import Held
from handler.inference.exchange import Encoded, Exchange
from handler.inference.service import InferenceService
from handler.protocol.dataplane import DataPlane
from handler.protocol.resolved_model import ResolvedModel
from handler.protocol.version_catalog import VersionCatalog
from handler.rest.body import check_media_type, decompress, read_body
from handler.rest.responses import json_response
from handler.rest.routes import route

#: The seed's version states -> TF Serving's ``ModelVersionStatus.State``.
TF_STATE: Final[dict[str, str]] = {"READY": "AVAILABLE", "CREATING": "LOADING", "FAILED": "END", "UNKNOWN": "START"}


async def predict(request: Request, service: InferenceService, model_name: str, model_version: str | None) -> Response:
    """Run one TF Serving / Vertex predict request on a model version."""
    return await service.answer(model_name, model_version, PredictExchange(request, service.settings))


class PredictExchange(Exchange[Response]):
    """One TF Serving / Vertex predict request: a JSON body in the row (``instances``) or columnar (``inputs``)
    format, answered in the same format."""

    __slots__ = ("body", "kind", "request", "settings")

    def __init__(self, request: Request, settings: Settings) -> None:
        self.request, self.settings = request, settings
        self.body, self.kind = b"", ROW

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        headers, limit = self.request.headers, self.settings.max_body_bytes
        check_media_type(headers.get("content-type"))
        wire = await read_body(self.request, limit)
        self.body = decompress(wire, headers.get("content-encoding"), limit)
        return len(wire)

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        metadata = await service.metadata(model)
        call, self.kind = decode_predict(load_json_object(self.body), metadata.inputs, service.max_tensor_bytes)
        return call

    def encode(self, result: InferResult, call: InferCall) -> Encoded[Response]:
        response = predict_response(result, call, self.kind)
        return Encoded(response, len(response.body), self.body, bytes(response.body))


def predict_response(result: InferResult, call: InferCall, kind: str) -> Response:
    """A predict answer in the format of its request (``kind``: ``ROW`` or columnar)."""
    if kind == ROW:
        return json_response(encode_predictions(result, call.inputs[0].shape[0]))
    return json_response(encode_outputs(result))


def _tf_status(resource: dict[str, Any]) -> dict[str, Any]:
    """A version resource as TF Serving's ``ModelVersionStatus``."""
    failed = resource["state"] == "FAILED"
    return {
        "version": resource["name"].rsplit("/", 1)[-1],
        "state": TF_STATE[resource["state"]],
        "status": {"error_code": "UNKNOWN" if failed else "OK", "error_message": resource.get("errorMessage", "")},
    }


async def model_status(
    dataplane: DataPlane, catalog: VersionCatalog, model_name: str, model_version: str | None
) -> Response:
    """KServe V1 readiness with TF Serving's per-version status; 503 when not ready."""
    ready = await dataplane.model_ready(model_name, model_version)
    document: dict[str, Any] = {"name": model_name, "ready": ready}
    if dataplane.serves_locally(model_name):
        try:
            resources = (
                [await catalog.get(model_name, model_version)] if model_version else await catalog.list(model_name)
            )
            document["model_version_status"] = [_tf_status(resource) for resource in resources]
        except ModelNotReady as exc:  # the model itself is broken (config.pbtxt): no version can load
            document["model_version_status"] = [
                _tf_status({"name": "", "state": "FAILED", "errorMessage": exc.message})
            ]
    return json_response(document, 200 if ready else 503)


def add_v1_routes(app: Starlette, service: InferenceService, catalog: VersionCatalog) -> None:
    """The V1 routes, on every server and on Lambda."""
    dataplane = service.dataplane

    @route(app, "GET", "/", tags=["v1"])
    async def live() -> Response:
        """KServe's V1 liveness: its model server answers ``{"status": "alive"}`` here, and its SDK's
        ``InferenceRESTClient.is_server_live`` (protocol v1) reads nothing else."""
        return json_response({"status": "alive"})  # as /v2/health/live: the process answers, so it is alive

    @route(app, "GET", "/v1/models", tags=["v1"])
    async def list_models() -> Response:
        return json_response({"models": dataplane.model_names()})

    @route(app, "GET", "/v1/models/{model_name}", tags=["v1"])
    @route(app, "GET", "/v1/models/{model_name}/versions/{model_version}", tags=["v1"])
    async def status(model_name: str, model_version: str | None = None) -> Response:
        return await model_status(dataplane, catalog, model_name, model_version)

    @route(app, "POST", "/v1/models/{model_name}:predict", tags=["v1"])
    @route(app, "POST", "/v1/models/{model_name}/versions/{model_version}:predict", tags=["v1"])
    async def v1_predict(request: Request, model_name: str, model_version: str | None = None) -> Response:
        return await predict(request, service, model_name, model_version)
