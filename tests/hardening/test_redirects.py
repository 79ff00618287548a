"""No answer sends a client to the host its request named: the app makes no trailing-slash redirects (Starlette
builds their absolute ``Location`` from the ``Host`` header), so a path with a trailing slash is a 404 like any
unknown path. Against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from handler.config.settings import DEMO_REPOSITORY
from handler.server import build_app
from tests.conftest import LiveServer, make_settings


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    live = LiveServer(build_app(make_settings(DEMO_REPOSITORY)))
    live.start()
    yield live
    live.stop()


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v2/models/iris/"), ("GET", "/v2/health/live/"), ("GET", "/v2/"), ("GET", "/docs/"),
     ("POST", "/v2/models/iris/infer/"), ("GET", "/v2/models/iris/versions/1/"), ("GET", "/v1/models/iris/")],
)  # fmt: skip
def test_a_trailing_slash_is_a_404_not_a_redirect_to_the_named_host(server: LiveServer, method: str, path: str) -> None:
    response = httpx.request(
        method, f"http://{server.url}{path}", headers={"Host": "evil.example"}, follow_redirects=False, timeout=10
    )
    assert response.status_code == 404
    assert "location" not in response.headers
    assert response.json() == {"error": f"no such endpoint: {method} {path}"}
    assert "evil.example" not in response.text


def test_the_paths_without_the_slash_answer(server: LiveServer) -> None:
    response = httpx.get(f"http://{server.url}/v2/models/iris", headers={"Host": "evil.example"}, timeout=10)
    assert response.status_code == 200 and response.json()["name"] == "iris"


def test_an_absolute_form_request_target_is_not_redirected(server: LiveServer) -> None:
    """``GET http://evil.example/v2/models/iris/ HTTP/1.1`` (RFC 9112's absolute-form), on a raw socket."""
    host, port = server.url.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(
            b"GET http://evil.example/v2/models/iris/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert not head.startswith(b"http/1.1 3")
    assert b"\r\nlocation:" not in head
