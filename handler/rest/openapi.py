"""The OpenAPI document (``/docs``, ``/openapi.json``) with the V2 wire schemas, built with FastAPI's
``get_openapi`` and pydantic when it is first asked for (``rest/docs.py``).

Routes read raw bodies and return ready-made responses, so FastAPI cannot infer request and response
schemas; declaring ``response_model`` on every route would also cost cold-start time building validators
that are never used. The schemas are attached here instead, when the document is first asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema
from starlette.routing import BaseRoute

from handler.codecs import schemas
from handler.rest.inference import INFER_PATHS
from handler.rest.routes import documented

REF = "#/components/schemas/{model}"
ERROR_STATUSES = ("400", "404", "413", "415", "500", "501", "503")

#: (method, path) -> response model of the 200 answer.
RESPONSES: dict[tuple[str, str], type[BaseModel]] = {
    ("get", "/v2"): schemas.MetadataServerResponse,
    ("get", "/v2/health/live"): schemas.LiveServerResponse,
    ("get", "/v2/health/ready"): schemas.ReadyServerResponse,
    ("get", "/v2/models/{model_name}/ready"): schemas.ReadyModelResponse,
    ("get", "/v2/models/{model_name}/versions/{model_version}/ready"): schemas.ReadyModelResponse,
    ("get", "/v2/models/{model_name}"): schemas.MetadataModelResponse,
    ("get", "/v2/models/{model_name}/versions/{model_version}"): schemas.MetadataModelResponse,
    ("post", "/v2/models/{model_name}/infer"): schemas.InferenceResponse,
    ("post", "/v2/models/{model_name}/versions/{model_version}/infer"): schemas.InferenceResponse,
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _infer_operation(path: str) -> dict[str, Any]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "title": name.title()}}
        for name in names
    ]
    operation_id = "infer" + path.replace("/", "_").replace("{", "_").replace("}", "_") + "_post"
    return {"tags": ["inference"], "summary": "Infer", "operationId": operation_id, "parameters": parameters}


def build_openapi(routes: Sequence[BaseRoute], title: str, version: str, description: str) -> dict[str, Any]:
    """The document for an app's ``routes`` with the wire schemas attached."""
    document = get_openapi(title=title, version=version, description=description, routes=documented(routes))
    for path in INFER_PATHS:  # plain Starlette routes (rest/inference.py): FastAPI does not see them
        document["paths"][path] = {"post": _infer_operation(path)}
    models = {
        schemas.InferenceRequest,
        schemas.ErrorResponse,
        schemas.RepositoryIndexRequest,
        schemas.RepositoryIndexEntry,
        *RESPONSES.values(),
    }
    _, defs = models_json_schema(
        [(model, "validation") for model in sorted(models, key=lambda m: m.__name__)], ref_template=REF
    )
    document.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
    error = {"description": "Error", "content": _json(_ref(schemas.ErrorResponse))}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)  # validation errors answer 400 here
            model = RESPONSES.get((method, path))
            if model is not None:
                responses["200"] = {"description": "Success", "content": _json(_ref(model))}
            if path.startswith(("/v2/models", "/v2/repository/models")):
                responses.update({status: error for status in ERROR_STATUSES if status not in responses})
            if path.startswith("/v2/health/") or path.endswith("/ready"):
                responses["400"] = {"description": "Not live / not ready (the body says false)"}
            if path.endswith("/infer"):
                responses["200"]["content"]["application/octet-stream"] = {
                    "schema": {"type": "string", "format": "binary"},
                    "description": "Binary tensor data extension: the JSON header (Inference-Header-Content-Length "
                    "bytes) followed by the outputs' raw bytes",
                }
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        **_json(_ref(schemas.InferenceRequest)),
                        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    },
                }
    index_operation = document["paths"]["/v2/repository/index"]["post"]
    index_operation["requestBody"] = {"required": False, "content": _json(_ref(schemas.RepositoryIndexRequest))}
    index = index_operation["responses"]
    index["200"] = {
        "description": "Success",
        "content": _json(TypeAdapter(list[schemas.RepositoryIndexEntry]).json_schema(ref_template=REF)),
    }
    return document
