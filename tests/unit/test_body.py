"""Content-Type, Content-Encoding and size limits of request bodies."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from typing import Any

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from starlette.requests import ClientDisconnect, Request

from adapters.errors import InvalidInput, PayloadTooLarge, UnsupportedMediaType
from handler.codecs.request import DECODER
from handler.rest.body import (
    TENSOR_ALIGNMENT,
    check_media_type,
    compress,
    decompress,
    negotiate_encoding,
    read_body,
    read_receive,
)

BODY = b'{"inputs": []}' * 10


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "application/json; charset=utf-8", "application/octet-stream", "application/x+json"],
)
def test_accepted_media_types_reach_the_model(content_type: str | None, client: TestClient) -> None:
    check_media_type(content_type)
    body = orjson.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}]})
    headers = {} if content_type is None else {"Content-Type": content_type}
    if content_type == "application/octet-stream":  # the binary extension: a JSON header of that length
        headers["Inference-Header-Content-Length"] = str(len(body))
    answer = client.post("/v2/models/identity_fp32/infer", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["data"] == [1.5, 2.5]


@pytest.mark.parametrize("content_type", ["text/xml", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_other_media_types_are_415(content_type: str) -> None:
    with pytest.raises(UnsupportedMediaType, match="is not supported; send application/json"):
        check_media_type(content_type)


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(BODY, mtime=0)),
        ("deflate", zlib.compress(BODY)),  # what tritonclient sends
        ("deflate", zlib.compress(BODY)[2:-4]),  # raw deflate stream
        ("identity", BODY),
        (None, BODY),
    ],
)
def test_decompress(encoding: str | None, data: bytes) -> None:
    assert decompress(data, encoding, 10_000) == BODY


def test_decompression_is_capped() -> None:
    bomb = gzip.compress(bytes(10_000_000))
    with pytest.raises(PayloadTooLarge, match="decompressed"):
        decompress(bomb, "gzip", 1_000_000)


def test_bad_compressed_data() -> None:
    with pytest.raises(InvalidInput, match="not valid gzip"):
        decompress(b"not gzip", "gzip", 1000)
    with pytest.raises(InvalidInput, match="truncated"):
        decompress(gzip.compress(BODY)[:-10], "gzip", 1000)
    with pytest.raises(UnsupportedMediaType, match="'br'"):
        decompress(BODY, "br", 1000)


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        ("gzip, deflate", "gzip"),
        ("deflate", "deflate"),
        ("gzip;q=0, deflate", "deflate"),
        ("br", None),
        (None, None),
        ("identity", None),
    ],
)
def test_negotiate_encoding(header: str | None, chosen: str | None) -> None:
    assert negotiate_encoding(header) == chosen


def test_compress_round_trips() -> None:
    assert gzip.decompress(compress(BODY, "gzip")) == BODY
    assert zlib.decompress(compress(BODY, "deflate")) == BODY


def _receive(messages: list[dict[str, Any]]) -> Any:
    queue = iter(messages)

    async def receive() -> dict[str, Any]:
        return next(queue)

    return receive


def _chunks(chunks: list[bytes]) -> list[dict[str, Any]]:
    return [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1} for i, chunk in enumerate(chunks)]


def _read_receive(messages: list[dict[str, Any]], declared: str | None, limit: int) -> bytes:
    return asyncio.run(read_receive(_receive(messages), declared, limit))


async def _read_request(messages: list[dict[str, Any]], limit: int) -> bytes:
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    return await read_body(Request(scope, _receive(messages)), limit)


@pytest.mark.parametrize("chunks", [[BODY], [b""], [BODY[:7], BODY[7:]], [b"", BODY, b""], [b"a"] * 5])
def test_the_asgi_receive_gives_what_starlettes_stream_gives(chunks: list[bytes]) -> None:
    """The one body reader over the fast path's receive and a route's ``Request``, against Starlette's own
    ``Request.body()``."""
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    starlettes = asyncio.run(Request(scope, _receive(_chunks(chunks))).body())
    received = _read_receive(_chunks(chunks), None, 1 << 20)
    assert received == asyncio.run(_read_request(_chunks(chunks), 1 << 20)) == starlettes == b"".join(chunks)


def test_a_body_in_one_chunk_is_returned_as_it_came() -> None:
    body = bytes(BODY)
    assert _read_receive(_chunks([body]), None, 1 << 20) is body
    assert _read_receive(_chunks([body, b""]), None, 1 << 20) is body


def _binary_body(header_padding: int) -> tuple[bytes, int, np.ndarray]:
    """A binary-extension body of one FP64 [2, 3] input whose JSON header is padded by spaces; its header length."""
    data = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    header = (
        orjson.dumps(
            {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 3], "parameters": {"binary_data_size": 48}}]}
        )
        + b" " * header_padding
    )
    return header + data.tobytes(), len(header), data


def _tensor_start(buffer: bytes | memoryview, offset: int) -> int:
    return int(np.frombuffer(buffer, np.uint8, offset=offset).__array_interface__["data"][0])


@pytest.mark.parametrize("padding", range(2 * TENSOR_ALIGNMENT))
def test_a_binary_body_joined_from_several_messages_has_its_tensors_aligned(padding: int) -> None:
    """Where the tensor bytes start (the header's length, any) is at a multiple of TENSOR_ALIGNMENT once the
    messages are joined, and the decoder views the tensor there: no copy beyond the join's."""
    body, header_length, data = _binary_body(padding)
    messages = _chunks([body[:5], body[5 : header_length + 3], body[header_length + 3 :]])
    received = asyncio.run(read_receive(_receive(messages), None, 1 << 20, header_length))
    assert bytes(received) == body
    assert _tensor_start(received, header_length) % TENSOR_ALIGNMENT == 0
    tensor = DECODER.decode(received, header_length, 1 << 20).inputs[0].data
    np.testing.assert_array_equal(tensor, data)
    assert np.shares_memory(tensor, np.frombuffer(received, np.uint8))


def test_an_unaligned_tensor_is_copied_aligned_by_the_decoder() -> None:
    """A body in one message whose tensor bytes do not start at a multiple of the item size (a header of odd length)
    decodes to an aligned copy of the same values."""
    bodies = (_binary_body(padding) for padding in range(8))
    body, header_length, data = next(b for b in bodies if _tensor_start(b[0], b[1]) % 8)
    received = _read_receive(_chunks([body]), None, 1 << 20)
    assert received is body
    tensor = DECODER.decode(received, header_length, 1 << 20).inputs[0].data
    np.testing.assert_array_equal(tensor, data)
    assert tensor.flags.aligned
    assert not np.shares_memory(tensor, np.frombuffer(received, np.uint8))


def test_a_declared_size_over_the_limit_is_refused_before_reading() -> None:
    with pytest.raises(PayloadTooLarge, match="request body of 101 bytes is over the limit of 100 bytes"):
        _read_receive([], "101", 100)


@pytest.mark.parametrize("chunks", [[b"x" * 101], [b"x" * 60, b"x" * 41]])
def test_reading_stops_at_the_limit_whatever_was_declared(chunks: list[bytes]) -> None:
    with pytest.raises(PayloadTooLarge, match="more than 100"):
        _read_receive(_chunks(chunks), "10", 100)


def test_a_client_that_goes_is_client_disconnect() -> None:
    messages = [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]
    with pytest.raises(ClientDisconnect):
        _read_receive(messages, None, 100)
