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
from handler.codecs.request import load_json_object
from handler.codecs.tfserving import ROW, decode_predict, encode_outputs, encode_predictions
from handler.inference.service import InferenceService
from handler.protocol.dataplane import DataPlane
from handler.protocol.versions import VersionCatalog
from handler.rest.body import check_media_type, decompress, read_body
from handler.rest.responses import json_response
from handler.rest.routes import route

#: The seed's version states -> TF Serving's ``ModelVersionStatus.State``.
TF_STATE: Final[dict[str, str]] = {"READY": "AVAILABLE", "CREATING": "LOADING", "FAILED": "END", "UNKNOWN": "START"}


async def predict(request: Request, service: InferenceService, model_name: str, model_version: str | None) -> Response:
    """Run one TF Serving / Vertex predict request on a model version."""
    settings = service.settings
    with service.observe(model_name, model_version) as observation:
        check_media_type(request.headers.get("content-type"))
        body = await read_body(request, settings.max_body_bytes)
        observation.bytes_in = len(body)
        body = decompress(body, request.headers.get("content-encoding"), settings.max_body_bytes)
        metadata = await service.dataplane.model_metadata(model_name, model_version)
        with service.span("decode"):
            call, kind = decode_predict(load_json_object(body), metadata.inputs, service.max_tensor_bytes)
        result = await service.infer(model_name, model_version, call, observation)
        with service.span("encode"):
            rows = call.inputs[0].shape[0] if kind == ROW else 0
            response = json_response(encode_predictions(result, rows) if kind == ROW else encode_outputs(result))
        observation.request_body, observation.response_body = body, bytes(response.body)
        observation.bytes_out = len(response.body)
        return response


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
