"""The batch Lambda function: routes SQS, S3 ObjectCreated (notification or EventBridge) and Step Functions
Distributed Map item batches (``{"Items": [{"Key": ...}], "BatchInput": {"bucket": ...}}``) to their handlers.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

from adapters.errors import InvalidInput
from handler.batch.config import BatchConfig
from handler.batch.routing import batch_event_kind
from handler.batch.s3 import handle_item_batch, handle_s3_event
from handler.batch.service import batch_service
from handler.batch.sqs import handle_sqs_message, require_destination
from handler.config.lambda_settings import LambdaSettings
from handler.inference.service import InferenceService

logger = Logger(service=LambdaSettings.from_env().service_name)


# Every failure is reported per message (even when all fail), so each is retried and dead-lettered on its own.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def event_kind(event: dict[str, Any]) -> str:
    """``sqs``, ``s3`` or ``items`` (Step Functions); InvalidInput for anything else."""
    kind = batch_event_kind(event)
    if kind is None:
        raise InvalidInput(
            "unrecognised event: expected SQS, S3 ObjectCreated (notification or EventBridge) "
            "or a Step Functions item batch"
        )
    return kind


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any, service: InferenceService | None = None) -> dict[str, Any]:
    """Route by event shape (never to Mangum). SQS results need a destination (SettingsError before any message
    is predicted); S3 and Step Functions results go beside their input, in its bucket. Inference goes through
    ``service``, the process's: the HTTP function's when it routes the event here, else the batch function's own
    (``batch_service``)."""
    service = service if service is not None else batch_service()
    config = BatchConfig.from_env()
    kind = event_kind(event)
    if kind == "sqs":
        require_destination(config)
        return process_partial_response(
            event=event,
            record_handler=lambda record: handle_sqs_message(record, config, service),
            processor=processor,
            context=context,
        )
    if kind == "s3":
        return handle_s3_event(event, config, service)
    return handle_item_batch(event, config, service)
