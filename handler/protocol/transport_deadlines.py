"""The deadlines transports know of, as adapters/deadline.py's ``Deadline``: a gRPC call's, a Lambda invocation's."""

from __future__ import annotations

from typing import Any

from adapters.deadline import Deadline, after

GRPC: str = "the gRPC deadline"
LAMBDA: str = "the Lambda invocation's remaining time"


def grpc_deadline(context: Any) -> Deadline | None:
    """A gRPC call's deadline (``context.time_remaining()``: seconds, None without one)."""
    remaining = context.time_remaining()
    return None if remaining is None else after(remaining, GRPC)


def lambda_deadline(context: Any, margin_ms: int) -> Deadline | None:
    """A Lambda invocation's deadline, ``margin_ms`` before the function's timeout, from its context
    (``get_remaining_time_in_millis()``); None for a context without it."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return after((remaining() - margin_ms) / 1000, LAMBDA)
