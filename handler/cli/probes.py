"""``Probes``: a probe's request (the server's health or metadata, a model's metadata or readiness), answered by the
thread that accepted its connection.

Under a load past a worker's capacity its event loop turns every few milliseconds, and a request waits a turn or
more before the app sees it: a load balancer's or kubelet's health check, or a dashboard polling metadata, would
see the server slow to answer, or take it out, exactly when it is busiest. Triton answers health and metadata on
HTTP threads of its own. ``Probes`` is what the thread that accepts a worker's connections (handler/cli/acceptor.py)
does with a connection's bytes before any other request of it reaches the event loop: when they are one whole
``GET`` that ``ProbeAnswers`` (handler/rest/probe_answers.py) answers at once, and nothing more, it reads them and
writes the answer the app would (the same status and body; uvicorn's ``date`` and ``server`` headers; its access
log line), and the thread keeps the connection for its next request, or closes it when the client asked so. Any
other bytes (another request, a head split over packets, a body, a query, more than ``OIP_MAX_HEADER_BYTES`` or
``OIP_MAX_HEADERS``) are left unread for the event loop's protocol, which parses and answers them as usual.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass
from typing import Final, Protocol

import httptools

from handler.cli import held_calls
from handler.cli.connections import ConnectionLimits

_REASONS: Final = {200: b"OK", 400: b"Bad Request"}
#: Seconds a probe's answer is given to leave (a few hundred bytes into an empty send buffer).
ANSWER_S: Final = 1.0
#: The most of a connection's waiting bytes looked at: a probe's head is far shorter.
FIRST_READ: Final = 4096

logger = logging.getLogger("uvicorn.error")


class Answers(Protocol):
    """What answers a probe's request without the event loop (``ProbeAnswers``)."""

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
    """A probe's request found in a connection's bytes (all of them): its path, and what the client asked of the
    connection."""

    path: str
    keep_alive: bool
    http_version: str


def probe_asked(data: bytes, limits: ConnectionLimits) -> Asked | None:
    """The ``GET /v2...`` that ``data`` is, whole and alone (with no body); None for anything else."""
    if len(data) > limits.max_header_bytes or not data.startswith(b"GET /v2"):
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


class Probes:
    """Answers a probe's request from the thread that accepted its connection or keeps it (see the module's
    docstring)."""

    def __init__(self, answers: Answers, state: DefaultHeaders, limits: ConnectionLimits) -> None:
        self.answers, self.state, self.limits = answers, state, limits
        self.access = logging.getLogger("uvicorn.access")
        #: Requests answered here, by the accepting thread and the kept connections' (the worker's count of
        #: requests served adds them).
        self.answered = 0
        self._counting = threading.Lock()

    @staticmethod
    def peek(conn: socket.socket) -> bytes | None:
        """The bytes waiting on ``conn``, left there (empty when it has closed or was reset); None when none came
        yet. The call keeps the interpreter (``held_calls.py``)."""
        return held_calls.peek(conn, FIRST_READ)

    def serve(self, conn: socket.socket, data: bytes | None) -> bool | None:
        """What becomes of ``conn``, whose waiting bytes ``data`` are (peeked; empty: it has closed; None: none
        yet): True once a probe's request is answered and the client keeps the connection alive; None when the
        bytes are not one (they stay unread, for the event loop); False when it is to be closed (it has, it asked
        to, or answering failed)."""
        if data is None:
            return None
        if not data:
            return False
        try:
            return self.answer(conn, data)
        except OSError:
            return False
        except Exception:
            logger.exception("answering a probe: its connection is closed")
            return False

    def answer(self, conn: socket.socket, data: bytes) -> bool | None:
        """For ``conn``, whose waiting bytes ``data`` are (peeked, not read): None when they are not a request
        answered here (they stay unread); else, once answered, whether the connection is kept alive."""
        asked = probe_asked(data, self.limits)
        if asked is None:
            return None
        try:
            answer = self.answers.answer(asked.path)
        except Exception:  # left to the app, which answers a failure with its error id and logs it
            return None
        if answer is None:
            return None
        status, body = answer
        lines = [b"HTTP/1.1 %d %s" % (status, _REASONS[status])]
        lines += [name + b": " + value for name, value in self.state.default_headers]
        lines += [b"content-length: %d" % len(body), b"content-type: application/json"]
        if not asked.keep_alive:
            lines.append(b"connection: close")
        conn.settimeout(ANSWER_S)
        conn.recv(len(data))
        conn.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        with self._counting:
            self.answered += 1
        if self.access.hasHandlers():
            host, port = conn.getpeername()[:2]
            self.access.info('%s - "%s %s HTTP/%s" %d', f"{host}:{port}", "GET", asked.path, asked.http_version,
                             status)  # fmt: skip
        return asked.keep_alive
