"""SQS messages: each body is a V2 inference request plus ``model_name`` (and optional ``model_version``).

Results go to ``OIP_RESULTS_S3_URI`` as ``<prefix>/<model>/<message id>.json`` and/or to
``OIP_RESULTS_QUEUE_URL``. A failure raises, so Powertools' BatchProcessor reports the message
(``ReportBatchItemFailures``): it is retried, then dead-lettered; its error is written to
``<prefix>/errors/<message id>.json`` and logged. Results are keyed by message id (a request without ``id``
gets the message id), so redeliveries write the same objects, never duplicates. With neither destination set, the
event is refused before any message is predicted (``require_destination``): a result is never thrown away.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import orjson
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from adapters.errors import V2Error
from adapters.repository.s3 import parse_s3_uri
from adapters.types import InferCall, InferResult
from handler.batch.aws import aws_client, object_exists
from handler.batch.config import BatchConfig
from handler.batch.job import decode_document, encode_line, parse_line
from handler.config.lambda_settings import LambdaSettings
from handler.config.variables import SettingsError
from handler.inference.byte_budget import Held
from handler.inference.exchange import Encoded, Exchange
from handler.inference.service import InferenceService
from handler.protocol.resolved_model import ResolvedModel
from handler.runtime.loop import run

logger = Logger(service=LambdaSettings.from_env().service_name)

#: What a message without a model says when the function names no default either (OIP_BATCH_MODEL).
NO_MODEL_NAMED: Final = "the message names no 'model_name'"


def require_destination(config: BatchConfig) -> None:
    """SettingsError naming ``OIP_RESULTS_S3_URI`` when SQS results would have nowhere to go."""
    if not (config.results_s3_uri or config.results_queue_url):
        raise SettingsError(
            "OIP_RESULTS_S3_URI",
            config.results_s3_uri,
            "s3://bucket/prefix for the SQS results (or OIP_RESULTS_QUEUE_URL); with neither they would be lost",
        )


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
    aws_client("sqs").send_message(**parameters)


def handle_sqs_message(record: SQSRecord, config: BatchConfig, service: InferenceService) -> str:
    """Predict one message and write its result; raises (so the message is retried, then dead-lettered) on failure."""
    message_id = record.message_id
    try:
        raw = record.body.encode()
        model, version, document = parse_line(
            service, raw, f"message {message_id}", config.default_model, None, NO_MODEL_NAMED
        )
        if config.results_s3_uri and object_exists(*_sqs_result_key(config, model, message_id)):
            logger.info("result already written; redelivery skipped", extra={"message_id": message_id})
            return "duplicate"
        message = MessageExchange(document, message_id, len(raw))
        body = run(service.answer(model, version, message))
    except V2Error as exc:
        _record_failure(config, message_id, exc.message)
        raise
    request_id = message.request_id
    if config.results_s3_uri:
        bucket, key = _sqs_result_key(config, model, message_id)
        metadata = {"message-id": message_id, "request-id": request_id}
        aws_client("s3").put_object(
            Bucket=bucket, Key=key, Body=body, ContentType="application/json", Metadata=metadata
        )
    if config.results_queue_url:
        _send_to_queue(config, message_id, request_id, body)
    return "ok"


class MessageExchange(Exchange[bytes]):
    """One message's request (parsed, ``parse_line``): decoded as a REST request's JSON body is, its id the message
    id when it has none, and answered with its result line."""

    __slots__ = ("document", "message_id", "request_id", "size")

    def __init__(self, document: dict[str, Any], message_id: str, size: int) -> None:
        self.document, self.message_id, self.size = document, message_id, size
        self.request_id = message_id

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        return self.size

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        call = await decode_document(service, model, self.document)
        if call.id is None:
            call = replace(call, id=self.message_id)
        self.request_id = call.id or self.message_id
        return call

    def encode(self, result: InferResult, call: InferCall) -> Encoded[bytes]:
        line = encode_line(result, call)
        return Encoded(line, len(line))


def _record_failure(config: BatchConfig, message_id: str, message: str) -> None:
    logger.error("message failed", extra={"message_id": message_id, "error": message})
    if config.results_s3_uri:
        bucket, key = _sqs_result_key(config, "", message_id, errors=True)
        document = orjson.dumps({"message_id": message_id, "error": message})
        aws_client("s3").put_object(Bucket=bucket, Key=key, Body=document, ContentType="application/json")
