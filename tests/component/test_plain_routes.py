"""Plain Starlette routes (``handler/rest/routes.py``) answer and document exactly as FastAPI's routes would.

The app with OpenTelemetry on (``OIP_OTEL=1``) keeps FastAPI's ``APIRoute``s: it is the reference here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from handler.protocol.settings import DEMO_REPOSITORY, Settings
from handler.rest.app import create_app
from handler.rest.routes import PlainRoute
from handler.runtime.container import build_dataplane
from handler.server import build_app

ROOT = Path(__file__).resolve().parents[2]

REQUESTS = [
    ("GET", "/v2"),
    ("GET", "/v2/health/live"),
    ("HEAD", "/v2/health/live"),  # FastAPI adds no HEAD to a GET route: 405
    ("POST", "/v2/health/live"),
    ("GET", "/v2/models/iris"),
    ("GET", "/v2/models/iris?model_version=1"),  # an optional parameter outside the path is a query parameter
    ("GET", "/v2/models/iris?model_version=9"),
    ("GET", "/v2/models/iris/versions/1"),
    ("GET", "/v2/models/nope/ready"),
    ("GET", "/v2/models/iris/versions/1/ready"),
    ("GET", "/v2/models/iris/config"),
    ("GET", "/v2/models/stats?model_name=iris"),
    ("GET", "/v2/models/iris/versions"),
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/repository/models/iris/load"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/iris/versions/1"),
    ("GET", "/ping"),
    ("GET", "/v2/health/live/"),  # no trailing-slash redirect: 404
]


def _client(monkeypatch: pytest.MonkeyPatch, otel: str) -> TestClient:
    monkeypatch.setenv("OIP_OTEL", otel)
    settings = Settings.from_env(model_repository=str(DEMO_REPOSITORY))
    return TestClient(build_app(settings), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[TestClient, TestClient]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        plain, api = _client(monkeypatch, "0"), _client(monkeypatch, "1")
    with plain, api:
        yield plain, api


def test_routes_are_plain_without_opentelemetry_and_fastapis_with_it(clients: tuple[TestClient, TestClient]) -> None:
    plain, api = (client.app.routes for client in clients)  # type: ignore[attr-defined]
    assert [r.path for r in plain] == [r.path for r in api]
    kinds = [(type(a).__name__, type(b).__name__) for a, b in zip(plain, api, strict=True)]
    assert kinds.count(("PlainRoute", "APIRoute")) > 20
    assert {kind for kind in kinds if kind[0] != kind[1]} == {("PlainRoute", "APIRoute")}  # /docs and the rest alike


def test_openapi_document_is_the_same(clients: tuple[TestClient, TestClient]) -> None:
    plain, api = clients
    assert plain.get("/openapi.json").content == api.get("/openapi.json").content


@pytest.mark.parametrize(("method", "path"), REQUESTS)
def test_answers_are_the_same(clients: tuple[TestClient, TestClient], method: str, path: str) -> None:
    answers = [
        (r.status_code, r.headers.get("content-type"), r.headers.get("location"), r.content)
        for client in clients
        for r in [client.request(method, path, follow_redirects=False)]
    ]
    assert answers[0] == answers[1]


def test_a_required_parameter_outside_the_path_is_refused_when_the_route_is_added() -> None:
    async def endpoint(model_name: str) -> None: ...

    with pytest.raises(TypeError, match="neither in the path nor optional"):
        PlainRoute("/v2/models", endpoint, "GET", ["metadata"])


def test_building_the_app_does_not_import_pydantic_v1() -> None:
    program = (
        "import sys; from handler.server import build_app; from handler.protocol.settings import DEMO_REPOSITORY, "
        "Settings; build_app(Settings(model_repository=str(DEMO_REPOSITORY))); print('pydantic.v1' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_embeddable_app_is_fastapi_and_answers_as_the_served_one(clients: tuple[TestClient, TestClient]) -> None:
    settings = Settings.from_env(model_repository=str(DEMO_REPOSITORY))
    app = create_app(build_dataplane(settings), settings)
    assert isinstance(app, FastAPI) and not isinstance(clients[0].app, FastAPI)
    assert app.openapi() == clients[0].get("/openapi.json").json()
    with TestClient(app, raise_server_exceptions=False) as embedded:
        for method, path in [*REQUESTS, ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc")]:
            ours, theirs = clients[0].request(method, path), embedded.request(method, path)
            assert (ours.status_code, ours.headers.get("content-type"), ours.content) == (
                theirs.status_code, theirs.headers.get("content-type"), theirs.content,
            ), (method, path)  # fmt: skip
