"""The REST pass-through to Triton and JSON escapes: a reference to S3 spelled with escapes (``"s3\\u005furi"``,
``"s3:\\/\\/..."``) takes the decoding path, where the reference is read as JSON reads it, and never reaches Triton
as it came. The Triton here is a loopback HTTP server that records what it is sent and answers every inference."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient

from adapters.triton.settings import TritonSettings
from handler.server import build_app
from tests.conftest import make_settings

ANSWER = {"model_name": "simple", "model_version": "1", "outputs": []}


class RecordingTriton(BaseHTTPRequestHandler):
    """Answers every request 200, inferences with ``ANSWER``; each POST body is kept in ``server.posted``."""

    def do_GET(self) -> None:
        self._answer(b"{}")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.posted.append((self.path, body))  # type: ignore[attr-defined]
        self._answer(json.dumps(ANSWER).encode())

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def triton() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), RecordingTriton)
    server.posted = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def client(triton: ThreadingHTTPServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """Our app with no local model, ``remote`` routed to the recording Triton's ``simple`` over HTTP, the
    ``s3_tensors`` extension off."""
    url = f"127.0.0.1:{triton.server_address[1]}"
    settings = TritonSettings(url=url, protocol="http", routes=TritonSettings.parse_routes("remote=simple"))
    app = build_app(make_settings(tmp_path_factory.mktemp("no-models"), triton=settings))
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _inferences(triton: ThreadingHTTPServer) -> list[bytes]:
    return [body for path, body in triton.posted if path.endswith("/infer")]  # type: ignore[attr-defined]


def test_a_plain_request_passes_through_as_it_came(client: TestClient, triton: ThreadingHTTPServer) -> None:
    body = b'{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"data":[1]}]}'
    before = len(_inferences(triton))
    answer = client.post("/v2/models/remote/infer", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert _inferences(triton)[before:] == [body]


@pytest.mark.parametrize(
    "parameters",
    [
        rb'{"s3\u005furi":"s3://bucket/tensors/x"}',
        rb'{"s3_uri":"s3:\/\/bucket/tensors/x"}',
        rb'{"shared_memory_region":"s3:\/\/bucket/tensors/x","shared_memory_byte_size":4}',
    ],
)
def test_an_escaped_reference_is_read_as_json_reads_it(
    client: TestClient, triton: ThreadingHTTPServer, parameters: bytes
) -> None:
    body = b'{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,1],"parameters":' + parameters + b"}]}"
    before = len(_inferences(triton))
    answer = client.post("/v2/models/remote/infer", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(
        "input 'INPUT0' names an S3 location ('s3_uri'), but this server's s3_tensors extension is off"
    )
    assert _inferences(triton)[before:] == []  # Triton never saw it
