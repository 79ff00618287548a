"""What a connection to ``oip serve`` may hold: uvicorn's httptools protocol with a time limit for a request's head
and for a body that stops arriving, and a size limit and a field count for the head.

uvicorn has none of these: a connection that never completes its headers, or a body that stalls, stays open (its
keep-alive timeout runs only after an answer), and httptools takes a head of any size (its h11 parser stops at
16 KiB, ``h11_max_incomplete_event_size``, but parses every request in Python and has no timeouts either). ASGI
cannot help: an app sees nothing before the headers are complete. ``GuardedHttpToolsProtocol`` is a protocol class
for ``uvicorn.Config(http=...)``, uvicorn's way to choose one: a subclass of uvicorn's httptools protocol whose
``asyncio.Protocol`` methods, httptools callbacks (``on_message_begin``, ``on_headers_complete``,
``on_message_complete``) and ``on_response_complete`` each call uvicorn's own, so that every request is still parsed
and answered by uvicorn; it reads uvicorn's ``url`` and ``headers`` to measure a head that may be over the limit.
Limits come from ``Settings`` (OIP_HEADER_TIMEOUT, OIP_BODY_TIMEOUT, OIP_MAX_HEADER_BYTES, OIP_MAX_HEADERS,
OIP_KEEP_ALIVE_TIMEOUT), read once per process.

- Head: from the connection (or the first byte of a later request on it) a client has ``header_timeout`` seconds to
  send the whole head; then it gets 408 and the connection is closed (closed without an answer when it sent no
  byte of a request). A head over ``max_header_bytes`` or ``max_headers`` fields gets 431, checked as the head
  arrives (a head still incomplete after more than the limit of bytes is refused without waiting for its end).
- Body: once the headers are complete, the body may pause at most ``body_timeout`` seconds between two reads; then
  the connection is closed (the app's ``receive`` sees the disconnect; its answer may already be on its way).
- After an answer: uvicorn's keep-alive timeout closes an idle connection; bytes that begin no request (empty lines,
  which stop that timer) have ``keep_alive_timeout + header_timeout`` seconds.
- Connections: a worker accepts at most ``OIP_MAX_CONNECTIONS`` open connections (uvicorn's ``limit_concurrency``;
  the others wait in the listening socket's backlog: handler/cli/acceptor.py). Past that many requests in progress
  (a request whose client has gone runs on), a request gets 503 with ``{"error": ...}`` naming the setting and
  ``Retry-After``, and its connection is closed (uvicorn answers it in plain text). uvicorn's own check, which
  counts the connection asking among the limit, is left with nothing to do.
- Framing: a request with both ``Transfer-Encoding: chunked`` and a Content-Length is read by its chunks, as Triton
  reads it (RFC 9112 6.3: Transfer-Encoding overrides Content-Length), where httptools alone answers 400; the
  connection is closed after its answer (RFC 9112 6.1), so nothing after it on the connection is read by the other
  framing.

Deadlines are checked by one timer per event loop, four times per the shorter timeout (at most once a second), and
read a clock that timer keeps: a request costs a few attribute writes, no timer and no clock reading.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import unquote

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from handler.cli.joined_writes import JoinedWrites
from handler.config.settings import Settings, inherited_settings
from handler.inference.admission import Overloaded
from handler.inference.loop_shedding import RECORD, LoopShedding, Record

#: A connection's phases: waiting for a request's head (or its first byte), reading its body, the request read
#: (with the app), answered and waiting for the next request.
_HEAD: Final = 0
_BODY: Final = 1
_READ: Final = 2
_IDLE: Final = 3


@dataclass(frozen=True)
class ConnectionLimits:
    """What a connection may hold (see the module's docstring)."""

    header_timeout: float
    body_timeout: float
    max_header_bytes: int
    max_headers: int
    keep_alive_timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            settings.header_timeout,
            settings.body_timeout,
            settings.max_header_bytes,
            settings.max_headers,
            settings.keep_alive_timeout,
        )

    @property
    def sweep_interval(self) -> float:
        """Seconds between two checks of the deadlines: a quarter of the shorter timeout, 50 ms to 1 s."""
        return min(max(min(self.header_timeout, self.body_timeout) / 4, 0.05), 1.0)


@functools.cache
def process_limits() -> ConnectionLimits:
    """The limits of this process's connections, from the settings ``oip serve`` handed it."""
    return ConnectionLimits.from_settings(inherited_settings())


#: An inference request's target (``InferEntry``'s path, and a query), the one kind the loop's shedding refuses.
INFER_TARGET: Final = re.compile(rb"/v2/models/([^/?]+)(?:/versions/([^/?]+))?/infer(?:\?.*)?", re.DOTALL)


def _answer(status: int, reason: str, message: str, headers: str = "connection: close\r\n") -> bytes:
    body = json.dumps({"error": message}).encode()
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + headers + "\r\n").encode() + body


@functools.lru_cache(maxsize=128)
def _shed_bytes(error: Overloaded, keep: bool) -> bytes:
    """The 503 a request refused by the loop's shedding gets, with ``Retry-After``: written once per error (one per
    ``Retry-After`` value) and connection header."""
    headers = f"retry-after: {error.retry_after}\r\n" + ("" if keep else "connection: close\r\n")
    return _answer(503, "Service Unavailable", error.message, headers)


class _Sweeper:
    """The deadlines of one event loop's guarded connections, checked by one timer. ``now`` is the loop's time at
    the last check (or when a connection came while none were open): the clock connections read, which costs
    nothing and is late by at most ``interval``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float, tasks: set[asyncio.Task[None]]) -> None:
        self.loop, self.interval = loop, interval
        self.shedding = LoopShedding(loop, tasks)
        self.now = loop.time()
        self.connections: set[GuardedHttpToolsProtocol] = set()
        self.timer: asyncio.TimerHandle | None = None
        #: Requests the shedding refused in this turn of the loop, by their target's model and version (as sent),
        #: recorded together on its next turn, with the last error.
        self.refusals: dict[tuple[bytes | None, bytes | None], int] = {}
        self.refusal: Overloaded | None = None

    def add(self, connection: GuardedHttpToolsProtocol) -> None:
        self.connections.add(connection)
        if self.timer is None:
            self.now = self.loop.time()
            self.timer = self.loop.call_later(self.interval, self.sweep)

    def refused(self, record: Record, target: re.Match[bytes], error: Overloaded) -> None:
        """Count a refused request, recorded by ``record`` with this turn's others (``record_refusals``)."""
        key = target.group(1, 2)
        refusals = self.refusals
        if not refusals:
            self.loop.call_soon(self.record_refusals, record)
        refusals[key] = refusals.get(key, 0) + 1
        self.refusal = error

    def record_refusals(self, record: Record) -> None:
        """Record the refusals counted since the last call, one call per model and version."""
        refusals, error = self.refusals, self.refusal
        self.refusals = {}
        assert error is not None
        for (name, version), requests in refusals.items():
            record(unquote(name.decode("latin-1")) if name else "",
                   unquote(version.decode("latin-1")) if version else None, error, requests)  # fmt: skip

    def sweep(self) -> None:
        self.now = now = self.loop.time()
        for connection in [c for c in self.connections if c.deadline <= now]:
            connection.expire()
        self.timer = self.loop.call_later(self.interval, self.sweep) if self.connections else None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head and body limits of ``process_limits``.

    A request costs a few attribute writes: its head is measured from uvicorn's ``url`` and ``headers`` only when the
    bytes that brought it could hold more than ``max_header_bytes``."""

    _sweepers: ClassVar[dict[asyncio.AbstractEventLoop, _Sweeper]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parser.set_dangerous_leniencies(lenient_chunked_length=True)  # framing: see the module's docstring
        self._max_connections, self.limit_concurrency = self.limit_concurrency, None  # checked here: the docstring
        self.limits = limits = process_limits()
        self._header_timeout, self._body_timeout = limits.header_timeout, limits.body_timeout
        self._max_header_bytes = limits.max_header_bytes
        #: When the current phase ends (the event loop's clock); infinite while nothing is awaited from the client.
        self.deadline = math.inf
        self._phase = _HEAD
        self._link: JoinedWrites | None = None
        self._sweeper: _Sweeper = None  # type: ignore[assignment]  # set with the transport
        self._refused = False
        #: The current request's target when the loop's shedding refuses it (its body is skipped); else None.
        self._shed: re.Match[bytes] | None = None
        self._begun = 0  # requests begun on this connection
        self._feeding = 0  # bytes of the chunk being parsed
        self._head_most = 0  # bytes of the chunks that brought the current head: at least its size
        self._head_least = 0  # bytes of the chunks that held nothing but the current head: at most its size
        self._answering = 0  # requests with the app whose answer is not complete

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        loop = asyncio.get_running_loop()
        transport = self._link = JoinedWrites(transport, loop)  # type: ignore[arg-type]  # an answer in one write
        super().connection_made(transport)
        sweeper = self._sweepers.get(loop)
        if sweeper is None:
            sweeper = self._sweepers[loop] = _Sweeper(loop, self.limits.sweep_interval, self.tasks)
        self._sweeper = sweeper
        sweeper.add(self)
        self.deadline = sweeper.now + self._header_timeout

    def connection_lost(self, exc: Exception | None) -> None:
        if self._sweeper is not None:
            self._sweeper.connections.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        begun, phase = self._begun, self._phase
        self._feeding = size = len(data)
        self._head_most += size
        super().data_received(data)
        if self._phase == _BODY:
            self.deadline = self._sweeper.now + self._body_timeout
        elif self._phase == _HEAD and phase == _HEAD and begun == self._begun and begun and not self._refused:
            self._head_least += size  # the whole chunk belongs to the head begun before it
            if self._head_least > self._max_header_bytes:
                self._refuse_head(f"the request's head is longer than {self._max_header_bytes} bytes")

    # httptools' parser callbacks

    def on_message_begin(self) -> None:
        if self._refused:
            return
        if self._phase != _HEAD:  # a later request on the connection: its head has its own time
            self._phase = _HEAD
            self.deadline = self._sweeper.now + self._header_timeout
        self._begun += 1
        self._head_most = self._feeding
        self._head_least = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        if len(self.headers) > self.limits.max_headers:
            self._refuse_head(f"the request has more than {self.limits.max_headers} header fields")
            return
        most = self._max_header_bytes
        if self._head_most > most and self._head_size() > most:
            self._refuse_head(f"the request's head is longer than {most} bytes")
            return
        limit = self._max_connections
        if limit is not None and (len(self.connections) > limit or len(self.tasks) >= limit):
            self._over_limit(limit)
            return
        self._phase = _BODY
        self.deadline = self._sweeper.now + self._body_timeout
        shedding = self._sweeper.shedding
        shedding.watch()
        if (shedding.cap != math.inf or shedding.behind()) and not self._answering:
            target = INFER_TARGET.fullmatch(self.url)
            if target is not None and shedding.refuses():
                self._shed = target  # answered 503 once its body is read: on_message_complete
                return
        self._answering += 1
        super().on_headers_complete()
        names = {name for name, _ in self.headers}
        if b"transfer-encoding" in names and b"content-length" in names and self.cycle is not None:
            self.cycle.keep_alive = False  # framed by its chunks; closed after its answer (the module's docstring)

    def on_body(self, body: bytes) -> None:
        if self._shed is None and not self._refused:  # a refused request's body is read past, not kept
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        if self._shed is not None:
            self._shed_answer(self._shed)
            return
        self._phase = _READ
        self.deadline = math.inf
        super().on_message_complete()

    # uvicorn's callback when an answer is complete

    def on_response_complete(self) -> None:
        if self._link is not None:
            self._link.flush()  # the answer's last write: nothing comes to join it
        self._sweeper.shedding.answered += 1
        if self._answering:
            self._answering -= 1
        if not self._answering and self._phase == _READ:
            # Waiting for the next request: uvicorn's keep-alive timeout closes the connection if nothing comes;
            # bytes that begin no request (which stop that timer) have until this deadline.
            self._phase = _IDLE
            self.deadline = self._sweeper.now + self.limits.keep_alive_timeout + self._header_timeout
        super().on_response_complete()

    # the loop's shedding

    def _shed_answer(self, target: re.Match[bytes]) -> None:
        """503 with Retry-After for the inference request just read, which no task was made for, recorded on the loop's
        next turn (with this turn's other refusals) as the worker's inference service records its own refusals; the
        connection stays open when the request keeps it alive."""
        self._shed = None
        if self._link is None or self._link.is_closing():
            return
        error = self._sweeper.shedding.refusal()
        self._record_refusal(target, error)
        keep = self.parser.should_keep_alive()
        self._link.write(_shed_bytes(error, keep))
        self._link.flush()  # the whole answer: sent now, not at the turn's end
        if not keep:
            self._refuse(0, "", "")
            return
        self._phase = _IDLE
        self.deadline = self._sweeper.now + self.limits.keep_alive_timeout + self._header_timeout

    def _record_refusal(self, target: re.Match[bytes], error: Overloaded) -> None:
        """Count a refused inference request with the loop's turn (``_Sweeper.refused``) for the worker's inference
        service, where the lifespan handed one."""
        record: Record | None = self.app_state.get(RECORD)
        if record is not None:
            self._sweeper.refused(record, target, error)

    # the limits

    def _over_limit(self, limit: int) -> None:
        """503 with ``Retry-After`` and the connection closed for a request past the worker's connection limit
        (OIP_MAX_CONNECTIONS, uvicorn's ``limit_concurrency``, which uvicorn answers in plain text), recorded as the
        loop's refusals are when it is an inference request."""
        error = Overloaded(
            f"the worker holds {limit} connections or requests, its limit (OIP_MAX_CONNECTIONS); retry after 1 s",
            retry_after=1,
        )
        target = INFER_TARGET.fullmatch(self.url)
        if target is not None:
            self._record_refusal(target, error)
        self._refuse(503, "Service Unavailable", error.message, "retry-after: 1\r\nconnection: close\r\n")

    def _head_size(self) -> int:
        """The request line's target and the header fields, each with its separators."""
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def expire(self) -> None:
        """The current phase is over time: 408 for a request's head begun (when no answer is being written),
        else the connection is closed."""
        if self._phase == _HEAD and self._begun:
            self._refuse(408, "Request Timeout", f"the request's head took longer than {self.limits.header_timeout} s")
        else:
            self._refuse(0, "", "")

    def _refuse_head(self, message: str) -> None:
        self._refuse(431, "Request Header Fields Too Large", message)

    def _refuse(self, status: int, reason: str, message: str, headers: str = "connection: close\r\n") -> None:
        """Answer ``status`` (none for 0, or while another answer is being written) with ``headers`` and close the
        connection; nothing more it sends is parsed."""
        self._refused = True
        self.deadline = math.inf
        if self._link is None or self._link.is_closing():
            return
        if status and not self._answering:
            self._link.write(_answer(status, reason, message, headers))
        self._link.close()
