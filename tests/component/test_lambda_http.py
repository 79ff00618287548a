"""``handler.http.lambda_handler`` driven by the events in events/ and by fresh ``sam local generate-event`` output."""

# covers: handler/cli/lambda_context.py
# covers: handler/http.py

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton_http

from handler.cli.lambda_context import LocalLambdaContext
from scripts import lambda_events

EVENTS = Path(__file__).resolve().parents[2] / "events"
EVENT_FILES = sorted(p for shape in lambda_events.SAM_EVENTS for p in (EVENTS / shape).glob("*.json"))


def load_event(relative: str) -> dict[str, Any]:
    return json.loads((EVENTS / relative).read_text())


@pytest.fixture(scope="module")
def lambda_handler():  # type: ignore[no-untyped-def]
    from handler.http import lambda_handler

    return lambda_handler


def invoke(handler, event: dict[str, Any]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return handler(event, LocalLambdaContext())


def test_every_route_in_every_shape_is_shipped() -> None:
    names = {(p.parent.name, p.stem) for p in EVENT_FILES}
    assert names == {(shape, route) for shape in lambda_events.SAM_EVENTS for route in lambda_events.routes()}


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_events_succeed(lambda_handler, path: Path) -> None:  # type: ignore[no-untyped-def]
    response = invoke(lambda_handler, json.loads(path.read_text()))
    assert response["statusCode"] == 200, response
    binary = path.stem == "infer-binary"
    assert response["isBase64Encoded"] is binary
    content_type = response["headers"]["content-type"]
    assert content_type == ("application/octet-stream" if binary else "application/json")
    if not binary:
        json.loads(response["body"])


@pytest.mark.parametrize("shape", list(lambda_events.SAM_EVENTS))
def test_json_infer_response_is_text(lambda_handler, shape: str) -> None:  # type: ignore[no-untyped-def]
    response = invoke(lambda_handler, load_event(f"{shape}/infer-json.json"))
    body = json.loads(response["body"])
    assert body["id"] == "1"
    assert {o["name"]: o["data"] for o in body["outputs"]}["label"] == [0, 2]
    assert response["isBase64Encoded"] is False


@pytest.mark.parametrize("shape", list(lambda_events.SAM_EVENTS))
def test_binary_infer_round_trips_as_base64(lambda_handler, shape: str) -> None:  # type: ignore[no-untyped-def]
    response = invoke(lambda_handler, load_event(f"{shape}/infer-binary.json"))
    assert response["isBase64Encoded"] is True
    raw = base64.b64decode(response["body"])
    length = int(response["headers"]["inference-header-content-length"])
    result = triton_http.InferenceServerClient.parse_response_body(raw, header_length=length)
    assert result.as_numpy("label").ravel().tolist() == [0, 2]


def test_whole_response_of_server_live(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    response = invoke(lambda_handler, load_event("http-api/health-live.json"))
    assert response == {
        "statusCode": 200,
        "headers": {"content-length": "13", "content-type": "application/json"},
        "body": '{"live":true}',
        "isBase64Encoded": False,
    }


def test_named_stage_prefix_is_stripped(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    event = load_event("http-api/model-metadata.json")
    event["rawPath"] = "/prod/v2/models/iris"
    event["requestContext"]["stage"] = "prod"
    event["requestContext"]["http"]["path"] = "/prod/v2/models/iris"
    response = invoke(lambda_handler, event)
    assert response["statusCode"] == 200
    assert json.loads(response["body"])["name"] == "iris"


def test_function_url_event(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    """Lambda Function URLs send payload 2.0 events with the $default stage and a lambda-url domain."""
    event = load_event("http-api/infer-json.json")
    event["requestContext"].update(domainName="abc123.lambda-url.us-east-1.on.aws", domainPrefix="abc123")
    event["headers"]["host"] = "abc123.lambda-url.us-east-1.on.aws"
    response = invoke(lambda_handler, event)
    assert response["statusCode"] == 200 and json.loads(response["body"])["id"] == "1"


def test_snapstart_restore_reseeds_the_sampler() -> None:
    import random

    from handler import http
    from handler.observability.request_log import RequestLogSampler

    sampler = RequestLogSampler(50, lambda _: None, random.Random(1))
    before = sampler._rng.getstate()
    original, http.sampler = http.sampler, sampler
    try:
        http._after_restore()
    finally:
        http.sampler = original
    assert sampler._rng.getstate() != before


def test_errors_keep_their_status_and_json_body(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    event = load_event("rest-api/infer-json.json")
    event["body"] = '{"inputs": "nope"}'
    response = invoke(lambda_handler, event)
    assert response["statusCode"] == 400
    assert list(json.loads(response["body"])) == ["error"]
    event = load_event("alb/model-metadata.json")
    event["path"] = "/v2/models/absent"
    response = invoke(lambda_handler, event)
    assert response["statusCode"] == 404


@pytest.mark.parametrize("shape", list(lambda_events.SAM_EVENTS))
def test_fresh_sam_generated_events(lambda_handler, shape: str) -> None:  # type: ignore[no-untyped-def]
    method, path, body, headers = lambda_events.routes()["infer-binary"]
    response = invoke(lambda_handler, lambda_events.generate(shape, method, path, body, headers))
    assert response["statusCode"] == 200
    assert response["isBase64Encoded"] is True


def test_logs_are_structured_with_correlation_ids_and_no_payload(lambda_handler, capsys) -> None:  # type: ignore[no-untyped-def]
    import logging

    from handler import http

    http.logger.setLevel(logging.INFO)
    event = load_event("http-api/infer-json.json")
    event["requestContext"]["requestId"] = "apigw-request-42"
    context = LocalLambdaContext(aws_request_id="lambda-request-7")
    http.logger.info("marker")  # outside an invocation: no correlation
    lambda_handler(event, context)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    metrics = [line for line in lines if "_aws" in line]
    assert metrics, "no EMF metrics line"
    emf = metrics[-1]
    assert emf["model"] == "iris" and emf["model_version"] == "1"
    assert emf["InferenceRequests"] == [1.0] or emf["InferenceRequests"] == 1.0
    names = {m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"InferenceRequests", "InferenceErrors", "InferenceLatency", "RequestBytes", "ResponseBytes"} <= names
    assert all("5.1" not in json.dumps(line) for line in lines)


def test_logger_injects_lambda_and_apigw_request_ids(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    import io

    from handler import http

    captured: dict[str, Any] = {}
    stream = io.StringIO()
    previous = http.logger.registered_handler.setStream(stream)
    event = load_event("http-api/health-live.json")
    event["requestContext"]["requestId"] = "apigw-request-43"

    original = http.mangum

    def spy(event: dict[str, Any], context: Any) -> dict[str, Any]:
        http.logger.info("inside")
        return original(event, context)

    http.mangum = spy
    try:
        lambda_handler(event, LocalLambdaContext(aws_request_id="lambda-request-8"))
    finally:
        http.mangum = original
        http.logger.registered_handler.setStream(previous)
    for line in stream.getvalue().splitlines():
        if '"inside"' in line:
            captured = json.loads(line)
    assert captured["function_request_id"] == "lambda-request-8"
    assert captured["correlation_id"] == "apigw-request-43"


def test_no_invocation_inherits_the_previous_correlation_id(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    """Each invocation's log lines carry its own ids: an event with no request id and no trace header after one
    that had both logs no correlation id at all, and the new Lambda request id."""
    import io

    from handler import http

    stream = io.StringIO()
    previous = http.logger.registered_handler.setStream(stream)
    original = http.mangum

    def spy(event: dict[str, Any], context: Any) -> dict[str, Any]:
        http.logger.info("inside")
        return original(event, context)

    first = load_event("http-api/health-live.json")
    first["requestContext"]["requestId"] = "apigw-request-44"
    second = load_event("http-api/health-live.json")
    second["requestContext"].pop("requestId", None)
    second["headers"] = {k: v for k, v in (second.get("headers") or {}).items() if k.lower() != "x-amzn-trace-id"}
    http.mangum = spy
    try:
        lambda_handler(first, LocalLambdaContext(aws_request_id="lambda-request-9"))
        lambda_handler(second, LocalLambdaContext(aws_request_id="lambda-request-10"))
    finally:
        http.mangum = original
        http.logger.registered_handler.setStream(previous)
    inside = [json.loads(line) for line in stream.getvalue().splitlines() if '"inside"' in line]
    assert [line["function_request_id"] for line in inside] == ["lambda-request-9", "lambda-request-10"]
    assert inside[0]["correlation_id"] == "apigw-request-44"
    assert "correlation_id" not in inside[1]
    assert inside[1]["cold_start"] is False


def test_invoke_cli_prints_the_lambda_response(capsys) -> None:  # type: ignore[no-untyped-def]
    from handler.cli import main

    assert main(["invoke", str(EVENTS / "http-api" / "infer-json.json")]) == 0
    printed = capsys.readouterr().out
    response = json.loads(printed[printed.index("{\n") :])
    assert response["statusCode"] == 200
    assert np.isclose(json.loads(response["body"])["outputs"][0]["data"][0], 0.99997, atol=1e-3)
