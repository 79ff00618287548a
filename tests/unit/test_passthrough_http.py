"""The pass-through's HTTP/1.1 answer reader and glibc's malloc thresholds (no Triton needed)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from adapters.triton.client import TritonClient
from adapters.triton.passthrough import TritonPassthrough, _read_response
from adapters.triton.settings import TritonSettings
from handler.protocol.memory import keep_freed_memory


def _read(raw: bytes) -> tuple[int, dict[str, str], bytes, bool]:
    async def read() -> tuple[int, dict[str, str], bytes, bool]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await _read_response(reader)

    return asyncio.run(read())


def test_content_length_answer_keeps_the_connection() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{}{}extra"
    assert _read(raw) == (200, {"content-type": "application/json", "content-length": "4"}, b"{}{}", True)


def test_chunked_answer_with_an_interim_answer_and_trailers() -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    status, _, body, keep = _read(raw)
    assert (status, body, keep) == (400, b"abcde", True)


def test_connection_close_and_unframed_answers_are_not_reused() -> None:
    assert _read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx")[3] is False
    assert _read(b"HTTP/1.0 200 OK\r\n\r\nto the end")[2:] == (b"to the end", False)


def test_url_keeps_a_prefix_and_quotes_names() -> None:
    passthrough = TritonPassthrough(TritonClient(TritonSettings(url="triton:8000/prefix/", proxy_all=True)))
    assert passthrough.url("a b", "2") == "/prefix/v2/models/a%20b/versions/2/infer"
    assert passthrough.url("m", "") == "/prefix/v2/models/m/infer"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_malloc_thresholds() -> None:
    assert keep_freed_memory(0) is False
    assert keep_freed_memory(64) is True
