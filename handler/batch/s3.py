"""S3 files and Step Functions item batches: a ``.jsonl`` or ``.npy`` object is predicted in chunks and written
to ``OIP_BATCH_OUTPUT_PREFIX`` as ``<key>.predictions.jsonl`` with ``<key>.manifest.json`` (written last).
A file whose manifest records the same input ETag is not predicted again.
"""

from __future__ import annotations

import tempfile
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote_plus

import orjson
from aws_lambda_powertools import Logger

from adapters.errors import InvalidInput
from handler.batch.aws import aws_client, object_exists
from handler.batch.config import BatchConfig
from handler.batch.job import BatchJob, BatchSummary
from handler.batch.jsonl import predict_jsonl
from handler.batch.lines import bounded_lines, read_chunks
from handler.batch.npy import predict_npy
from handler.batch.s3_compare import candidate_of, compare_object, item_batch_candidate
from handler.config.lambda_settings import LambdaSettings
from handler.inference.service import InferenceService
from handler.runtime.loop import run

logger = Logger(service=LambdaSettings.from_env().service_name)


class BatchFailed(Exception):
    """Some items of a Step Functions item batch failed; the Map state counts the batch as failed."""


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


def process_object(
    bucket: str, key: str, config: BatchConfig, service: InferenceService, compare_version: str | None = None
) -> dict[str, Any]:
    """Predict one S3 object into predictions + manifest; returns the manifest. Idempotent per input ETag. With a
    candidate version (``compare_version``, or the object's ``compare-version`` metadata) the object is compared
    instead (``s3_compare.py``)."""
    s3 = aws_client("s3")
    head = s3.head_object(Bucket=bucket, Key=key)
    candidate = candidate_of(head.get("Metadata", {}), compare_version)
    if candidate is not None:
        model, version = _model_for(key, head.get("Metadata", {}), config)
        return compare_object(bucket, key, head, model, version, candidate, config, service)
    etag = head["ETag"]
    predictions_key, manifest_key = output_keys(key, config)
    if object_exists(bucket, manifest_key):
        previous = orjson.loads(s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
        if previous.get("input_etag") == etag:
            logger.info("already predicted; skipped", extra={"key": key})
            return previous | {"skipped": True}
    model, version = _model_for(key, head.get("Metadata", {}), config)
    max_bytes = service.settings.max_body_bytes
    job = BatchJob(model, version, config.chunk_size, id_prefix=f"{key}:", max_bytes=max_bytes)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    with tempfile.TemporaryFile() as output:
        summary = _predict_stream(service, key, job, body, output.write)
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


def _predict_stream(service: InferenceService, key: str, job: BatchJob, body: Any, write: Any) -> BatchSummary:
    if key.endswith(".npy"):
        return run(predict_npy(service, job, body, write))
    if key.endswith((".jsonl", ".ndjson", ".json")):
        return run(predict_jsonl(service, job, bounded_lines(read_chunks(body.read), job.max_bytes), write))
    raise InvalidInput(f"'{key}': batch input must be .jsonl (V2 requests, one per line) or .npy")


def s3_objects(event: dict[str, Any]) -> list[tuple[str, str]]:
    """``(bucket, key)`` of an S3 notification's records, or of an EventBridge "Object Created" event."""
    if "detail" in event:
        detail = event["detail"]
        return [(detail["bucket"]["name"], detail["object"]["key"])]
    return [(r["s3"]["bucket"]["name"], unquote_plus(r["s3"]["object"]["key"])) for r in event["Records"]]


def handle_s3_event(event: dict[str, Any], config: BatchConfig, service: InferenceService) -> dict[str, Any]:
    """Every object an ObjectCreated event names, except our own outputs (which would otherwise loop back
    when a notification covers the whole bucket)."""
    manifests = []
    for bucket, key in s3_objects(event):
        if key.startswith(config.output_prefix):
            logger.warning("an output object is not predicted again", extra={"key": key})
            continue
        manifests.append(process_object(bucket, key, config, service))
    return {"files": len(manifests), "manifests": manifests}


def handle_item_batch(event: dict[str, Any], config: BatchConfig, service: InferenceService) -> dict[str, Any]:
    """A Step Functions Distributed Map item batch of S3 objects (ItemReader ``s3:listObjectsV2``)."""
    batch_input = event.get("BatchInput") or {}
    done, failed = [], []
    for item in event["Items"]:
        bucket = item.get("Bucket") or batch_input.get("bucket")
        key = item["Key"]
        try:
            manifest = process_object(bucket, key, config, service, item_batch_candidate(batch_input))
            done.append({"key": key, "rows": manifest["rows_in"], "errors": manifest["errors"]})
            if "agreement" in manifest:  # compared: the report's agreement and where it is
                done[-1] |= {"agreement": manifest["agreement"], "report": manifest["report"]}
        except Exception as exc:  # one object's failure must not hide the others' results
            logger.exception("item failed", extra={"key": key})
            failed.append({"key": key, "error": str(exc)})
    if failed:
        raise BatchFailed(orjson.dumps({"processed": done, "failed": failed}).decode())
    return {"processed": done, "failed": failed}
