"""HTTP request bodies: size limit, Content-Type and Content-Encoding; response compression."""

from __future__ import annotations

import gzip
import zlib
from typing import Final

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from adapters.errors import InvalidInput, UnsupportedMediaType
from handler.protocol.limits import MAX_GZIP_MEMBERS, byte_count, too_large

INFERENCE_HEADER_CONTENT_LENGTH: Final = "inference-header-content-length"
_GZIP_MAGIC: Final = b"\x1f\x8b"


ACCEPTED_MEDIA_TYPES: Final = frozenset({"", "application/json", "application/octet-stream"})
#: How far apart the tensor bytes of a binary-extension body may start and still be viewed in place by numpy (the
#: largest item of a V2 datatype is 8 bytes): an unaligned tensor is copied by the decoder (``codecs/binary_data.py``).
TENSOR_ALIGNMENT: Final = 16
_PADDING: Final = bytes(TENSOR_ALIGNMENT)


def check_media_type(content_type: str | None) -> None:
    """Accept JSON, octet-stream (binary extension) or no Content-Type; 415 otherwise."""
    if content_type is None or content_type in ACCEPTED_MEDIA_TYPES:  # as most clients send it
        return
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in ACCEPTED_MEDIA_TYPES and not media_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"Content-Type '{media_type}' is not supported; send application/json, or application/octet-stream "
            "with the Inference-Header-Content-Length header for binary tensor data"
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body of a Starlette request, refusing more than ``limit`` bytes before buffering them."""
    return await read_receive(request.receive, request.headers.get("content-length"), limit)


def declared_size(declared: str | None, limit: int) -> int | None:
    """A declared Content-Length as a byte count (None when there is none, or it is no number); PayloadTooLarge
    when it is over ``limit`` or has more digits than any body."""
    if declared is None:
        return None
    size = byte_count(declared)
    if size is None:
        if declared.isdecimal():
            raise too_large(f"a {len(declared)}-digit number of", limit)
        return None
    if size > limit:
        raise too_large(declared, limit)
    return size


async def read_receive(
    receive: Receive, declared: str | None, limit: int, align_at: int | None = None
) -> bytes | memoryview:
    """The raw body from the ASGI ``receive`` callable's messages (the app's own, or a Starlette ``Request``'s),
    refusing more than ``limit`` bytes (by the declared Content-Length first) before buffering them; ClientDisconnect
    if the client goes. A body that comes in one message (every Lambda event, most small requests) is returned as
    it came; one joined from several, as ``joined`` joins them (``align_at``: where its tensor bytes start)."""
    declared_size(declared, limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise too_large(f"more than {limit}", limit)
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else joined(chunks, align_at)


def joined(chunks: list[bytes], align_at: int | None) -> bytes | memoryview:
    """``chunks`` as one buffer: bytes, or, with ``align_at`` (a binary-extension body's JSON header length), a view
    of bytes joined after as many bytes of padding as put its byte ``align_at`` at a multiple of ``TENSOR_ALIGNMENT``
    from the start of their data (CPython keeps a bytes object's data at that alignment): the tensors are then
    viewed in place, in the one copy the join makes anyway."""
    pad = 0 if align_at is None else -align_at % TENSOR_ALIGNMENT
    if not pad:
        return b"".join(chunks)
    return memoryview(b"".join((_PADDING[:pad], *chunks)))[pad:]


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding: gzip|deflate`` with the decompressed size capped at ``limit``.

    A gzip body may hold several members (RFC 1952), at most ``MAX_GZIP_MEMBERS``: each is decompressed only as far
    as the limit left by those before it, so no member, and not their sum, goes past ``limit``. Anything after the
    last member (or after a deflate stream) is refused, not ignored."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return body
    if name == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif name == "deflate":
        # tritonclient sends zlib-wrapped deflate; a raw deflate stream has no header byte 0x78.
        wbits = zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
    else:
        raise UnsupportedMediaType(f"Content-Encoding '{name}' is not supported; use gzip, deflate or identity")
    parts: list[bytes] = []
    size = 0
    rest = body
    while True:
        decompressor = zlib.decompressobj(wbits)
        try:
            data = decompressor.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise InvalidInput(f"body is not valid {name} data: {exc}") from None
        size += len(data)
        if size > limit:
            raise too_large(f"more than {limit} (decompressed)", limit)
        if not decompressor.eof:
            raise InvalidInput(f"{name} body is truncated")
        parts.append(data)
        rest = decompressor.unused_data
        if not rest:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if name != "gzip" or rest[:2] != _GZIP_MAGIC:
            raise InvalidInput(f"{name} body has {len(rest)} bytes after its compressed data")
        if len(parts) == MAX_GZIP_MEMBERS:
            raise InvalidInput(f"gzip body has more than {MAX_GZIP_MEMBERS} members")


def negotiate_encoding(accept_encoding: str | None) -> str | None:
    """The response encoding to use: gzip or deflate if the client accepts one, else None."""
    accepted: dict[str, float] = {}
    for part in (accept_encoding or "").split(","):
        token, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        accepted[token.strip().lower()] = quality
    for name in ("gzip", "deflate"):
        if accepted.get(name, 0.0) > 0:
            return name
    return None


def compress(body: bytes, encoding: str) -> bytes:
    """Compress a response body (fast level: latency matters more than the last few percent)."""
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=1, mtime=0)
    return zlib.compress(body, 1)
