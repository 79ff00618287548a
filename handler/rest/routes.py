"""How a REST route is declared: ``V2Route``, a Starlette ``Route`` with its OpenAPI tags.

An endpoint is a plain Starlette endpoint: it takes the ``Request`` and reads its path parameters from
``request.path_params``, which Starlette's routing fills. The app ``oip serve`` and Lambda run and the FastAPI app
``create_app`` gives carry the same ``V2Route`` objects; FastAPI sees them only when the OpenAPI document is built
(``rest/openapi.py``), so building the app imports neither FastAPI nor pydantic.

``route`` adds a route to an app for endpoints declared with their path parameters as arguments (the platform
route families): each such argument must be a string from the route's path, or have a default.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])

#: The annotations ``route`` accepts on an endpoint's path parameters: Starlette's routing gives strings.
STRING_ANNOTATIONS: Final = frozenset({"str", "str | None", "Optional[str]", str})


class V2Route(Route):
    """A Starlette route for one method, with the tags of its OpenAPI operation. A GET route answers HEAD with 405,
    as FastAPI's routes do (Starlette's own would answer it)."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[[Request], Awaitable[Response]],
        method: str,
        *,
        tags: list[str],
        name: str | None = None,
        include_in_schema: bool = True,
    ) -> None:
        super().__init__(path, endpoint, methods=[method], name=name, include_in_schema=include_in_schema)
        self.methods = {method}
        self.tags = tags

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Starlette's match, with the route in the child scope (``scope["route"]``) whichever router matched it, as
        FastAPI's routes have it: the server span names the request by it (``observability/tracing.py``)."""
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


def route(
    app: Starlette, method: str, path: str, *, tags: list[str], include_in_schema: bool = True
) -> Callable[[Endpoint], Endpoint]:
    """Decorator: add ``path`` (``method`` "GET" or "POST") to ``app`` after its other routes, for an endpoint that
    takes its path parameters by name (and the ``Request`` as ``request``, if it names it). A parameter that is not
    a string from the path is refused here, when the route is added, unless it has a default (then it keeps it)."""

    def add(endpoint: Endpoint) -> Endpoint:
        app.router.routes.append(
            V2Route(
                path,
                _with_path_parameters(endpoint, path),
                method,
                tags=list(tags),
                name=endpoint.__name__,
                include_in_schema=include_in_schema,
            )
        )
        return endpoint

    return add


def _with_path_parameters(
    endpoint: Callable[..., Awaitable[Response]], path: str
) -> Callable[..., Awaitable[Response]]:
    """A Starlette endpoint calling ``endpoint`` with the request's path parameters as keyword arguments."""
    in_path = set(Route(path, endpoint).param_convertors)
    parameters = inspect.signature(endpoint).parameters
    if in_path - set(parameters):
        raise TypeError(f"{path}: the endpoint takes no parameter {sorted(in_path - set(parameters))[0]!r}")
    wants_request = False
    for parameter in parameters.values():
        if parameter.name == "request":
            wants_request = True
        elif parameter.annotation not in STRING_ANNOTATIONS:
            raise TypeError(f"{path}: parameter {parameter.name!r} must be a string (path parameters are strings)")
        elif parameter.name not in in_path and parameter.default is inspect.Parameter.empty:
            raise TypeError(f"{path}: parameter {parameter.name!r} is neither in the path nor optional")

    async def call(request: Request) -> Response:
        if wants_request:
            return await endpoint(request=request, **request.path_params)
        return await endpoint(**request.path_params)

    call.__doc__ = endpoint.__doc__
    return call
