"""Re-drive of S3 files whose asynchronous batch invocation failed: Lambda's on-failure destination (an SQS
queue) holds one record per failed invocation, ``{"requestContext": ..., "requestPayload": <the event>, ...}``;
each file the event names is predicted again with :func:`handler.batch.s3.process_object` (which skips a file
already predicted from the same ETag, so a file is never predicted twice) and the record is then deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from adapters.errors import InvalidInput
from handler.batch.aws import aws_client
from handler.batch.config import BatchConfig
from handler.batch.s3 import process_object, s3_objects
from handler.inference.service import InferenceService


@dataclass
class RedriveReport:
    """What a re-drive did: files predicted, files already done, and records left on the queue."""

    predicted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def failed_objects(record: dict[str, Any]) -> list[tuple[str, str]]:
    """``(bucket, key)`` of the files an on-failure record's event names (S3 notification, EventBridge
    "Object Created" or a Step Functions item batch)."""
    event = record.get("requestPayload", record)
    if not isinstance(event, dict):
        raise InvalidInput("the record carries no event (requestPayload)")
    if "Items" in event:
        bucket = (event.get("BatchInput") or {}).get("bucket")
        return [(item.get("Bucket") or bucket, item["Key"]) for item in event["Items"]]
    try:
        return s3_objects(event)
    except (KeyError, TypeError):
        raise InvalidInput("the record's event names no S3 object") from None


def redrive_queue(
    queue_url: str, config: BatchConfig, service: InferenceService, max_records: int = 1000
) -> RedriveReport:
    """Predict the files of up to ``max_records`` records with ``service``; a record is deleted once all its files
    are done, and stays on the queue (visible again after its visibility timeout) when one failed."""
    sqs = aws_client("sqs")
    report, seen = RedriveReport(), 0
    while seen < max_records:
        batch = min(10, max_records - seen)
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=batch, WaitTimeSeconds=1)
        if not messages.get("Messages"):
            break
        for message in messages["Messages"]:
            seen += 1
            try:
                for bucket, key in failed_objects(orjson.loads(message["Body"])):
                    manifest = process_object(bucket, key, config, service)
                    (report.skipped if manifest.get("skipped") else report.predicted).append(f"s3://{bucket}/{key}")
            except Exception as exc:  # one record's failure must not stop the others
                report.failed.append((message["MessageId"], str(exc)))
                continue
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return report
