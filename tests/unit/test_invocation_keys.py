"""``InvocationKeys`` writes the log lines Powertools' ``Logger.inject_lambda_context()`` writes.

Each case runs the same invocations twice, on two fresh Loggers: once through Powertools' decorator (with the
correlation id set inside the decorated function), once through ``InvocationKeys``; every line must be
the same but for its timestamp and service (each Logger is new) and, for the logged event's own line, where in the
code it was logged and its correlation id (its own invocation's, where the decorator logs the previous one's).
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import logger as powertools_logger

from handler.cli.lambda_context import LocalLambdaContext
from handler.config.lambda_settings import LambdaSettings
from handler.observability.invocation_keys import InvocationKeys

EVENTS = [
    {"requestContext": {"requestId": "apigw-1"}, "body": "one"},
    {"requestContext": {"requestId": "apigw-2"}, "body": "two"},
    {"requestContext": {}, "body": "three"},
]
CONTEXTS = [
    LocalLambdaContext(aws_request_id="lambda-1"),
    LocalLambdaContext(aws_request_id="lambda-2", memory_limit_in_mb=512),
    LocalLambdaContext(aws_request_id="lambda-3", function_name="renamed"),
]

Handler = Callable[[dict[str, Any], Any], None]


def _correlation_id(event: dict[str, Any]) -> str | None:
    return event["requestContext"].get("requestId")


def _logger(**options: Any) -> tuple[Logger, io.StringIO]:
    stream = io.StringIO()
    return Logger(service=f"keys-{uuid.uuid4().hex}", logger_handler=logging.StreamHandler(stream), **options), stream


def _inside(logger: Logger) -> None:
    logger.info("inside")  # one place for both ways, so that the lines' locations agree
    logger.debug("sampled")


def _through_the_decorator(logger: Logger) -> Handler:
    @logger.inject_lambda_context()
    def handler(event: dict[str, Any], context: Any) -> None:
        logger.set_correlation_id(_correlation_id(event))
        _inside(logger)

    return handler


def _through_invocation_keys(logger: Logger) -> Handler:
    keys = InvocationKeys(logger, LambdaSettings.from_env().log_event)

    def handler(event: dict[str, Any], context: Any) -> None:
        keys(event, context, _correlation_id(event))
        _inside(logger)

    return handler


def _lines(
    make: Callable[[Logger], Handler], monkeypatch: pytest.MonkeyPatch, contexts: list[Any], **options: Any
) -> list[dict[str, Any]]:
    monkeypatch.setattr(powertools_logger, "is_cold_start", True)  # a fresh execution environment
    draws = iter([0.9, 0.1, 0.9])  # the sampling's draws: when the Logger is made, then on warm invocations
    monkeypatch.setattr(powertools_logger.random, "random", lambda: next(draws))
    logger, stream = _logger(**options)
    handler = make(logger)
    for event, context in zip(EVENTS, contexts, strict=True):
        handler(event, context)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    for line in lines:
        line.pop("timestamp")
        line.pop("service")  # each Logger is new (a Logger of a service seen before would reuse its handler)
        if line["message"] != "inside":
            line.pop("location")  # the event's own lines are logged from the decorator, or from InvocationKeys
    return lines


def _same_lines(
    monkeypatch: pytest.MonkeyPatch, contexts: list[Any] = CONTEXTS, **options: Any
) -> list[dict[str, Any]]:
    expected = _lines(_through_the_decorator, monkeypatch, contexts, **options)
    found = _lines(_through_invocation_keys, monkeypatch, contexts, **options)
    # One difference, on purpose: the event's own line carries its own correlation id. Through the decorator it
    # carried the previous invocation's (set only afterwards, inside the handler).
    events = iter(EVENTS)
    for line, before in zip(found, expected, strict=True):
        if isinstance(line["message"], dict):
            assert line.pop("correlation_id", None) == _correlation_id(next(events))
            before.pop("correlation_id", None)
    assert found == expected
    return expected


def test_keys_of_cold_and_warm_invocations(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _same_lines(monkeypatch)
    assert [line["cold_start"] for line in lines] == [True, False, False]
    assert [line["function_request_id"] for line in lines] == ["lambda-1", "lambda-2", "lambda-3"]
    assert [line.get("correlation_id") for line in lines] == ["apigw-1", "apigw-2", None]
    assert lines[1]["function_memory_size"] == 512 and lines[2]["function_name"] == "renamed"
    assert list(lines[0]).index("cold_start") < list(lines[0]).index("correlation_id")  # the same key order


def test_the_event_is_logged_when_powertools_is_told_to(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")
    lines = _same_lines(monkeypatch)
    assert [line["message"] for line in lines if line["message"] != "inside"] == EVENTS


def test_sampling_is_decided_anew_on_warm_invocations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawn 0.9 when the Logger is made (not sampled: INFO), then 0.1 (sampled: DEBUG) and 0.9 again."""
    lines = _same_lines(monkeypatch, level="INFO", sampling_rate=0.5)
    sampled = [line["function_request_id"] for line in lines if line["message"] == "sampled"]
    assert sampled == ["lambda-2"]


def test_provisioned_concurrency_is_never_a_cold_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "provisioned-concurrency")
    assert [line["cold_start"] for line in _same_lines(monkeypatch)] == [False, False, False]


def test_a_durable_context_is_unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    class Durable:
        def __init__(self, context: Any) -> None:
            self.state, self.lambda_context = {}, context

    lines = _same_lines(monkeypatch, [Durable(context) for context in CONTEXTS])
    assert [line["function_request_id"] for line in lines] == ["lambda-1", "lambda-2", "lambda-3"]


def test_one_cold_start_between_this_and_the_batch_decorator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function serving HTTP (these keys) and batch events (Powertools' decorator) claims one cold start."""
    for first in (_through_invocation_keys, _through_the_decorator):
        second = _through_the_decorator if first is _through_invocation_keys else _through_invocation_keys
        monkeypatch.setattr(powertools_logger, "is_cold_start", True)
        logger, stream = _logger()
        first(logger)(EVENTS[0], CONTEXTS[0])
        second(logger)(EVENTS[1], CONTEXTS[1])
        second(logger)(EVENTS[2], CONTEXTS[2])
        assert [json.loads(line)["cold_start"] for line in stream.getvalue().splitlines()] == [True, False, False]
