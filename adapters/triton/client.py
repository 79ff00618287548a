"""One asyncio tritonclient (HTTP or gRPC) for a Triton URL, with error translation, timeouts and retries.

The client is imported lazily (``tritonclient.http.aio`` pulls in gevent and aiohttp, ``tritonclient.grpc.aio``
grpcio: both weigh on a cold start), so a deployment without remote models pays nothing. HTTP is the default all
the same: it forwards faster (bench/bench_triton.py, docs/performance.md).

Foreign exceptions become ours at this boundary only, by type, in one table per protocol (``error_table``), most
specific first: tritonclient's ``InferenceServerException`` by the status Triton answered (``HTTP_STATUS_ERRORS``;
over gRPC, grpc's status code, ``GRPC_STATUS_ERRORS``: tritonclient's gRPC client raises every ``grpc.RpcError`` as
one, with the code's name, so grpc itself is never imported here, as the import contract wants), aiohttp's
failures by their class. An exception no row matches (a bug, or tritonclient refusing a call it was given) is not
translated: it propagates to the transport, which answers 500 / INTERNAL with a correlation id and logs it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from adapters import deadline as deadlines
from adapters.errors import (
    InvalidInput,
    ModelNotFound,
    ModelNotReady,
    Unsupported,
    UpstreamError,
    UpstreamTimeout,
    V2Error,
)
from adapters.triton.settings import TritonSettings

T = TypeVar("T")

#: Triton's HTTP statuses as tritonclient's HTTP client reports them (``InferenceServerException.status()``, "400")
#: to ours; any other status is Triton failing (UpstreamError). Triton answers its INVALID_ARG, UNKNOWN,
#: ALREADY_EXISTS and CANCELLED errors with 400, NOT_FOUND with 404, UNSUPPORTED with 501, UNAVAILABLE with 503 and
#: INTERNAL with 500.
HTTP_STATUS_ERRORS: Final[Mapping[str, type[V2Error]]] = {
    "400": InvalidInput,
    "404": ModelNotFound,
    "501": Unsupported,
    "503": ModelNotReady,
}

#: gRPC status codes by name, as tritonclient's gRPC client reports a ``grpc.RpcError``'s ``code()`` (``status()``:
#: "StatusCode.NOT_FOUND"), to ours; any other code is Triton failing (UpstreamError). The codes that Triton's HTTP
#: endpoint answers with 400 are InvalidInput here too: one Triton error, one answer, whichever protocol forwards it.
GRPC_STATUS_ERRORS: Final[Mapping[str, type[V2Error]]] = {
    "INVALID_ARGUMENT": InvalidInput,
    "UNKNOWN": InvalidInput,
    "ALREADY_EXISTS": InvalidInput,
    "CANCELLED": InvalidInput,
    "NOT_FOUND": ModelNotFound,
    "UNIMPLEMENTED": Unsupported,
    "UNAVAILABLE": ModelNotReady,
    "DEADLINE_EXCEEDED": UpstreamTimeout,
}

#: Our error and the words to report it in (Triton's or the transport's own words, or ours), or None: not ours.
Reading = tuple[type[V2Error], str] | None
#: (foreign exception type, how to read one), checked in order with isinstance.
ErrorRow = tuple[type[BaseException], Callable[[Any], Reading]]


def _by_status(statuses: Mapping[str, type[V2Error]]) -> Callable[[Any], Reading]:
    def read(exc: Any) -> Reading:
        status = exc.status()
        if status is None:  # tritonclient refused the call itself (an argument it does not take): a bug
            return None
        return statuses.get(str(status).removeprefix("StatusCode."), UpstreamError), str(exc.message())

    return read


def _always(kind: type[V2Error], words: str) -> Callable[[Any], Reading]:
    return lambda exc: (kind, words)


def _cannot_connect(exc: Any) -> Reading:
    return ModelNotReady, f"cannot connect: {exc.strerror}" if exc.strerror else "cannot connect"


def error_table(protocol: str) -> tuple[ErrorRow, ...]:
    """The rows for tritonclient's ``protocol`` client (``http``: aiohttp underneath; ``grpc``: grpc.aio), most
    specific first. Imports tritonclient's exception and aiohttp (loaded with the client)."""
    from tritonclient.utils import InferenceServerException

    if protocol == "http":
        import aiohttp

        return (
            (InferenceServerException, _by_status(HTTP_STATUS_ERRORS)),
            # The request timeout (asyncio's or aiohttp's own, which is also a ClientConnectionError: first).
            (TimeoutError, _always(UpstreamTimeout, "no answer in time")),
            (aiohttp.ClientConnectorError, _cannot_connect),  # refused, no route, DNS, TLS
            (aiohttp.ClientConnectionError, _always(ModelNotReady, "the connection broke")),
            (aiohttp.ClientPayloadError, _always(ModelNotReady, "its answer was cut short")),
            (aiohttp.ClientResponseError, _always(UpstreamError, "its answer is not HTTP")),
        )
    return (
        (InferenceServerException, _by_status(GRPC_STATUS_ERRORS)),
        (TimeoutError, _always(UpstreamTimeout, "no answer in time")),  # a health probe's wait
    )


class TritonClient:
    """One asyncio tritonclient (HTTP or gRPC) for a Triton URL, with error translation, timeouts and retries.

    Calls are bounded by the request timeout: over gRPC as the call's deadline (which Triton sees), over HTTP by
    waiting at most that long."""

    def __init__(self, settings: TritonSettings) -> None:
        self.settings = settings
        self._client: Any = None
        self._module: Any = None
        self._errors: tuple[ErrorRow, ...] | None = None
        self._grpc = settings.protocol == "grpc"
        #: Keyword arguments of every call: over gRPC, its deadline.
        self._deadline: dict[str, Any] = {"client_timeout": settings.request_timeout} if self._grpc else {}
        #: Keyword arguments of a call answering a document: JSON (the gRPC client answers protobuf otherwise).
        self._document: dict[str, Any] = {"as_json": True, **self._deadline} if self._grpc else {}
        #: ``inject(headers)``: OpenTelemetry's propagator, adding the current trace's W3C headers (``trace_context``).
        self._inject: Callable[[dict[str, str]], None] | None = None
        if settings.trace_context:
            from opentelemetry.propagate import inject

            self._inject = inject

    def call_headers(self) -> dict[str, str]:
        """The headers of one inference call: the configured ones (a copy: tritonclient adds its own to the dict it
        is given) and, with ``trace_context``, the current span's ``traceparent`` and ``tracestate``, so that Triton
        continues the caller's trace (HTTP headers; gRPC metadata through tritonclient's ``headers=``)."""
        headers = dict(self.settings.headers)
        if self._inject is not None:
            self._inject(headers)
        return headers

    def _connect(self) -> Any:
        if self._client is None:
            settings = self.settings
            if settings.protocol == "http":
                import ssl as ssl_module

                import tritonclient.http.aio as module

                context = ssl_module.create_default_context(cafile=settings.ssl_ca or None) if settings.ssl else None
                self._client = module.InferenceServerClient(
                    settings.url, conn_timeout=settings.request_timeout, ssl=settings.ssl, ssl_context=context
                )
            else:
                import tritonclient.grpc.aio as module
                from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE

                certificates = Path(settings.ssl_ca).read_bytes() if settings.ssl and settings.ssl_ca else None
                channel_args = [
                    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
                    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
                    # A channel of its own, with short reconnect backoff, so that a restarted Triton is
                    # reached at once instead of after gRPC's shared subchannel waits out its backoff.
                    ("grpc.use_local_subchannel_pool", 1),
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                ]
                self._client = module.InferenceServerClient(
                    settings.url, ssl=settings.ssl, root_certificates=certificates, channel_args=channel_args
                )
            self._module = module
        return self._client

    @property
    def module(self) -> Any:
        """``tritonclient.http.aio`` or ``tritonclient.grpc.aio``."""
        self._connect()
        return self._module

    def translate(self, exc: BaseException, what: str) -> V2Error | None:
        """One of tritonclient's, grpc's or the transport's exceptions as ours (``what``: the call, for the message),
        by the first row of ``error_table`` it is an instance of; None when no row is (not ours to translate)."""
        if self._errors is None:
            self._errors = error_table(self.settings.protocol)
        for foreign, read in self._errors:
            if isinstance(exc, foreign):
                reading = read(exc)
                return None if reading is None else self._ours(*reading, what)
        return None

    def _ours(self, kind: type[V2Error], words: str, what: str) -> V2Error:
        if kind is ModelNotReady:
            return ModelNotReady(
                f"Triton at {self.settings.url} is unavailable ({what}): {words}", retry_after=self.settings.retry_after
            )
        if kind is UpstreamTimeout:
            return UpstreamTimeout(f"Triton did not answer {what} within {self.settings.request_timeout} s")
        if kind is UpstreamError:
            return UpstreamError(f"Triton failed {what}: {words}")
        return kind(words)  # Triton's own word on the request: passed on as it is

    async def _call(
        self, what: str, make: Callable[[Any], Awaitable[T]], idempotent: bool = True, timeout: float | None = None
    ) -> T:
        """Run one client call within the request timeout (or ``timeout`` s, which a gRPC ``make`` passes itself);
        retry idempotent calls on unavailability."""
        attempts = 1 + (self.settings.retries if idempotent else 0)
        for attempt in range(attempts):
            try:
                if self._grpc:  # the call carries its deadline
                    return await make(self._connect())
                return await asyncio.wait_for(make(self._connect()), timeout or self.settings.request_timeout)
            except Exception as exc:  # translated by the table, or raised as it is
                error = self.translate(exc, what)
                if error is None:
                    raise
                if isinstance(error, ModelNotReady):
                    await self.reset()
                if not (isinstance(error, ModelNotReady) and attempt + 1 < attempts):
                    raise error from None
                await asyncio.sleep(self.settings.backoff * 2**attempt)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the underlying connection pool."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def reset(self) -> None:
        """Drop the connection after Triton was unreachable: a gRPC channel would otherwise sit in its
        reconnect backoff (up to minutes) after Triton is back; a fresh one connects at once."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail; it is dropped all the same
                await client.close()

    async def _probe(self, what: str, make: Callable[[Any], Awaitable[Any]]) -> bool:
        """A health probe within the connect timeout: False (and a fresh connection next time) when Triton is
        unavailable, slow or refuses; an exception no row of the table matches propagates."""
        try:
            return bool(await asyncio.wait_for(make(self._connect()), self.settings.connect_timeout))
        except Exception as exc:
            if self.translate(exc, what) is None:
                raise
            await self.reset()
            return False

    async def server_ready(self) -> bool:
        """Whether Triton answers ready."""
        return await self._probe("server readiness", lambda c: c.is_server_ready(headers=self.settings.headers))

    async def model_ready(self, name: str, version: str) -> bool:
        """Whether Triton reports the model ready (False when Triton does not answer)."""
        return await self._probe(
            f"readiness of '{name}'", lambda c: c.is_model_ready(name, version, headers=self.settings.headers)
        )

    async def index(self) -> list[dict[str, Any]]:
        """Triton's repository index."""
        index = await self._call(
            "the repository index",
            lambda c: c.get_model_repository_index(headers=self.settings.headers, **self._document),
        )
        return list(index.get("models", [])) if isinstance(index, dict) else list(index)

    async def model_metadata(self, name: str, version: str) -> dict[str, Any]:
        """Triton's metadata of a model, as JSON."""
        document: dict[str, Any] = await self._call(
            f"metadata of '{name}'",
            lambda c: c.get_model_metadata(name, version, headers=self.settings.headers, **self._document),
        )
        return document

    async def model_config(self, name: str, version: str) -> dict[str, Any]:
        """Triton's configuration of a model, as JSON (the ``config`` member of gRPC's answer)."""
        document = await self._call(
            f"configuration of '{name}'",
            lambda c: c.get_model_config(name, version, headers=self.settings.headers, **self._document),
        )
        return dict(document.get("config", document))

    async def infer(
        self,
        name: str,
        version: str,
        inputs: list[Any],
        outputs: list[Any] | None,
        request_id: str,
        priority: int = 0,
        timeout_us: int = 0,
    ) -> tuple[Any, dict[str, Any]]:
        """One inference (never retried: it is not known to be idempotent): tritonclient's result and its
        response document. ``priority`` and ``timeout_us`` (0: none) are the request's Triton parameters. Within
        the request's deadline (adapters/deadline.py), the call waits at most what is left of it and Triton's
        ``timeout`` parameter is at most that too, so Triton drops a request nobody will read the answer to."""
        deadline = deadlines.current()
        waited, triton_timeout = self.settings.request_timeout, timeout_us or None
        if deadline is not None:
            left = deadline.remaining()
            if left <= 0:
                raise deadline.error()
            waited = min(waited, left)
            triton_timeout = min(triton_timeout or 1 << 62, max(int(left * 1e6), 1))
        limit = {"client_timeout": waited} if self._grpc else {}
        try:
            result = await self._call(
                f"inference on '{name}'",
                lambda c: c.infer(
                    name,
                    inputs,
                    model_version=version,
                    outputs=outputs,
                    request_id=request_id,
                    priority=priority,
                    timeout=triton_timeout,
                    headers=self.call_headers(),
                    **limit,
                ),
                idempotent=False,
                timeout=waited,
            )
        except UpstreamTimeout:
            if deadline is not None and deadline.remaining() <= 0:
                raise deadline.error() from None
            raise
        return result, result.get_response(as_json=True) if self._grpc else result.get_response()
