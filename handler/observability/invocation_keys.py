"""Powertools Logger's per-invocation keys for the HTTP Lambda handler, at a fraction of the decorator's cost.

``InvocationKeys`` does for each invocation what ``Logger.inject_lambda_context()`` does for ours (no
``clear_state``, no JMESPath correlation path, no log buffer): the ``cold_start``, ``function_name``,
``function_memory_size``, ``function_arn`` and ``function_request_id`` keys, the event logged when
``POWERTOOLS_LOGGER_LOG_EVENT`` is true, the sampling decision made anew on every warm invocation. It adds
the correlation id in the same update. The log lines are the decorator's (``tests/unit/test_invocation_keys.py``
compares them over cold and warm invocations, event logging and sampling).

Why not the decorator: on a small request it was 37k of 621k instructions an invocation (callgrind), about 5 %
of the time, most of it finding the formatter again on every call and building a context model to read four
attributes from. The cold start flag is Powertools' own, so a batch invocation of the same function
(``handler.batch``, whose handler keeps the decorator) and this one never both claim the cold start.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import logger as powertools_logger
from aws_lambda_powertools.shared import constants
from aws_lambda_powertools.shared.functions import extract_event_from_common_models, resolve_truthy_env_var_choice


def _unwrapped(context: Any) -> Any:
    """The Lambda context itself, also when a durable execution wraps it (as Powertools unwraps it)."""
    if hasattr(context, "aws_request_id"):
        return context
    return context.lambda_context if powertools_logger.is_durable_context(context) else context


class InvocationKeys:
    """Set a Powertools Logger's keys for one invocation: call it first thing in the handler."""

    def __init__(self, logger: Logger) -> None:
        self._logger = logger
        # The decorator reads its log_event setting once, when it decorates; so does this, when it is made.
        self._log_event = resolve_truthy_env_var_choice(env=os.getenv(constants.LOGGER_LOG_EVENT_ENV, "false"))
        self._maybe_cold = True

    def __call__(self, event: Any, context: Any, correlation_id: str | None) -> None:
        logger = self._logger
        cold_start = False
        if self._maybe_cold:  # Powertools' own flag (provisioned concurrency included), asked until it was asked
            self._maybe_cold = False
            cold_start = powertools_logger._is_cold_start()
        context = _unwrapped(context)
        logger.registered_formatter.append_keys(
            cold_start=cold_start,
            function_name=context.function_name,
            function_memory_size=context.memory_limit_in_mb,
            function_arn=context.invoked_function_arn,
            function_request_id=context.aws_request_id,
            correlation_id=correlation_id,
        )
        if self._log_event:
            logger.info(extract_event_from_common_models(event))
        if logger.sampling_rate and not cold_start:
            logger.refresh_sample_rate_calculation()
