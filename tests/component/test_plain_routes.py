"""The served app (``oip serve``, Lambda) is Starlette with plain routes (``handler/rest/routes.py``), whatever the
settings; ``create_app`` gives a FastAPI app with the same route objects, which answers the same requests with the
same bytes, and both serve the document FastAPI builds from those routes."""

# covers: handler/codecs/schemas.py
# covers: handler/rest/app.py
# covers: handler/rest/openapi.py
# covers: handler/rest/routes.py
# covers: handler/rest/starlette_app.py
# covers: handler/server.py

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.testclient import TestClient
from starlette.requests import Request
from starlette.responses import Response

from handler.config.settings import DEMO_REPOSITORY, Settings
from handler.rest.app import create_app
from handler.rest.docs import DESCRIPTION
from handler.rest.openapi import api_route
from handler.rest.routes import V2Route, route
from handler.rest.starlette_app import ServingApp
from handler.runtime.container import build_dataplane
from handler.server import build_app

ROOT = Path(__file__).resolve().parents[2]

REQUESTS = [
    ("GET", "/v2"),
    ("GET", "/v2/health/live"),
    ("HEAD", "/v2/health/live"),  # a GET route answers HEAD with 405, as FastAPI's
    ("POST", "/v2/health/live"),
    ("GET", "/v2/models/iris"),
    ("GET", "/v2/models/iris?model_version=9"),  # the query string names no version: the path does
    ("GET", "/v2/models/iris/versions/1"),
    ("GET", "/v2/models/nope/ready"),
    ("GET", "/v2/models/iris/versions/1/ready"),
    ("GET", "/v2/models/iris/config"),
    ("GET", "/v2/models/stats"),
    ("GET", "/v2/models/iris/versions/1/stats"),
    ("GET", "/v2/models/iris/versions"),
    ("GET", "/v2/models/iris/infer"),
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/repository/models/iris/load"),
    ("GET", "/v2/systemsharedmemory/status"),
    ("GET", "/"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/iris/versions/1"),
    ("GET", "/ping"),
    ("GET", "/v2/health/live/"),  # no trailing-slash redirect: 404
    ("GET", "/nope"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    ("GET", "/static-offline-docs/swagger-ui.css"),
]


def _settings(otel: bool) -> Settings:
    return Settings(model_repository=str(DEMO_REPOSITORY), opentelemetry=otel)


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[TestClient, TestClient]]:
    """The served app and the embeddable one, over the demo repository."""
    settings = _settings(False)
    served = TestClient(build_app(settings), raise_server_exceptions=False)
    embedded = TestClient(create_app(build_dataplane(settings), settings), raise_server_exceptions=False)
    with served, embedded:
        yield served, embedded


def test_the_served_app_is_starlette_with_plain_routes_whatever_the_settings() -> None:
    for otel in (False, True):
        app = build_app(_settings(otel))
        assert type(app) is ServingApp and not isinstance(app, FastAPI)
        assert {type(r).__name__ for r in app.routes} == {"V2Route", "Mount"}


def test_the_embeddable_app_is_fastapi_with_the_same_routes(clients: tuple[TestClient, TestClient]) -> None:
    served, embedded = (client.app for client in clients)
    assert isinstance(embedded, FastAPI)
    shape = [[(type(r).__name__, r.path, getattr(r, "methods", None), r.name) for r in app.routes]  # type: ignore[attr-defined]
             for app in (served, embedded)]  # fmt: skip
    assert shape[0] == shape[1]


@pytest.mark.parametrize(("method", "path"), REQUESTS)
def test_both_apps_answer_the_same(clients: tuple[TestClient, TestClient], method: str, path: str) -> None:
    answers = [
        (r.status_code, sorted(r.headers.items()), r.content)
        for client in clients
        for r in [client.request(method, path, follow_redirects=False)]
    ]
    assert answers[0] == answers[1]


def test_the_document_is_fastapis_for_the_declared_routes(clients: tuple[TestClient, TestClient]) -> None:
    served, embedded = clients
    document = served.get("/openapi.json").json()
    assert embedded.app.openapi() == document  # type: ignore[attr-defined]
    routes = [api_route(r) for r in served.app.routes if isinstance(r, V2Route) and r.include_in_schema]  # type: ignore[attr-defined]
    fastapis = get_openapi(title="oip-serverless", version=document["info"]["version"], description=DESCRIPTION,
                           routes=routes)  # fmt: skip
    assert document["paths"] == fastapis["paths"]
    assert "422" not in str(document["paths"]) and "HTTPValidationError" not in document["components"]["schemas"]
    parameters = document["paths"]["/v2/models/{model_name}"]["get"]["parameters"]
    assert parameters == [
        {"name": "model_name", "in": "path", "required": True, "schema": {"type": "string", "title": "Model Name"}}
    ]
    assert "parameters" not in document["paths"]["/v2/models/stats"]["get"]


def test_every_documented_operation_is_a_route() -> None:
    app = build_app(_settings(False))
    document = TestClient(app).get("/openapi.json").json()
    declared = {(m.lower(), r.path) for r in app.routes if isinstance(r, V2Route) and r.include_in_schema
                for m in r.methods or ()}  # fmt: skip
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert documented == declared


def test_an_endpoint_with_path_parameters_gets_them_as_strings() -> None:
    app = FastAPI()

    @route(app, "GET", "/things/{name}", tags=[])
    async def thing(request: Request, name: str, version: str | None = None) -> Response:
        return Response(f"{name}:{version}:{request.url.path}")

    assert TestClient(app).get("/things/a?version=2").text == "a:None:/things/a"


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("name: str, limit: int = 10", "must be a string"),
        ("name: str, other: str", "neither in the path nor optional"),
        ("", "takes no parameter 'name'"),
    ],
)
def test_an_endpoint_route_cannot_serve_is_refused_when_it_is_added(signature: str, message: str) -> None:
    namespace: dict[str, object] = {"Response": Response}
    exec(f"async def endpoint({signature}) -> Response: ...", namespace)
    with pytest.raises(TypeError, match=message):
        route(FastAPI(), "GET", "/things/{name}", tags=[])(namespace["endpoint"])  # type: ignore[arg-type]


def test_building_the_app_does_not_import_fastapi_or_pydantic() -> None:
    program = (
        "import sys; from handler.server import build_app; from handler.config.settings import DEMO_REPOSITORY, "
        "Settings; build_app(Settings(model_repository=str(DEMO_REPOSITORY), opentelemetry=True)); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'pydantic'}))"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
