"""A raw binary request sent with ``Transfer-Encoding: chunked``, as Triton's ``qa/L0_http/http_test.py``
``test_content_encoding_chunked_manually`` sends it: the 32 bytes of an FP32 [8] tensor chunk-encoded by hand, with
``Inference-Header-Content-Length: 0``, to ``onnx_zero_1_float32``. ``requests`` then adds a Content-Length (of the
encoded body) beside the Transfer-Encoding: Triton reads the chunks and answers the identity; so does this server,
and closes the connection after that answer (RFC 9112 6.1), so nothing behind such a request is read by the other
framing. A chunked request without a Content-Length keeps its connection.
"""

from __future__ import annotations

import socket

import numpy as np
import orjson
import pytest
import requests

from tests.support.servers import OipServer

MODEL = "onnx_zero_1_float32"
INPUT = np.arange(8, dtype=np.float32).tobytes()
#: The body Triton's test builds: one chunk of the 32 bytes, then the last chunk.
CHUNKED = f"{len(INPUT):X}\r\n".encode() + INPUT + b"\r\n" + b"0\r\n\r\n"
#: A second request on the same connection, after which the server closes it.
HEALTH = b"GET /v2/health/ready HTTP/1.1\r\nHost: triton\r\nConnection: close\r\n\r\n"


def test_tritons_chunked_manually_is_answered_the_identity(server: OipServer) -> None:
    """Triton's test, word for word but the address."""
    headers = {"Inference-Header-Content-Length": "0", "Transfer-Encoding": "chunked"}
    answer = requests.post(f"{server.url}/v2/models/{MODEL}/infer", data=CHUNKED, headers=headers, timeout=30)
    assert answer.request.headers["Content-Length"] == str(len(CHUNKED))  # both framings, as Triton receives them
    answer.raise_for_status()
    header_size = int(answer.headers["Inference-Header-Content-Length"])
    assert answer.content[header_size:] == INPUT
    assert orjson.loads(answer.content[:header_size])["outputs"][0]["shape"] == [1, 8]


def _exchange(server: OipServer, data: bytes) -> bytes:
    """Everything the server sends back on one connection given ``data``, until it closes the connection."""
    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(data)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
        return received


def _head(content_length: int | None) -> bytes:
    head = f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: triton\r\nInference-Header-Content-Length: 0\r\n"
    head += "Transfer-Encoding: chunked\r\n"
    head += "" if content_length is None else f"Content-Length: {content_length}\r\n"
    return head.encode() + b"\r\n"


def _identity(answer: bytes) -> bytes:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").lower().split("\r\n")
    assert lines[0] == "http/1.1 200 ok", answer[:300]
    fields = dict(line.split(": ", 1) for line in lines[1:])
    length, header_size = int(fields["content-length"]), int(fields["inference-header-content-length"])
    assert body[header_size:length] == INPUT
    return body[length:]


@pytest.mark.parametrize("content_length", [len(CHUNKED), 5, 10**12], ids=["encoded", "shorter", "over-limit"])
def test_both_framings_over_a_socket_are_read_by_the_chunks_and_the_connection_closed(
    server: OipServer, content_length: int
) -> None:
    """The chunks frame the body, whatever the Content-Length says (that of the encoded body, less than the chunks,
    more than the body limit, which without the chunks would be a 413); a request sent behind it on the same
    connection gets no answer: the connection is closed after the first."""
    rest = _identity(_exchange(server, _head(content_length) + CHUNKED + HEALTH))
    assert rest == b""  # closed: no answer to the health request, nor a connection left open


def test_chunks_alone_keep_the_connection(server: OipServer) -> None:
    """The same without the Content-Length: the request behind it on the connection is answered too."""
    rest = _identity(_exchange(server, _head(None) + CHUNKED + HEALTH))
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n") and rest.endswith(b'{"ready":true}')
