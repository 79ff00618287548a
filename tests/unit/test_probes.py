"""A probe's request, told from a connection's waiting bytes and answered off the event loop (handler/cli/probes.py,
handler/rest/probe_answers.py's ``ProbeAnswers``): only a whole ``GET`` of the server's health or metadata, or a
loaded model's metadata or readiness, with nothing after it, is answered there, with the app's bytes; anything else
is left unread for the event loop's protocol."""

# covers: handler/rest/probe_answers.py

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from uvicorn.server import ServerState

from adapters.errors import ModelNotReady
from adapters.repository.repository import ModelRepository
from adapters.triton.settings import TritonSettings
from adapters.types import ModelMetadata
from handler.cli.connections import ConnectionLimits
from handler.cli.probes import Asked, Probes, probe_asked
from handler.config.settings import DEMO_REPOSITORY
from handler.protocol.dataplane import DataPlane
from handler.rest.metadata import metadata_document
from handler.rest.probe_answers import ProbeAnswers
from handler.runtime.container import build_dataplane
from tests.conftest import make_settings
from tests.support import onnx_models
from tests.support.buggy_backend import BuggyBackend

LIMITS = ConnectionLimits(header_timeout=10, body_timeout=30, max_header_bytes=512, max_headers=4, keep_alive_timeout=5)
ROOT = Path(__file__).resolve().parents[2]


def connected() -> tuple[socket.socket, socket.socket]:
    """A TCP connection on 127.0.0.1: its server end and its client end."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        client = socket.create_connection(listening.getsockname())
        server, _ = listening.accept()
    return server, client


@pytest.mark.parametrize(
    ("data", "path", "keep_alive", "version"),
    [
        (b"GET /v2/health/ready HTTP/1.1\r\nHost: a\r\n\r\n", "/v2/health/ready", True, "1.1"),
        (b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n", "/v2/health/live", False, "1.1"),
        (b"GET /v2/health/live HTTP/1.0\r\n\r\n", "/v2/health/live", False, "1.0"),
        (b"GET /v2/health/live?verbose=1 HTTP/1.1\r\n\r\n", "/v2/health/live?verbose=1", True, "1.1"),
    ],
)
def test_a_whole_health_check_alone_is_told(data: bytes, path: str, keep_alive: bool, version: str) -> None:
    assert probe_asked(data, LIMITS) == Asked(path, keep_alive, version)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nHost: a\r\n", id="a head not yet whole"),
        pytest.param(b"GET /v2/health/re", id="a target not yet whole"),
        pytest.param(b"HEAD /v2/health/ready HTTP/1.1\r\n\r\n", id="another method"),
        pytest.param(b"POST /v2/health/ready HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", id="a body"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nContent-Length: 0\r\n\r\n", id="a content length"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", id="chunked"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\n\r\nGET /v2/health/live HTTP/1.1\r\n\r\n", id="pipelined"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\n\r\nGET /v2", id="the next request begun"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\n" + b"A: b\r\n" * 5 + b"\r\n", id="more fields than allowed"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nA: " + b"b" * 500 + b"\r\n\r\n", id="a head too long"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n", id="upgrade"),
        pytest.param(b"GET /v2/health/ready HTTP/1.1\r\nBad Header\r\n\r\n", id="malformed"),
        pytest.param(b"GET /openapi.json HTTP/1.1\r\n\r\n", id="a path outside V2"),
    ],
)
def test_anything_else_is_left_to_the_event_loop(data: bytes) -> None:
    assert probe_asked(data, LIMITS) is None


def test_the_demo_servers_health_is_told_without_the_event_loop() -> None:
    health = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY)), eager_load=True)
    assert health.answer("/v2/health/live") == (200, b'{"live":true}')
    assert health.answer("/v2/health/ready") == (200, b'{"ready":true}')
    assert health.answer("/v2/health/ready?verbose=1") is None


def test_a_repository_with_a_model_that_failed_to_load_is_not_ready(test_repository: Path) -> None:
    health = ProbeAnswers(build_dataplane(make_settings(test_repository)), eager_load=True)
    assert health.answer("/v2/health/ready") == (400, b'{"ready":false}')


def test_readiness_that_asks_triton_or_loads_models_is_left_to_the_event_loop() -> None:
    triton = TritonSettings(url="127.0.0.1:1", routes=TritonSettings.parse_routes("resnet"))
    forwarding = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY, triton=triton)), eager_load=True)
    assert forwarding.answer("/v2/health/ready") is None
    assert forwarding.answer("/v2/health/live") == (200, b'{"live":true}')
    deferred = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY, eager_load=False)), eager_load=False)
    assert deferred.answer("/v2/health/ready") is None


def draining_answers() -> None:
    """Run in a process of its own (``python -c``): the answers once the drain has begun, as JSON."""
    from handler.runtime.drain import begin_drain

    health = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY)), eager_load=True)
    begin_drain()
    answers = {path: health.answer(path) for path in ("/v2/health/live", "/v2/health/ready")}
    print(json.dumps({path: [status, body.decode()] for path, (status, body) in answers.items()}))  # type: ignore[misc]


def test_a_draining_server_is_live_and_not_ready() -> None:
    command = [sys.executable, "-c", "from tests.unit.test_probes import draining_answers as f; f()"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {
        "/v2/health/live": [200, '{"live":true}'],
        "/v2/health/ready": [400, '{"ready":false}'],
    }


def test_the_answer_reads_the_request_and_nothing_after_it() -> None:
    """The health check's bytes are read off the connection, and a byte sent after them stays there for the event
    loop; the answer carries uvicorn's default headers, and ``connection: close`` when the client asked for it."""
    health = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY)), eager_load=True)
    served = ServerState()
    served.default_headers = [(b"date", b"Sun, 29 Nov 2026 12:00:00 GMT"), (b"server", b"uvicorn")]
    check = Probes(health, served, LIMITS)
    server, client = connected()
    with server, client:
        asked = b"GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n"
        client.sendall(asked)
        assert check.answer(server, server.recv(4096, socket.MSG_PEEK)) is False
        client.sendall(b"x")
        assert server.recv(4096) == b"x"
        assert client.recv(4096) == (
            b"HTTP/1.1 200 OK\r\ndate: Sun, 29 Nov 2026 12:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 13\r\n"
            b'content-type: application/json\r\nconnection: close\r\n\r\n{"live":true}'
        )
        assert check.answered == 1


#: The probes' paths that the demo server answers off the event loop.
PROBED = [
    "/v2",
    "/v2/health/live",
    "/v2/health/ready",
    "/v2/models/iris",
    "/v2/models/iris/versions/1",
    "/v2/models/iris/ready",
    "/v2/models/iris/versions/1/ready",
    "/v2/models/tiny_image",
]


@pytest.mark.parametrize("path", PROBED)
def test_a_probes_answer_is_the_apps(demo_client: TestClient, path: str) -> None:
    answers = ProbeAnswers(demo_client.app.state.dataplane, eager_load=True)  # type: ignore[attr-defined]
    answer = demo_client.get(path)
    assert answers.answer(path) == (answer.status_code, answer.content)


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/nope",  # an unknown model: the app's 404
        "/v2/models/iris/versions/9",  # an unknown version
        "/v2/models/nope/ready",
        "/v2/models/stats",  # the statistics extension's route
        "/v2/models/iris/stats",
        "/v2/models/iris/config",
        "/v2/models/iris/versions/1/config",
        "/v2/models/ir%69s",  # an escape, which the app decodes
        "/v2/models/iris?verbose=1",
        "/v2/models/iris/",
        "/v2/models//ready",
        "/v2/models",
        "/v2/",
    ],
)
def test_anything_that_fails_or_is_no_probe_is_left_to_the_app(demo_client: TestClient, path: str) -> None:
    answers = ProbeAnswers(demo_client.app.state.dataplane, eager_load=True)  # type: ignore[attr-defined]
    assert answers.answer(path) is None


def test_a_version_not_loaded_is_left_to_the_app_and_nothing_is_created(test_repository: Path) -> None:
    """``versioned`` serves versions 1 and 3; only its default (3) loads at start. Asked off the event loop, version
    1 is left to the app, and no backend is made for it; once the app has loaded it, it is answered there too. A
    model that failed to load is left to the app."""
    dataplane = build_dataplane(make_settings(test_repository))
    answers = ProbeAnswers(dataplane, eager_load=True)
    assert answers.answer("/v2/models/versioned") is not None
    assert answers.answer("/v2/models/versioned/versions/1") is None
    assert answers.answer("/v2/models/versioned/versions/1/ready") is None
    assert dataplane.repository.existing_backend("versioned", "1") is None
    assert answers.answer("/v2/models/corrupt") is None
    loaded = asyncio.run(dataplane.model_metadata("versioned", "1"))
    status, body = answers.answer("/v2/models/versioned/versions/1")  # type: ignore[misc]
    assert (status, json.loads(body)) == (200, metadata_document(loaded))


def test_a_model_forwarded_to_triton_is_left_to_the_app() -> None:
    triton = TritonSettings(url="127.0.0.1:1", routes=TritonSettings.parse_routes("iris"))
    answers = ProbeAnswers(build_dataplane(make_settings(DEMO_REPOSITORY, triton=triton)), eager_load=True)
    assert answers.answer("/v2/models/iris") is None
    assert answers.answer("/v2/models/tiny_image") is not None


def test_the_statistics_route_is_not_taken_for_a_model_called_stats(tmp_path: Path) -> None:
    """``GET /v2/models/stats`` is the statistics extension's (the app matches it first); a model called ``stats``
    is answered on its other paths."""
    shutil.copytree(DEMO_REPOSITORY / "iris" / "1", tmp_path / "stats" / "1")
    answers = ProbeAnswers(build_dataplane(make_settings(tmp_path)), eager_load=True)
    assert answers.answer("/v2/models/stats") is None
    assert answers.answer("/v2/models/stats/ready") == (200, b'{"name":"stats","ready":true}')
    assert answers.answer("/v2/models/stats/versions/1") is not None


def test_a_failure_telling_the_answer_leaves_the_request_to_the_app(tmp_path: Path) -> None:
    """A model whose metadata raises what no error table knows: the thread leaves the request unread, for the app
    to answer with its error id; a model whose metadata raises a V2 error is left too."""
    for name in ("buggy_metadata", "fine"):
        onnx_models.save(onnx_models.identity("FP32", [1]), tmp_path, name)
    dataplane = DataPlane(ModelRepository(tmp_path, BuggyBackend))
    for name in ("buggy_metadata", "fine"):
        dataplane.repository.backend(name)  # created, as a first request would
    probes = Probes(ProbeAnswers(dataplane, eager_load=True), ServerState(), LIMITS)
    server, client = connected()
    with server, client:
        asked = b"GET /v2/models/buggy_metadata HTTP/1.1\r\n\r\n"
        client.sendall(asked)
        assert probes.answer(server, server.recv(4096, socket.MSG_PEEK)) is None
        assert server.recv(4096) == asked  # unread: the app's to answer
        client.sendall(b"GET /v2/models/fine HTTP/1.1\r\n\r\n")
        assert probes.answer(server, server.recv(4096, socket.MSG_PEEK)) is True
    gone = ProbeAnswers(DataPlane(ModelRepository(tmp_path, _NotReady)), eager_load=True)
    gone.dataplane.repository.backend("fine")
    assert gone.answer("/v2/models/fine") is None


class _NotReady(BuggyBackend):
    async def metadata(self) -> ModelMetadata:
        raise ModelNotReady("the model went away")
