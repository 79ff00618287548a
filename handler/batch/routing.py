"""Which batch event an event is, told from its shape alone: cheap, importing nothing, and never raising (the HTTP
Lambda handler asks it about events that are not HTTP, malformed ones included)."""

from __future__ import annotations

from typing import Any


def batch_event_kind(event: Any) -> str | None:
    """``sqs``, ``s3`` (notification or EventBridge) or ``items`` (Step Functions item batch); None for others."""
    if type(event) is not dict:
        return None
    records = event.get("Records")
    if type(records) is list and records and type(records[0]) is dict:
        source = records[0].get("eventSource")
        if source == "aws:sqs":
            return "sqs"
        if source == "aws:s3":
            return "s3"
    if event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created":
        return "s3"
    if "Items" in event:
        return "items"
    return None
