"""Request-response logging as AI Platform's ``requestLoggingConfig``: a sampled share of successful
inferences is sent to a Kinesis Data Firehose stream (delivered to S3, queried through a Glue table with
columns model, model_version, time, raw_data, raw_prediction, groundtruth).

A shadow's disagreement (``handler/inference/shadow.py``) goes to the same stream as a record of its own, with the
same columns: its ``raw_prediction`` holds the comparison and both answers, truncated, as JSON text (an object
with ``shadow_version``, ``request_id``, ``comparison``, ``default`` and ``shadow``); its ``raw_data`` and
``groundtruth`` are null. A request's record always has its ``raw_data``."""

from __future__ import annotations

import base64
import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

logger = logging.getLogger(__name__)

Sink = Callable[[bytes], None]


def _text(body: bytes | memoryview) -> str:
    """JSON bodies as text; binary-extension bodies base64-encoded."""
    try:
        return bytes(body).decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(body).decode()


class RequestLogSampler:
    """Forward ``percentage`` % of request/response pairs to ``sink`` as one JSON line each."""

    def __init__(self, percentage: float, sink: Sink, rng: random.Random | None = None) -> None:
        if not 0 <= percentage <= 100:
            raise ValueError("request logging sampling percentage must be within [0, 100]")
        self.percentage = percentage
        self.sink = sink
        self._rng = rng or random.Random()

    def reseed(self) -> None:
        """New randomness (after a SnapStart restore every clone would otherwise sample alike)."""
        self._rng.seed()

    def offer(self, model: str, version: str, request_body: bytes | memoryview, response_body: bytes) -> bool:
        """Log the pair if sampled; returns whether it was. A sink failure never fails the request."""
        if self.percentage <= 0 or self._rng.random() * 100 >= self.percentage:
            return False
        record = {
            "model": model,
            "model_version": version,
            "time": datetime.now(UTC).isoformat(),
            "raw_data": _text(request_body),
            "raw_prediction": _text(response_body),
            "groundtruth": None,
        }
        try:
            self.sink(orjson.dumps(record) + b"\n")
        except Exception:  # logging is best effort: the prediction has been made
            logger.exception("request logging sink failed")
        return True

    def log_shadow(self, model: str, version: str, shadow: dict[str, Any]) -> None:
        """Log a shadow's disagreement (``shadow``: what its ``raw_prediction`` holds), unsampled: the shadow
        chooses which. A sink failure is logged and dropped."""
        record = {
            "model": model,
            "model_version": version,
            "time": datetime.now(UTC).isoformat(),
            "raw_data": None,
            "raw_prediction": orjson.dumps(shadow, option=orjson.OPT_SERIALIZE_NUMPY).decode(),
            "groundtruth": None,
        }
        try:
            self.sink(orjson.dumps(record) + b"\n")
        except Exception:  # logging is best effort: the answer has been given
            logger.exception("request logging sink failed")


def firehose_sink(stream_name: str, client: Any = None) -> Sink:
    """A sink that puts each record to a Firehose delivery stream."""
    if client is None:
        import boto3

        client = boto3.client("firehose")

    def put(record: bytes) -> None:
        client.put_record(DeliveryStreamName=stream_name, Record={"Data": record})

    return put
