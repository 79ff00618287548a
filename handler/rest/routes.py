"""``route``: add a GET or POST route whose endpoint takes only strings (path or query) and the ``Request``.

FastAPI analyses an endpoint's signature when its route is added: a pydantic field per parameter and, to refuse
pydantic.v1 models, an import of ``pydantic.v1``. For this app's routes, whose parameters are all plain strings,
that costs about 70 ms of every cold start (40 ms of it the import) and buys nothing: a string cannot fail
validation. So routes are plain Starlette routes that pass the endpoint its parameters as FastAPI would (path
parameters by name, others from the query string or their default, ``request`` the request), and FastAPI's
``APIRoute`` is built from the same declaration only when the OpenAPI document is (``rest/openapi.py``), so the
document stays the same.

With OpenTelemetry on (``app.state.api_routes``) the routes are FastAPI's own: its per-endpoint spans need them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from fastapi.routing import APIRoute

Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])


class PlainRoute(Route):
    """A Starlette route for an endpoint declared as for FastAPI; ``api_route()`` is FastAPI's equivalent."""

    def __init__(
        self, path: str, endpoint: Callable[..., Awaitable[Response]], method: str, tags: list[str], *,
        include_in_schema: bool = True,
    ) -> None:  # fmt: skip
        self.declared = endpoint
        self.tags = tags
        name = endpoint.__name__
        super().__init__(path, self._call, methods=[method], name=name, include_in_schema=include_in_schema)
        self.methods = {method}  # as FastAPI's: no implicit HEAD next to GET (405)
        self._path_names = set(self.param_convertors)
        self._parameters = self._plan(inspect.signature(endpoint).parameters.values())

    def _plan(self, parameters: Any) -> list[tuple[str, Any]]:
        """(name, default) per parameter; a required one must be in the path (or be ``request``)."""
        plan = []
        for parameter in parameters:
            named = parameter.name in self._path_names or parameter.name == "request"
            if not named and parameter.default is inspect.Parameter.empty:
                raise TypeError(f"{self.path}: parameter {parameter.name!r} is neither in the path nor optional")
            plan.append((parameter.name, parameter.default))
        return plan

    async def _call(self, request: Request) -> Response:
        path, query = request.path_params, request.query_params
        arguments = {}
        for name, default in self._parameters:
            if name in path:
                arguments[name] = path[name]
            elif name == "request":
                arguments[name] = request
            else:
                arguments[name] = query.get(name, default)
        return await self.declared(**arguments)

    def api_route(self) -> APIRoute:
        from fastapi.routing import APIRoute  # only for the OpenAPI document (rest/openapi.py)

        methods = self.methods or set()
        return APIRoute(
            self.path, self.declared, methods=methods, tags=list(self.tags), include_in_schema=self.include_in_schema
        )


def route(
    app: Starlette, method: str, path: str, *, tags: list[str], include_in_schema: bool = True
) -> Callable[[Endpoint], Endpoint]:
    """Decorator: add ``path`` (``method`` "GET" or "POST") to ``app`` after its other routes, as ``@app.get`` does."""

    def add(endpoint: Endpoint) -> Endpoint:
        if getattr(app.state, "api_routes", False):  # a FastAPI app (rest/app.py)
            app.add_api_route(  # type: ignore[attr-defined]
                path, endpoint, methods=[method], tags=list(tags), include_in_schema=include_in_schema
            )
        else:
            app.router.routes.append(PlainRoute(path, endpoint, method, tags, include_in_schema=include_in_schema))
        return endpoint

    return add


def documented(routes: Sequence[BaseRoute]) -> list[BaseRoute]:
    """``routes`` with each ``PlainRoute`` replaced by its FastAPI route, for ``get_openapi``."""
    return [r.api_route() if isinstance(r, PlainRoute) else r for r in routes]
