"""The OpenAPI document (``/docs``, ``/openapi.json``) with the V2 wire schemas, built by FastAPI's ``get_openapi``
from the app's routes when it is first asked for (``rest/docs.py``).

Each ``V2Route`` (``rest/routes.py``) is handed to FastAPI as an ``APIRoute`` with what its declaration says: its
path, method, tags, name and description, its path parameters, and the answers and request body of its operation
from the tables here. Endpoints read raw bodies and return ready-made responses, so FastAPI cannot infer these from
their signatures; declaring ``response_model`` on every route would cost cold-start time building validators that
are never used.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Final

from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.responses import Response
from starlette.routing import BaseRoute

from handler.codecs import schemas
from handler.rest.routes import V2Route

REF: Final = "#/components/schemas/{model}"
ERROR_STATUSES: Final = ("400", "404", "413", "415", "500", "501", "503")
#: Routes whose paths start so answer the error statuses (a model or version may be unknown, not ready, ...).
MODEL_PATHS: Final = ("/v2/models", "/v2/repository/models")

#: Route name -> response model of the 200 answer.
RESPONSES: Final[dict[str, type[BaseModel]]] = {
    "server_metadata": schemas.MetadataServerResponse,
    "server_live": schemas.LiveServerResponse,
    "server_ready": schemas.ReadyServerResponse,
    "model_ready": schemas.ReadyModelResponse,
    "model_metadata": schemas.MetadataModelResponse,
    "infer": schemas.InferenceResponse,
}

BINARY: Final = {"schema": {"type": "string", "format": "binary"}}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def _responses(route: V2Route) -> dict[int | str, dict[str, Any]]:
    """The answers a route's operation documents beside FastAPI's default 200."""
    responses: dict[int | str, dict[str, Any]] = {}
    model = RESPONSES.get(route.name)
    if model is not None:
        responses["200"] = {"description": "Success", "content": _json(_ref(model))}
    if route.name == "infer":
        responses["200"]["content"]["application/octet-stream"] = {
            **BINARY,
            "description": "Binary tensor data extension: the JSON header (Inference-Header-Content-Length bytes) "
            "followed by the outputs' raw bytes",
        }
    if route.name == "repository_index":
        schema = {"items": _ref(schemas.RepositoryIndexEntry), "type": "array"}
        responses["200"] = {"description": "Success", "content": _json(schema)}
    if route.path.startswith(MODEL_PATHS):
        error = {"description": "Error", "content": _json(_ref(schemas.ErrorResponse))}
        responses.update({status: error for status in ERROR_STATUSES})
    if route.path.startswith("/v2/health/") or route.path.endswith("/ready"):
        responses["400"] = {"description": "Not live / not ready (the body says false)"}
    return responses


def _operation_extra(route: V2Route) -> dict[str, Any]:
    """The route's path parameters (strings) and its request body, when it reads one."""
    extra: dict[str, Any] = {}
    if route.param_convertors:
        extra["parameters"] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string", "title": name.replace("_", " ").title()},
            }
            for name in route.param_convertors
        ]
    if route.name == "infer":
        body = {**_json(_ref(schemas.InferenceRequest)), "application/octet-stream": BINARY}
        extra["requestBody"] = {"required": True, "content": body}
    if route.name == "repository_index":
        extra["requestBody"] = {"required": False, "content": _json(_ref(schemas.RepositoryIndexRequest))}
    return extra


# The endpoint of the ``APIRoute`` that documents a ``V2Route``: never called, and without a docstring (FastAPI
# would take it for the operation's description).
async def _documented_only() -> Response:
    raise NotImplementedError


def api_route(route: V2Route) -> APIRoute:
    """FastAPI's declaration of ``route``, for ``get_openapi``."""
    doc = route.endpoint.__doc__
    return APIRoute(
        route.path,
        _documented_only,
        methods=route.methods,
        tags=list(route.tags),
        name=route.name,
        description=inspect.cleandoc(doc) if doc else None,
        include_in_schema=route.include_in_schema,
        responses=_responses(route),
        openapi_extra=_operation_extra(route) or None,
    )


def build_openapi(routes: Sequence[BaseRoute], title: str, version: str, description: str) -> dict[str, Any]:
    """The document for an app's ``routes`` with the wire schemas in its components."""
    documented = [api_route(route) for route in routes if isinstance(route, V2Route) and route.include_in_schema]
    document = get_openapi(title=title, version=version, description=description, routes=documented)
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
    return document
