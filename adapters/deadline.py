"""One deadline per request, end to end, and Triton's ``timeout`` and ``priority`` request parameters.

A transport that knows when its caller stops waiting (the gRPC deadline, a Lambda invocation's remaining time)
says so with ``bound`` around the request's work; every step below reads it from ``current()``, in the same task
or in a thread started from it (a ``ContextVar``): the admission and the dynamic batcher answer a request whose
deadline passed and never run it, onnxruntime is told to stop a run (``RunOptions.terminate``), and forwarding
to Triton passes on what is left. A request's own ``timeout`` parameter joins the deadline where Triton leaves
it to the server (models without a queue policy: adapters/onnx/backend.py).

Every duration a client gives is clamped to ``MAX_DURATION_S`` (a day): a longer ``timeout``, gRPC deadline or
``grpc-timeout`` means the same as a day, so no value reaches a clock or a wait it could overflow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from adapters.errors import ErrorCode, InvalidInput, V2Error

#: Triton's request parameters: the queue timeout in microseconds, and the priority level (0: the model's default).
TIMEOUT: Final = "timeout"
PRIORITY: Final = "priority"
#: Triton's answer to a request whose queue timeout passed (HTTP 503, gRPC UNAVAILABLE), word for word.
TIMEOUT_EXPIRED: Final = "Request timeout expired"
#: The longest duration a client may give (seconds): longer ones are clamped to it.
MAX_DURATION_S: Final = 86_400.0
#: ``MAX_DURATION_S`` as a ``timeout`` parameter (microseconds).
MAX_TIMEOUT_US: Final = int(MAX_DURATION_S * 1_000_000)


class DeadlineExceeded(V2Error):
    """The request's deadline passed before its answer was ready (HTTP 504, gRPC DEADLINE_EXCEEDED)."""

    code = ErrorCode.DEADLINE_EXCEEDED


class RequestTimeout(V2Error):
    """The request's own ``timeout`` passed before it ran: Triton's ``Request timeout expired`` (503)."""

    code = ErrorCode.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class Deadline:
    """When the request's caller stops waiting (``time.monotonic()`` seconds), and who said so."""

    at: float
    #: What set it, for the answer: "the gRPC deadline", "the Lambda invocation's remaining time", "timeout".
    source: str

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    def error(self) -> V2Error:
        """The answer to a request whose deadline passed: Triton's for its own ``timeout``, else 504."""
        if self.source == TIMEOUT:
            return RequestTimeout(TIMEOUT_EXPIRED)
        return DeadlineExceeded(f"the request's deadline ({self.source}) passed before its answer was ready")

    def check(self) -> None:
        """``error()`` once the deadline has passed."""
        if self.at <= time.monotonic():
            raise self.error()


_current: ContextVar[Deadline | None] = ContextVar("oip_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the request being answered in this context, if it has one."""
    return _current.get()


def after(seconds: float, source: str) -> Deadline:
    """A deadline ``seconds`` from now, at most ``MAX_DURATION_S`` (a NaN is the longest too)."""
    if not seconds <= MAX_DURATION_S:
        seconds = MAX_DURATION_S
    return Deadline(time.monotonic() + seconds, source)


def earliest(*deadlines: Deadline | None) -> Deadline | None:
    """The first of ``deadlines`` to pass (None when none is given)."""
    given = [deadline for deadline in deadlines if deadline is not None]
    return min(given, key=lambda deadline: deadline.at) if given else None


@contextmanager
def bound(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """The request's work inside the block is bounded by ``deadline`` (and any earlier one already in force); an
    already passed deadline raises its error at once."""
    effective = earliest(deadline, _current.get())
    if effective is not None:
        effective.check()
    token = _current.set(effective)
    try:
        yield effective
    finally:
        _current.reset(token)


def _unsigned(parameters: Mapping[str, Any], key: str) -> int:
    value = parameters.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"Unable to parse '{key}': expected an unsigned integer, got {value!r}")
    return value


def request_timeout_us(parameters: Mapping[str, Any]) -> int:
    """A request's ``timeout`` parameter in microseconds (0: none), at most ``MAX_TIMEOUT_US``; InvalidInput unless
    an unsigned integer."""
    return min(_unsigned(parameters, TIMEOUT), MAX_TIMEOUT_US)


def request_priority(parameters: Mapping[str, Any]) -> int:
    """A request's ``priority`` parameter (0: the model's default); InvalidInput unless an unsigned integer."""
    return _unsigned(parameters, PRIORITY)
