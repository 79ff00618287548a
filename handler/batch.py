"""AWS Lambda entry point for event-driven batch prediction: SQS messages, S3 ObjectCreated files and
Step Functions Distributed Map item batches.

- SQS: each message body is a V2 inference request plus ``model_name`` (and optional ``model_version``).
  Results go to ``OIP_RESULTS_S3_URI`` as ``<prefix>/<model>/<message id>.json`` and/or to
  ``OIP_RESULTS_QUEUE_URL``. Failures are reported per message with Powertools' BatchProcessor
  (``ReportBatchItemFailures``): a bad message fails alone, is retried, then reaches the DLQ; its error is
  written to ``<prefix>/errors/<message id>.json`` and logged.
- S3: a ``.jsonl`` or ``.npy`` object is predicted in chunks and written to ``OIP_BATCH_OUTPUT_PREFIX`` as
  ``<key>.predictions.jsonl`` with ``<key>.manifest.json`` (written last).
- Step Functions Distributed Map: ``{"Items": [{"Key": ...}, ...], "BatchInput": {"bucket": ...}}``; every item
  is processed like an S3 object; the invocation fails if any item failed, so the Map's failure tolerance applies.

Idempotency: results are keyed by message id (and a request without ``id`` gets the message id), and a file
whose manifest records the same input ETag is not predicted again, so redeliveries and re-runs write the same
objects, never duplicates.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote_plus

import orjson
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from adapters.errors import InvalidInput, V2Error
from adapters.s3 import parse_s3_uri
from handler import container
from handler.batch_io import BatchJob, BatchSummary, encode_line, predict_jsonl, predict_npy
from handler.codec import decode_infer_document, load_json_object
from handler.loop import run

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "oip-serverless"))
# Every failure is reported per message (even when all fail), so each is retried and dead-lettered on its own.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class BatchFailed(Exception):
    """Some items of a Step Functions item batch failed; the Map state counts the batch as failed."""


@dataclass(frozen=True)
class BatchConfig:
    """Destinations and defaults, from the environment."""

    results_s3_uri: str = ""
    results_queue_url: str = ""
    output_prefix: str = "output/"
    input_prefix: str = "input/"
    chunk_size: int = 256
    default_model: str | None = None

    @classmethod
    def from_env(cls) -> BatchConfig:
        """``OIP_RESULTS_S3_URI``, ``OIP_RESULTS_QUEUE_URL``, ``OIP_BATCH_OUTPUT_PREFIX``,
        ``OIP_BATCH_INPUT_PREFIX``, ``OIP_BATCH_CHUNK_SIZE``, ``OIP_BATCH_MODEL``."""
        env = os.environ
        return cls(
            env.get("OIP_RESULTS_S3_URI", ""),
            env.get("OIP_RESULTS_QUEUE_URL", ""),
            env.get("OIP_BATCH_OUTPUT_PREFIX", "output/"),
            env.get("OIP_BATCH_INPUT_PREFIX", "input/"),
            int(env.get("OIP_BATCH_CHUNK_SIZE", "256")),
            env.get("OIP_BATCH_MODEL") or None,
        )


@cache
def _client(service: str) -> Any:
    import boto3

    return boto3.client(service)


def _exists(bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        _client("s3").head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


# SQS


def _sqs_result_key(config: BatchConfig, model: str, message_id: str, errors: bool = False) -> tuple[str, str]:
    bucket, prefix = parse_s3_uri(config.results_s3_uri)
    folder = "errors" if errors else model
    return bucket, f"{prefix}{folder}/{message_id}.json"


def _send_to_queue(config: BatchConfig, message_id: str, request_id: str, body: bytes) -> None:
    attributes = {
        "message_id": {"DataType": "String", "StringValue": message_id},
        "request_id": {"DataType": "String", "StringValue": request_id},
    }
    parameters: dict[str, Any] = {
        "QueueUrl": config.results_queue_url,
        "MessageBody": body.decode(),
        "MessageAttributes": attributes,
    }
    if config.results_queue_url.endswith(".fifo"):  # FIFO queues drop a redelivered result by its dedup id
        parameters.update(MessageGroupId="oip-results", MessageDeduplicationId=message_id)
    _client("sqs").send_message(**parameters)


def handle_sqs_message(record: SQSRecord, config: BatchConfig) -> str:
    """Predict one message and write its result; raises (so the message is retried, then dead-lettered) on failure."""
    message_id = record.message_id
    try:
        document = load_json_object(record.body.encode(), f"message {message_id}")
        model = document.pop("model_name", None) or config.default_model
        version = document.pop("model_version", None)
        if not model:
            raise InvalidInput("the message names no 'model_name'")
        if config.results_s3_uri and _exists(*_sqs_result_key(config, model, message_id)):
            logger.info("result already written; redelivery skipped", extra={"message_id": message_id})
            return "duplicate"
        call = decode_infer_document(document)
        if call.id is None:
            call = type(call)(call.inputs, call.outputs, message_id, call.parameters)
        result = run(container.dataplane().infer(model, version, call))
        body = encode_line(result, call)
    except V2Error as exc:
        _record_failure(config, message_id, exc.message)
        raise
    request_id = call.id or message_id
    if config.results_s3_uri:
        bucket, key = _sqs_result_key(config, model, message_id)
        metadata = {"message-id": message_id, "request-id": request_id}
        _client("s3").put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json", Metadata=metadata)
    if config.results_queue_url:
        _send_to_queue(config, message_id, request_id, body)
    return "ok"


def _record_failure(config: BatchConfig, message_id: str, message: str) -> None:
    logger.error("message failed", extra={"message_id": message_id, "error": message})
    if config.results_s3_uri:
        bucket, key = _sqs_result_key(config, "", message_id, errors=True)
        document = orjson.dumps({"message_id": message_id, "error": message})
        _client("s3").put_object(Bucket=bucket, Key=key, Body=document, ContentType="application/json")


# S3 files


def _model_for(key: str, metadata: dict[str, str], config: BatchConfig) -> tuple[str | None, str | None]:
    """Object metadata ``model``/``model-version``, else the folder after the input prefix, else the default."""
    if metadata.get("model"):
        return metadata["model"], metadata.get("model-version")
    relative = key[len(config.input_prefix) :] if key.startswith(config.input_prefix) else key
    parts = PurePosixPath(relative).parts
    if len(parts) > 1:
        return parts[0], None
    return config.default_model, None


def output_keys(key: str, config: BatchConfig) -> tuple[str, str]:
    """``(predictions key, manifest key)`` for an input key."""
    relative = key[len(config.input_prefix) :] if key.startswith(config.input_prefix) else key
    base = f"{config.output_prefix}{relative}"
    return f"{base}.predictions.jsonl", f"{base}.manifest.json"


def process_object(bucket: str, key: str, config: BatchConfig) -> dict[str, Any]:
    """Predict one S3 object into predictions + manifest; returns the manifest. Idempotent per input ETag."""
    s3 = _client("s3")
    head = s3.head_object(Bucket=bucket, Key=key)
    etag = head["ETag"]
    predictions_key, manifest_key = output_keys(key, config)
    if _exists(bucket, manifest_key):
        previous = orjson.loads(s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
        if previous.get("input_etag") == etag:
            logger.info("already predicted; skipped", extra={"key": key})
            return previous | {"skipped": True}
    model, version = _model_for(key, head.get("Metadata", {}), config)
    job = BatchJob(model, version, config.chunk_size, id_prefix=f"{key}:")
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    with tempfile.TemporaryFile() as output:
        summary = _predict_stream(key, job, body, output.write)
        output.seek(0)
        s3.upload_fileobj(output, bucket, predictions_key, ExtraArgs={"ContentType": "application/x-ndjson"})
    manifest = summary.manifest(
        input=f"s3://{bucket}/{key}",
        input_etag=etag,
        output=f"s3://{bucket}/{predictions_key}",
        chunk_size=config.chunk_size,
    )
    s3.put_object(Bucket=bucket, Key=manifest_key, Body=orjson.dumps(manifest), ContentType="application/json")
    logger.info("file predicted", extra={k: manifest[k] for k in ("input", "rows_in", "rows_out", "errors", "seconds")})
    return manifest


def _predict_stream(key: str, job: BatchJob, body: Any, write: Any) -> BatchSummary:
    dataplane = container.dataplane()
    if key.endswith(".npy"):
        return run(predict_npy(dataplane, job, body, write))
    if key.endswith((".jsonl", ".ndjson", ".json")):
        return run(predict_jsonl(dataplane, job, body.iter_lines(chunk_size=1 << 20), write))
    raise InvalidInput(f"'{key}': batch input must be .jsonl (V2 requests, one per line) or .npy")


def s3_objects(event: dict[str, Any]) -> list[tuple[str, str]]:
    """``(bucket, key)`` of an S3 notification's records, or of an EventBridge "Object Created" event."""
    if "detail" in event:
        detail = event["detail"]
        return [(detail["bucket"]["name"], detail["object"]["key"])]
    return [(r["s3"]["bucket"]["name"], unquote_plus(r["s3"]["object"]["key"])) for r in event["Records"]]


def handle_s3_event(event: dict[str, Any], config: BatchConfig) -> dict[str, Any]:
    """Every object an ObjectCreated event names, except our own outputs (which would otherwise loop back
    when a notification covers the whole bucket)."""
    manifests = []
    for bucket, key in s3_objects(event):
        if key.startswith(config.output_prefix):
            logger.warning("an output object is not predicted again", extra={"key": key})
            continue
        manifests.append(process_object(bucket, key, config))
    return {"files": len(manifests), "manifests": manifests}


def handle_item_batch(event: dict[str, Any], config: BatchConfig) -> dict[str, Any]:
    """A Step Functions Distributed Map item batch of S3 objects (ItemReader ``s3:listObjectsV2``)."""
    batch_input = event.get("BatchInput") or {}
    done, failed = [], []
    for item in event["Items"]:
        bucket = item.get("Bucket") or batch_input.get("bucket")
        key = item["Key"]
        try:
            manifest = process_object(bucket, key, config)
            done.append({"key": key, "rows": manifest["rows_in"], "errors": manifest["errors"]})
        except Exception as exc:  # one object's failure must not hide the others' results
            logger.exception("item failed", extra={"key": key})
            failed.append({"key": key, "error": str(exc)})
    if failed:
        raise BatchFailed(orjson.dumps({"processed": done, "failed": failed}).decode())
    return {"processed": done, "failed": failed}


def event_kind(event: dict[str, Any]) -> str:
    """``sqs``, ``s3`` or ``items`` (Step Functions); InvalidInput for anything else."""
    records = event.get("Records") or []
    source = records[0].get("eventSource") if records else None
    if source == "aws:sqs":
        return "sqs"
    if source == "aws:s3" or (event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created"):
        return "s3"
    if "Items" in event:
        return "items"
    raise InvalidInput(
        "unrecognised event: expected SQS, S3 ObjectCreated (notification or EventBridge) "
        "or a Step Functions item batch"
    )


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Route by event shape (never to Mangum)."""
    config = BatchConfig.from_env()
    kind = event_kind(event)
    if kind == "sqs":
        return process_partial_response(
            event=event,
            record_handler=lambda record: handle_sqs_message(record, config),
            processor=processor,
            context=context,
        )
    if kind == "s3":
        return handle_s3_event(event, config)
    return handle_item_batch(event, config)
