"""JSON responses, serialised once with orjson (numpy-aware)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson
from starlette.responses import Response

from handler.rest.body import compress, negotiate_encoding

JSON: Final = "application/json"


def json_response(document: Any, status: int = 200) -> Response:
    """Serialise with orjson (numpy-aware)."""
    return Response(orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY), status, media_type=JSON)


class InferAnswer(Response):
    """A Starlette ``Response`` whose raw headers are given as they go on the wire, in the order ``Response`` would
    put them (ours, then content-length, then content-type): its constructor's ``init_headers`` takes them as they
    are instead of building them from a dict."""

    def __init__(self, content: bytes, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.wire_headers = raw_headers
        super().__init__(content, 200)

    def init_headers(self, headers: Mapping[str, str] | None = None) -> None:
        self.raw_headers = self.wire_headers


_JSON_TYPE: Final = (b"content-type", JSON.encode())
_BINARY_TYPE: Final = (b"content-type", b"application/octet-stream")


def infer_response(content: bytes, json_length: int | None, accept_encoding: str | None) -> InferAnswer:
    """An inference answer: JSON, or binary-extension with its header length; compressed as the client accepts."""
    raw: list[tuple[bytes, bytes]] = []
    if json_length is not None:
        raw.append((b"inference-header-content-length", b"%d" % json_length))
    encoding = negotiate_encoding(accept_encoding) if accept_encoding else None
    if encoding is not None:
        content = compress(content, encoding)
        raw += [(b"content-encoding", encoding.encode()), (b"vary", b"Accept-Encoding")]
    raw += [(b"content-length", b"%d" % len(content)), _BINARY_TYPE if json_length is not None else _JSON_TYPE]
    return InferAnswer(content, raw)
