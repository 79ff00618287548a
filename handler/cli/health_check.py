"""``HealthCheck``: a new connection's first request, answered where it was accepted when it asks the server's health.

Under a load past a worker's capacity its event loop turns every few milliseconds, and a request on a new connection
waits several turns before the app sees it (the accept, the transport, the first read, the app's task): a load
balancer's or kubelet's health check, which opens a connection each time, would see the server slow to answer,
or take it out, exactly when it is busiest. Triton answers health on HTTP threads of its own. ``HealthCheck`` is
what the thread that accepts a worker's connections (handler/cli/acceptor.py) does with a connection's first bytes:
when they are one whole ``GET /v2/health/live`` or ``/v2/health/ready`` and nothing more, it reads them and writes
the answer the app would (``ServerHealth``, handler/rest/health.py: the same status and body; uvicorn's ``date``
and ``server`` headers; its access log line), then hands the connection to the event loop when the client keeps it
alive, or closes it. Any other first bytes (another request, a head split over packets, a body, a query, more than
``OIP_MAX_HEADER_BYTES`` or ``OIP_MAX_HEADERS``) are left unread for the event loop's protocol, which parses and
answers them as usual.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import Final, Protocol

import httptools

from handler.cli.connections import ConnectionLimits

_REASONS: Final = {200: b"OK", 400: b"Bad Request"}


class Health(Protocol):
    """What answers the server's health without the event loop (``ServerHealth``)."""

    def answer(self, path: str) -> tuple[int, bytes] | None: ...


class DefaultHeaders(Protocol):
    """uvicorn's ``ServerState``: the headers every answer carries (``date``, ``server``), renewed each tick."""

    default_headers: list[tuple[bytes, bytes]]


class _Head:
    """httptools' callbacks for one buffer: the request's target, header fields, and how many requests began and
    ended in it."""

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.fields: list[bytes] = []
        self.begun = self.ended = 0
        self.keep_alive = False

    def on_message_begin(self) -> None:
        self.begun += 1

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append(name.lower())

    def on_headers_complete(self) -> None:
        # as uvicorn's protocol tells it, when the head is complete
        self.keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()

    def on_message_complete(self) -> None:
        self.ended += 1


@dataclass(frozen=True)
class Asked:
    """A health check found in a connection's first bytes (all of them): its path, and what the client asked of the
    connection."""

    path: str
    keep_alive: bool
    http_version: str


def health_asked(data: bytes, limits: ConnectionLimits) -> Asked | None:
    """The health check that ``data`` is, whole and alone (a GET with no body); None for anything else."""
    if len(data) > limits.max_header_bytes or not data.startswith(b"GET /v2/health/"):
        return None
    head = _Head()
    parser = head.parser
    try:
        parser.feed_data(data)
    except (httptools.HttpParserError, httptools.HttpParserUpgrade):
        return None
    if head.begun != 1 or head.ended != 1 or len(head.fields) > limits.max_headers:
        return None
    if b"content-length" in head.fields or b"transfer-encoding" in head.fields:
        return None
    return Asked(head.url.decode("latin-1"), head.keep_alive, parser.get_http_version())


class HealthCheck:
    """Answers a new connection's health check from the accepting thread (see the module's docstring)."""

    def __init__(self, health: Health, state: DefaultHeaders, limits: ConnectionLimits) -> None:
        self.health, self.state, self.limits = health, state, limits
        self.access = logging.getLogger("uvicorn.access")
        #: Health checks answered here (the worker's count of requests served adds them).
        self.answered = 0

    def answer(self, conn: socket.socket, data: bytes) -> bool | None:
        """For ``conn``, whose first bytes ``data`` are (peeked, not read): None when they are not a health check
        answered here (they stay unread); else, once answered, whether the connection is kept alive."""
        asked = health_asked(data, self.limits)
        if asked is None:
            return None
        answer = self.health.answer(asked.path)
        if answer is None:
            return None
        status, body = answer
        lines = [b"HTTP/1.1 %d %s" % (status, _REASONS[status])]
        lines += [name + b": " + value for name, value in self.state.default_headers]
        lines += [b"content-length: %d" % len(body), b"content-type: application/json"]
        if not asked.keep_alive:
            lines.append(b"connection: close")
        conn.recv(len(data))
        conn.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        self.answered += 1
        if self.access.hasHandlers():
            host, port = conn.getpeername()[:2]
            self.access.info('%s - "%s %s HTTP/%s" %d', f"{host}:{port}", "GET", asked.path, asked.http_version,
                             status)  # fmt: skip
        return asked.keep_alive
