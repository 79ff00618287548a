"""Forwarding as a pass-through: an inference body goes to Triton's HTTP endpoint as the same bytes, over a pool
of keep-alive HTTP/1.1 connections, and Triton's answer comes back as it is (error translation as
``TritonClient``'s).

The client is a minimal HTTP/1.1 one on asyncio streams (uvloop's under ``oip serve``): one POST with a
Content-Length body, an answer with Content-Length or chunked, keep-alive unless Triton says ``close``. It
replaced a pooled aiohttp session, whose own per-request work cost 0.4 ms of a 1x4 JSON forward and 0.75 ms of
a 600 KB binary one on this project's CI machine (request building, headers, drain, response machinery;
bench/bench_latency.py). Up to 100 requests are in flight at once, as tritonclient's pool allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as ssl_module
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, urlsplit

import orjson

from adapters.errors import V2Error
from adapters.triton.client import TritonClient

INFERENCE_HEADER_CONTENT_LENGTH: Final = "Inference-Header-Content-Length"
_VERSION_KEY: Final = b'"model_version":"'


@dataclass(frozen=True, slots=True)
class Forwarded:
    """Triton's successful answer as it came: body, JSON header length (None: all JSON) and model version."""

    body: bytes
    header_length: int | None
    model_version: str


def _model_version(header: bytes) -> str:
    """The answer's ``model_version`` without parsing the header (quotes inside JSON strings are escaped)."""
    start = header.find(_VERSION_KEY)
    if start < 0:
        return ""
    start += len(_VERSION_KEY)
    return header[start : header.find(b'"', start)].decode()


#: Connections to Triton at once (tritonclient's pool size), and idle ones kept.
POOL_SIZE: Final = 100
#: Largest header block read from Triton (and the stream buffer's pause mark is twice this).
_READ_LIMIT: Final = 1 << 20

_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class TritonPassthrough:
    """A pool of keep-alive HTTP/1.1 connections to Triton for pass-through inference; ``client`` translates
    errors."""

    def __init__(self, client: TritonClient) -> None:
        self.client = client
        self.settings = client.settings
        # host:port[/prefix], as tritonclient takes it
        scheme = "https" if self.settings.ssl else "http"
        parts = urlsplit(f"{scheme}://{self.settings.url.rstrip('/')}")
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self.settings.ssl else 80)
        self._netloc = parts.netloc
        self._prefix = parts.path
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None
        self._ssl: ssl_module.SSLContext | None = None

    def url(self, model: str, version: str) -> str:
        """``/v2/models/{model}[/versions/{version}]/infer`` on Triton (the path, after any URL prefix)."""
        path = f"{self._prefix}/v2/models/{quote(model, safe='')}"
        if version:
            path += f"/versions/{quote(version, safe='')}"
        return f"{path}/infer"

    async def forward(self, model: str, version: str, body: bytes, headers: Mapping[str, str]) -> Forwarded:
        """POST ``body`` to Triton's infer route of ``model`` (never retried: inference is not known to be
        idempotent); a non-200 answer or a transport failure raises the V2Error ``TritonClient`` would."""
        what = f"inference on '{model}'"
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                status, header_length, content = await self._post(
                    self.url(model, version), body, {**self.settings.headers, **headers}
                )
        except Exception as exc:  # transport failures: translated as tritonclient's are
            error = self.client.translate(exc, what)
            if error.retry_after is not None:
                await self.reset()
            raise error from None
        if status != 200:
            raise self._error(status, content, what)
        header = content[:header_length] if header_length is not None else content
        return Forwarded(content, header_length, _model_version(header))

    async def _post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, int | None, bytes]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(POOL_SIZE)
        async with self._slots:
            connection = await self._take()
            keep = False
            try:
                head = [f"POST {path} HTTP/1.1\r\nHost: {self._netloc}\r\nContent-Length: {len(body)}\r\n"]
                head += [f"{name}: {value}\r\n" for name, value in headers.items()]
                head.append("\r\n")
                writer = connection[1]
                writer.write("".join(head).encode("latin-1"))
                writer.write(body)  # what the socket takes now is sent at once, the rest as it drains
                status, answer_headers, content, keep = await _read_response(connection[0])
            finally:
                if keep:
                    self._idle.append(connection)
                else:
                    connection[1].close()
        length = answer_headers.get(INFERENCE_HEADER_CONTENT_LENGTH.lower())
        return status, int(length) if length is not None else None, content

    async def _take(self) -> _Connection:
        """An idle connection Triton has not closed, or a new one."""
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        ssl: ssl_module.SSLContext | None = None
        if self.settings.ssl:
            if self._ssl is None:
                self._ssl = ssl_module.create_default_context(cafile=self.settings.ssl_ca or None)
            ssl = self._ssl
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(self._host, self._port, ssl=ssl, limit=_READ_LIMIT),
                self.settings.connect_timeout,
            )
        except OSError as exc:
            raise ConnectionError(f"Cannot connect to Triton at {self._netloc}: {exc}") from exc

    def _error(self, status: int, content: bytes, what: str) -> V2Error:
        """Triton's error answer as tritonclient reports it (its ``error`` text, the status), then as ours."""
        try:
            message = str(orjson.loads(content)["error"]) if content else "empty response from Triton"
        except (orjson.JSONDecodeError, TypeError, KeyError):
            message = content.decode(errors="replace")
        return self.client.translate(_TritonHttpError(str(status), message), what)

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def reset(self) -> None:
        """Drop the pool after Triton was unreachable: its connections are dead."""
        with contextlib.suppress(Exception):  # closing broken connections may fail; they are dropped all the same
            await self.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers (lower-case names), body and whether the connection may be reused."""
    while True:
        block = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = block[:-4].decode("latin-1").split("\r\n")
        version, status_text = status_line.split(" ", 2)[:2]
        status = int(status_text)
        if not 100 <= status < 200:
            break
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
            chunks.append((await reader.readexactly(size + 2))[:-2])
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
            pass
        return status, headers, b"".join(chunks), keep
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"])), keep
    return status, headers, await reader.read(), False  # the body runs to the end of the connection


class _TritonHttpError(Exception):
    """Triton's HTTP error in the shape ``TritonClient.translate`` reads (tritonclient's ``status``/``message``)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self._status, self._message = status, message

    def status(self) -> str:
        return self._status

    def message(self) -> str:
        return self._message
