"""Forwarding as a pass-through: an inference body goes to Triton's HTTP endpoint as the same bytes, over a pooled
keep-alive aiohttp session, and Triton's answer comes back as it is (error translation as ``TritonClient``'s).

aiohttp is what tritonclient's HTTP client runs on (``tritonclient[http]``), so it adds no dependency; it is
imported on the first forwarded call only. It was chosen over httpx by bench/bench_triton.py (docs/performance.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import orjson

from adapters import deadline as deadlines
from adapters.errors import UpstreamTimeout, V2Error
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


class TritonPassthrough:
    """One pooled HTTP session to Triton for pass-through inference; ``client`` translates errors."""

    def __init__(self, client: TritonClient) -> None:
        self.client = client
        self.settings = client.settings
        self._session: Any = None
        # host:port, as tritonclient takes it
        self._base = f"{'https' if self.settings.ssl else 'http'}://{self.settings.url.rstrip('/')}"

    def _connect(self) -> Any:
        if self._session is None:
            import aiohttp

            ssl: Any = False
            if self.settings.ssl:
                import ssl as ssl_module

                ssl = ssl_module.create_default_context(cafile=self.settings.ssl_ca or None)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=100, ssl=ssl),  # tritonclient's pool size
                # Triton's answer is read as sent; the route compresses for its own caller.
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
                cookie_jar=aiohttp.DummyCookieJar(),
                # The request timeout as aiohttp's own timer rather than a task per call (wait_for), to the
                # moment (aiohttp rounds deadlines of 5 s and more up to whole seconds unless told not to).
                timeout=aiohttp.ClientTimeout(
                    total=self.settings.request_timeout,
                    sock_connect=self.settings.connect_timeout,
                    ceil_threshold=float("inf"),
                ),
            )
        return self._session

    def url(self, model: str, version: str) -> str:
        """``/v2/models/{model}[/versions/{version}]/infer`` on Triton."""
        path = f"/v2/models/{quote(model, safe='')}"
        if version:
            path += f"/versions/{quote(version, safe='')}"
        return f"{self._base}{path}/infer"

    async def forward(self, model: str, version: str, body: bytes, headers: Mapping[str, str]) -> Forwarded:
        """POST ``body`` to Triton's infer route of ``model`` within the request timeout (never retried:
        inference is not known to be idempotent); a non-200 answer, a transport failure or the timeout raises
        the V2Error ``TritonClient`` would."""
        what = f"inference on '{model}'"
        try:
            status, header_length, content = await self._post(
                self.url(model, version), body, {**self.client.call_headers(), **headers}
            )
        except Exception as exc:  # transport failures: translated as tritonclient's are; anything else propagates
            error = self.client.translate(exc, what)
            if error is None:
                raise
            deadline = deadlines.current()
            if isinstance(error, UpstreamTimeout) and deadline is not None and deadline.remaining() <= 0:
                raise deadline.error() from None
            if error.retry_after is not None:
                await self.reset()
            raise error from None
        if status != 200:
            raise self._error(status, content, what)
        header = content[:header_length] if header_length is not None else content
        return Forwarded(content, header_length, _model_version(header))

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, int | None, bytes]:
        deadline = deadlines.current()  # what is left of the request's deadline bounds the call
        limit = {} if deadline is None else {"timeout": self._timeout(deadline)}
        async with self._connect().post(url, data=body, headers=headers, **limit) as response:
            content = await response.read()
            length = response.headers.get(INFERENCE_HEADER_CONTENT_LENGTH)
            return response.status, int(length) if length is not None else None, content

    def _timeout(self, deadline: deadlines.Deadline) -> Any:
        """The session's timeouts with ``total`` at most what is left of ``deadline`` (its error once passed)."""
        import aiohttp

        left = deadline.remaining()
        if left <= 0:
            raise deadline.error()
        total, connect = min(self.settings.request_timeout, left), self.settings.connect_timeout
        return aiohttp.ClientTimeout(total=total, sock_connect=connect, ceil_threshold=float("inf"))

    def _error(self, status: int, content: bytes, what: str) -> V2Error:
        """Triton's error answer as tritonclient's HTTP client raises it (its ``error`` text, the status), then as
        ours: the same translation as the tritonclient path's."""
        from tritonclient.utils import InferenceServerException

        try:
            message = str(orjson.loads(content)["error"]) if content else "empty response from Triton"
        except (orjson.JSONDecodeError, TypeError, KeyError):
            message = content.decode(errors="replace")
        error = self.client.translate(InferenceServerException(message, str(status)), what)
        assert error is not None  # an exception with a status always has a row
        return error

    async def close(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def reset(self) -> None:
        """Drop the pool after Triton was unreachable: its connections are dead."""
        with contextlib.suppress(Exception):  # closing broken connections may fail; they are dropped all the same
            await self.close()
