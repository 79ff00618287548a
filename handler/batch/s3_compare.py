"""An S3 object of V2 requests compared on two versions by the batch Lambda function, as ``oip batch
--compare-version`` compares a file (``compare.py``): every line answered by its version and by the candidate, the
report written to ``OIP_BATCH_OUTPUT_PREFIX`` as ``<key>.comparison.json``, where the predictions would go.

The candidate is the object's metadata ``compare-version`` (``x-amz-meta-compare-version``) or a Step Functions
item batch's ``compare_version`` (its ``BatchInput``'s, or the execution input's, which the state machine passes
on). The object is read as JSON Lines whatever its name (a .npy object is refused): sampled request logs, as
Firehose delivers them, replay as they are. A report that records the same input ETag and candidate is not
computed again.
"""

from __future__ import annotations

from typing import Any

import orjson
from aws_lambda_powertools import Logger

from adapters.errors import InvalidInput
from handler.batch.aws import aws_client, object_exists
from handler.batch.compare import compare_jsonl
from handler.batch.config import BatchConfig
from handler.batch.job import BatchJob
from handler.batch.lines import bounded_lines, read_chunks
from handler.config.lambda_settings import LambdaSettings
from handler.inference.service import InferenceService
from handler.runtime.loop import run

logger = Logger(service=LambdaSettings.from_env().service_name)

#: The object metadata naming the candidate version.
COMPARE_METADATA = "compare-version"


def candidate_of(metadata: dict[str, str], given: object = None) -> str | None:
    """The candidate version: ``given`` (a Step Functions item batch's, a string or a number), else the object's
    metadata; None: no comparison, the object is predicted."""
    if given is not None and given != "":
        return str(given)
    return metadata.get(COMPARE_METADATA) or None


def item_batch_candidate(batch_input: dict[str, Any]) -> object:
    """A Step Functions item batch's candidate: its ``BatchInput.compare_version``, else the execution input's
    (the state machine passes that input as ``BatchInput.execution``); None without one."""
    execution = batch_input.get("execution")
    given = batch_input.get("compare_version")
    if given is None and isinstance(execution, dict):
        given = execution.get("compare_version")
    return given


def report_key(key: str, config: BatchConfig) -> str:
    """Where the comparison of ``key`` is written."""
    relative = key[len(config.input_prefix) :] if key.startswith(config.input_prefix) else key
    return f"{config.output_prefix}{relative}.comparison.json"


def compare_object(
    bucket: str,
    key: str,
    head: dict[str, Any],
    model: str | None,
    version: str | None,
    candidate: str,
    config: BatchConfig,
    service: InferenceService,
) -> dict[str, Any]:
    """Compare ``candidate`` with the lines' versions on one object; the report's summary (``rows_in`` and
    ``errors`` as a prediction manifest has them, ``agreement``, ``report``: where the whole report is)."""
    if key.endswith(".npy"):
        raise InvalidInput(f"'{key}': a comparison reads JSON Lines of V2 requests, not a .npy array")
    s3 = aws_client("s3")
    target = report_key(key, config)
    etag = head["ETag"]
    if object_exists(bucket, target):
        previous = orjson.loads(s3.get_object(Bucket=bucket, Key=target)["Body"].read())
        if previous.get("input_etag") == etag and previous.get("candidate") == candidate:
            logger.info("already compared; skipped", extra={"key": key})
            return summary(previous) | {"skipped": True}
    max_bytes = service.settings.max_body_bytes
    job = BatchJob(model, version, config.chunk_size, id_prefix=f"{key}:", max_bytes=max_bytes)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    comparison = run(compare_jsonl(service, job, candidate, bounded_lines(read_chunks(body.read), max_bytes)))
    document = comparison.report() | {
        "input": f"s3://{bucket}/{key}",
        "input_etag": etag,
        "candidate": candidate,
        "report": f"s3://{bucket}/{target}",
    }
    s3.put_object(Bucket=bucket, Key=target, Body=orjson.dumps(document), ContentType="application/json")
    found = summary(document)
    logger.info("file compared", extra=found)
    return found


def summary(document: dict[str, Any]) -> dict[str, Any]:
    """What an invocation answers for one compared object."""
    failed = document["failed"]
    return {
        "input": document["input"],
        "report": document["report"],
        "version": document["version"],
        "compare_version": document["compare_version"],
        "rows_in": document["rows"],
        "compared": document["compared"],
        "agreement": document["agreement"],
        "errors": failed["default"] + failed["candidate"],
    }
