"""Powertools Logger's per-invocation keys for the HTTP Lambda handler, at a fraction of the decorator's cost.

``InvocationKeys`` does for each invocation what ``Logger.inject_lambda_context()`` does for ours (no
``clear_state``, no JMESPath correlation path, no log buffer): the ``cold_start``, ``function_name``,
``function_memory_size``, ``function_arn`` and ``function_request_id`` keys, the event logged when
``POWERTOOLS_LOGGER_LOG_EVENT`` is true, the sampling decision made anew on every warm invocation. It adds
the correlation id in the same update. The log lines are the decorator's (``tests/unit/test_invocation_keys.py``
compares them over cold and warm invocations, event logging and sampling).

Why not the decorator: on a small request it is a visible share of an invocation's work, most of it finding the
formatter again on every call and building a context model to read four attributes from. The first invocation
of an ``InvocationKeys`` goes through the decorator itself, which claims Powertools' cold start (``False`` under
provisioned concurrency, or when a batch invocation of the same function, ``handler.batch``, whose handler keeps
the decorator, already claimed it), so the two never both claim it; every later one is warm.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import logger as powertools_logger
from aws_lambda_powertools.shared.functions import extract_event_from_common_models


def _unwrapped(context: Any) -> Any:
    """The Lambda context itself, also when a durable execution wraps it (as Powertools unwraps it)."""
    if hasattr(context, "aws_request_id"):
        return context
    return context.lambda_context if powertools_logger.is_durable_context(context) else context


def _keys_only(event: Any, context: Any) -> None:
    """The handler Powertools' decorator wraps on a first invocation: the keys are all it is for."""


class InvocationKeys:
    """Set a Powertools Logger's keys for one invocation: call it first thing in the handler."""

    def __init__(self, logger: Logger, log_event: bool = False) -> None:
        self._logger = logger
        #: Whether to log each event (``POWERTOOLS_LOGGER_LOG_EVENT``, read by handler/config/settings.py).
        self._log_event = log_event
        # The first invocation: Powertools' decorator sets the context keys and cold_start, and samples anew when
        # warm; the event is logged here, after the correlation id is set.
        self._first: Any = logger.inject_lambda_context(_keys_only, log_event=False)

    def __call__(self, event: Any, context: Any, correlation_id: str | None) -> None:
        logger = self._logger
        if self._first is not None:
            first, self._first = self._first, None
            first(event, context)
            logger.append_keys(correlation_id=correlation_id)
        else:
            context = _unwrapped(context)
            logger.registered_formatter.append_keys(
                cold_start=False,
                function_name=context.function_name,
                function_memory_size=context.memory_limit_in_mb,
                function_arn=context.invoked_function_arn,
                function_request_id=context.aws_request_id,
                correlation_id=correlation_id,
            )
            if logger.sampling_rate:
                logger.refresh_sample_rate_calculation()
        if self._log_event:
            logger.info(extract_event_from_common_models(event))
