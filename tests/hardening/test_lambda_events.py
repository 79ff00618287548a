"""Malformed Lambda events through the real ``handler.http.lambda_handler``: every shape (REST API, HTTP API and ALB
events, and events of no kind at all) is answered with a well-formed 400 ``{"error"}`` (413 over
``OIP_MAX_BODY_BYTES``) in its service's response format, never an exception, which API Gateway would turn into its
own 500; well-formed unusual shapes are still served, and batch events still go to the batch handler."""

# covers: handler/rest/lambda_event.py

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from handler.batch.routing import batch_event_kind
from handler.cli.lambda_context import LocalLambdaContext
from handler.rest.lambda_event import http_shape

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
DELETE = object()
LONE_SURROGATE = "\ud800"
#: What an answer must never show: Python class names, tracebacks, source or server paths.
LEAKS = re.compile(r"Traceback|[A-Z][a-z]+Error\b|Exception|\.py\b|site-packages|/work/|/var/task")


def _event(name: str, **changes: Any) -> dict[str, Any]:
    """A shipped event with ``changes``: dotted paths (``__`` for the dots) set to a value, or removed by DELETE."""
    event = json.loads((EVENTS / f"{name}.json").read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = event
        for part in parents:
            target = target[part]
        if value is DELETE:
            target.pop(last, None)
        else:
            target[last] = value
    return event


def _with(name: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    event = _event(name)
    edit(event)
    return event


V2 = "http-api/infer-json"
V1 = "rest-api/infer-json"
ALB = "alb/infer-json"

#: (id, event): each one made Mangum, the app or the routing raise without the event check.
MALFORMED: list[tuple[str, Any]] = [
    # no kind at all
    ("empty-object", {}),
    ("a-list", []),
    ("a-string", "GET /v2/health/live"),
    ("null", None),
    ("a-number", 42),
    ("records-of-another-service", {"Records": [{"eventSource": "aws:sns"}]}),
    ("records-not-a-list", {"Records": "aws:sqs"}),
    ("request-context-of-no-kind", {"requestContext": {}, "body": "{}"}),
    ("method-and-path-without-request-context", {"httpMethod": "GET", "path": "/v2/health/live"}),
    # HTTP API (payload 2.0) and Function URLs
    ("v2-no-request-context", _event(V2, requestContext=DELETE)),
    ("v2-request-context-null", _event(V2, requestContext=None)),
    ("v2-request-context-a-string", _event(V2, requestContext="$default")),
    ("v2-version-3", _event(V2, version="3.0")),
    ("v2-version-missing", _event(V2, version=DELETE)),
    ("v2-version-1-with-v2-fields", _event(V2, version="1.0")),
    ("v2-http-null", _event(V2, requestContext__http=None)),
    ("v2-http-no-method", _event(V2, requestContext__http__method=DELETE)),
    ("v2-http-no-path", _event(V2, requestContext__http__path=DELETE)),
    ("v2-path-a-number", _event(V2, requestContext__http__path=404)),
    ("v2-path-lone-surrogate", _event(V2, requestContext__http__path=f"/v2/models/{LONE_SURROGATE}/infer")),
    ("v2-no-source-ip", _event(V2, requestContext__http__sourceIp=DELETE)),
    ("v2-headers-null", _event(V2, headers=None)),
    ("v2-headers-a-list", _event(V2, headers=[["content-type", "application/json"]])),
    ("v2-header-value-a-number", _event(V2, headers__accept=1)),
    ("v2-header-lone-surrogate", _event(V2, **{"headers__user-agent": LONE_SURROGATE})),
    ("v2-raw-query-null", _event(V2, rawQueryString=None)),
    ("v2-raw-query-lone-surrogate", _event(V2, rawQueryString=f"a={LONE_SURROGATE}")),
    ("v2-cookies-a-string", _event(V2, cookies="a=1")),
    ("v2-cookies-numbers", _event(V2, cookies=[1, 2])),
    ("v2-body-an-object", _event(V2, body={"inputs": []})),
    ("v2-body-a-number", _event(V2, body=7)),
    ("v2-body-a-list", _event(V2, body=["{}"])),
    ("v2-body-lone-surrogate", _event(V2, body='{"id": "' + LONE_SURROGATE + '", "inputs": []}')),
    ("v2-base64-flag-a-string", _event(V2, isBase64Encoded="true")),
    ("v2-base64-invalid-characters", _event(V2, isBase64Encoded=True, body="not base64 at all!")),
    ("v2-base64-bad-padding", _event(V2, isBase64Encoded=True, body="abc")),
    ("v2-base64-non-ascii", _event(V2, isBase64Encoded=True, body="éé==")),
    ("v2-host-two-colons", _event(V2, headers__host="[::1]:443")),
    ("v2-host-port-not-a-number", _event(V2, headers__host="example.com:https")),
    ("v2-forwarded-port-not-a-number", _event(V2, **{"headers__x-forwarded-port": "https"})),
    # REST API (payload 1.0)
    ("v1-no-request-context", _event(V1, requestContext=DELETE)),
    ("v1-request-context-a-list", _event(V1, requestContext=[])),
    ("v1-no-resource", _event(V1, resource=DELETE)),
    ("v1-unknown-version", _event(V1, version="1.5")),
    ("v1-no-method", _event(V1, httpMethod=DELETE)),
    ("v1-method-null", _event(V1, httpMethod=None)),
    ("v1-no-path", _event(V1, path=DELETE)),
    ("v1-path-a-number", _event(V1, path=12)),
    ("v1-identity-null", _event(V1, requestContext__identity=None)),
    ("v1-headers-a-string", _event(V1, headers="content-type: application/json")),
    ("v1-multi-value-headers-a-list", _event(V1, multiValueHeaders=[])),
    ("v1-multi-value-header-numbers", _event(V1, **{"multiValueHeaders__content-type": [1]})),
    ("v1-multi-value-header-null", _event(V1, **{"multiValueHeaders__content-type": None})),
    ("v1-multi-value-hosts", _event(V1, multiValueHeaders__host=["a.example:443", "b.example:443"])),
    ("v1-query-a-string", _event(V1, queryStringParameters="a=1")),
    ("v1-query-value-a-number", _event(V1, queryStringParameters={"a": 1})),
    ("v1-multi-value-query-value-a-number", _event(V1, multiValueQueryStringParameters={"a": 1})),
    ("v1-query-lone-surrogate", _event(V1, queryStringParameters={"a": LONE_SURROGATE})),
    ("v1-base64-invalid", _event(V1, isBase64Encoded=True, body="%%%%")),
    ("v1-body-lone-surrogate", _event(V1, body=LONE_SURROGATE)),
    ("v1-body-an-object", _event(V1, body={})),
    # ALB
    ("alb-no-headers", _event(ALB, headers=DELETE)),
    ("alb-headers-null", _event(ALB, headers=None)),
    ("alb-multi-value-headers-null", _with(ALB, lambda e: e.update(multiValueHeaders=None))),
    ("alb-no-method", _event(ALB, httpMethod=DELETE)),
    ("alb-no-path", _event(ALB, path=DELETE)),
    ("alb-path-a-number", _event(ALB, path=7)),
    ("alb-query-a-list", _event(ALB, queryStringParameters=["a", "1"])),
    ("alb-multi-value-query-value-a-number", _with(ALB, lambda e: e.update(multiValueQueryStringParameters={"a": 1}))),
    ("alb-base64-invalid", _event(ALB, isBase64Encoded=True, body="****")),
    (
        "alb-multi-value-header-lone-surrogate",
        _with(ALB, lambda e: e.update(multiValueHeaders={"host": ["x.example"], "accept": [LONE_SURROGATE]})),
    ),
    ("alb-host-port-not-a-number", _event(ALB, headers__host="example.com:")),
    (
        "alb-multi-value-header-an-object",
        _with(ALB, lambda e: e.update(multiValueHeaders={"host": {"x.example": "y"}})),
    ),
]


@pytest.fixture(scope="module")
def lambda_handler() -> Callable[[Any, Any], dict[str, Any]]:
    from handler.http import lambda_handler

    return lambda_handler


def _assert_error(response: Any, status: int) -> str:
    """The message of a well-formed ``{"error"}`` answer with ``status``."""
    assert isinstance(response, dict), response
    assert response["statusCode"] == status, response
    assert response["isBase64Encoded"] is False
    headers = response.get("headers") or {k: v[-1] for k, v in response["multiValueHeaders"].items()}
    assert headers["content-type"] == "application/json"
    body = json.loads(response["body"])
    assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"], body
    assert not LEAKS.search(body["error"]), body["error"]
    return body["error"]


def test_the_list_covers_every_service_and_enough_shapes() -> None:
    ids = [name for name, _ in MALFORMED]
    assert len(ids) == len(set(ids)) >= 36
    assert {name.split("-")[0] for name in ids} >= {"v1", "v2", "alb"}


@pytest.mark.parametrize(("name", "event"), MALFORMED, ids=[name for name, _ in MALFORMED])
def test_malformed_event_is_answered_400(lambda_handler, name: str, event: Any) -> None:  # type: ignore[no-untyped-def]
    before = copy.deepcopy(event)
    response = lambda_handler(event, LocalLambdaContext())
    message = _assert_error(response, 400)
    assert message.startswith(("malformed Lambda event: ", "unrecognised Lambda event: ")), message
    assert event == before  # the caller's event is left as it was


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (_event(V2, headers=None), "headers"),
        (_event(V2, requestContext__http__method=DELETE), "requestContext.http.method"),
        (_event(V2, isBase64Encoded=True, body="abc"), "body"),
        (_event(V1, requestContext__identity=None), "requestContext.identity"),
        (_event(ALB, path=DELETE), "path"),
        ({"httpMethod": "GET", "path": "/"}, "requestContext"),
    ],
    ids=["headers", "method", "base64", "identity", "alb-path", "request-context"],
)
def test_the_error_names_the_field(lambda_handler, event: dict[str, Any], field: str) -> None:  # type: ignore[no-untyped-def]
    message = _assert_error(lambda_handler(event, LocalLambdaContext()), 400)
    assert message.startswith(f"malformed Lambda event: {field} "), message


def test_alb_answers_in_its_own_format(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    single = lambda_handler(_event(ALB, path=DELETE), LocalLambdaContext())
    assert single["statusDescription"] == "400 Bad Request" and "multiValueHeaders" not in single
    multi_value = _with(ALB, lambda e: e.update(multiValueHeaders={"host": ["x.example"]}, path=None))
    response = lambda_handler(multi_value, LocalLambdaContext())
    assert response["multiValueHeaders"] == {"content-type": ["application/json"]} and "headers" not in response
    _assert_error(response, 400)


def test_an_http_event_without_request_context_is_not_routed_to_batch(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    for event in ({"httpMethod": "GET", "path": "/v2/health/live"}, _event(V2, requestContext=DELETE), {}):
        assert batch_event_kind(event) is None and http_shape(event) is None
        response = lambda_handler(event, LocalLambdaContext())
        assert "batchItemFailures" not in response
        _assert_error(response, 400)


def test_events_are_told_apart_by_shape() -> None:
    for path in sorted((EVENTS / "batch").glob("*.json")):
        event = json.loads(path.read_text())
        assert http_shape(event) is None
        assert batch_event_kind(event) == {"sqs": "sqs", "s3-put": "s3", "stepfunctions-items": "items"}[path.stem]
    eventbridge = {"version": "0", "source": "aws.s3", "detail-type": "Object Created", "detail": {}}
    assert batch_event_kind(eventbridge) == "s3" and http_shape(eventbridge) is None
    for shape, expected in (("http-api", "v2"), ("rest-api", "v1"), ("alb", "alb")):
        for path in sorted((EVENTS / shape).glob("*.json")):
            event = json.loads(path.read_text())
            assert http_shape(event) == expected and batch_event_kind(event) is None, path


def _rest_console_test(event: dict[str, Any]) -> None:
    """API Gateway's console test sends null headers and query parameters."""
    event.update(headers=None, multiValueHeaders=None, queryStringParameters=None, multiValueQueryStringParameters=None)


def _alb_multi_value(event: dict[str, Any]) -> None:
    event["multiValueHeaders"] = {k: [v] for k, v in event.pop("headers").items()}
    event["multiValueQueryStringParameters"] = {}
    event.pop("queryStringParameters")


def _base64_body(event: dict[str, Any]) -> None:
    event.update(body=base64.b64encode(event["body"].encode()).decode(), isBase64Encoded=True)


#: (id, event, check on the decoded answer): unusual but well-formed events, served as usual.
WELL_FORMED: list[tuple[str, dict[str, Any]]] = [
    ("rest-console-test", _with("rest-api/health-live", _rest_console_test)),
    ("rest-without-multi-value-headers", _event(V1, multiValueHeaders=DELETE)),
    ("http-api-payload-1.0", _event(V1, version="1.0")),
    ("v2-without-headers", _event("http-api/health-live", headers=DELETE)),
    ("v2-without-body-key", _event("http-api/health-live", body=DELETE, isBase64Encoded=DELETE)),
    ("v2-empty-body", _event("http-api/health-live", body="")),
    ("v2-base64-flag-null", _event(V2, isBase64Encoded=None)),
    ("v2-cookies", _event("http-api/model-metadata", cookies=["a=1", "b=2"])),
    ("v2-query-string", _event("http-api/model-metadata", rawQueryString="a=1&b=%C3%A9")),
    ("v2-host-with-port", _event(V2, headers__host="example.com:8443")),
    ("v2-base64-json-body", _with(V2, _base64_body)),
    ("v2-utf8-text-body", _with(V2, lambda e: e.update(body=e["body"].replace('"1"', '"naïve ✓"')))),
    ("v2-utf8-header", _event(V2, **{"headers__user-agent": "agent ✓"})),
    ("v1-uppercase-host-with-port", _with(V1, lambda e: e["headers"].update(HOST="example.com:443"))),
    ("v1-base64-json-body", _with(V1, _base64_body)),
    ("alb-multi-value", _with(ALB, _alb_multi_value)),
    ("alb-query", _event("alb/model-metadata", queryStringParameters={"a": "1%202"})),
]


@pytest.mark.parametrize(("name", "event"), WELL_FORMED, ids=[name for name, _ in WELL_FORMED])
def test_unusual_well_formed_event_is_served(lambda_handler, name: str, event: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    response = lambda_handler(event, LocalLambdaContext())
    assert response["statusCode"] == 200, response
    body = json.loads(response["body"])
    if name.endswith("utf8-text-body"):
        assert body["id"] == "naïve ✓"
    if name.startswith("alb-multi"):
        assert response["multiValueHeaders"]["content-type"] == ["application/json"]


def test_body_over_the_limit_is_refused_before_it_is_read(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    from handler import http

    limit = http.max_body_bytes
    text = _event(V2, body=" " * (limit + 1))
    encoded = _event(V2, isBase64Encoded=True, body=base64.b64encode(b"\0" * (limit + 3)).decode())
    alb = _event(ALB, body="x" * (limit + 1))
    for event in (text, encoded, alb):
        tracemalloc.start()
        try:
            response = lambda_handler(event, LocalLambdaContext())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert "OIP_MAX_BODY_BYTES" in _assert_error(response, 413)
        assert peak < limit // 16, peak  # nothing decoded, nothing copied: a body's copy would be the limit or more


_LIMIT_SCRIPT = """
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
print(json.dumps([lambda_handler(event, LocalLambdaContext())["statusCode"] for event in json.load(sys.stdin)]))
"""


def test_the_limit_is_oip_max_body_bytes(tmp_path: Path) -> None:
    event = _event(V2)
    size = len(event["body"].encode())
    non_ascii = _with(V2, lambda e: e.update(body=e["body"].replace('"1"', '"é"')))  # as many characters, 1 more byte
    encoded = _with(V2, _base64_body)
    events = [event, encoded, non_ascii, _event(V2, body=event["body"] + " ")]
    env = {**os.environ, "OIP_MAX_BODY_BYTES": str(size), "OIP_WARM_UP": "0", "MODEL_REPOSITORY": str(ROOT / "models")}
    done = subprocess.run([sys.executable, "-c", _LIMIT_SCRIPT], input=json.dumps(events), capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    # at the limit: served (text and base64); one byte over (in UTF-8 text, or one character more): 413
    assert statuses == [200, 200, 413, 413]


#: What a field becomes in the random mutations: every JSON type, odd strings, odd containers.
ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", LONE_SURROGATE, "/", "a:b:c", "%ff", "====", [], {}, ["a"],
                         [1], {"a": 1}, {"a": "b"}, {"a": ["b"]}]  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def test_random_mutations_of_every_shipped_event_never_raise(lambda_handler) -> None:  # type: ignore[no-untyped-def]
    """600 events, each a shipped HTTP event with one to three fields deleted or replaced by an odd value: every one
    answered, never with an exception or a 5xx, and every error as ``{"error"}``."""
    import random

    rng = random.Random(32)
    files = sorted(p for shape in ("http-api", "rest-api", "alb") for p in (EVENTS / shape).glob("*.json"))
    statuses: set[int] = set()
    for _ in range(600):
        event = json.loads(rng.choice(files).read_text())
        for _ in range(rng.randint(1, 3)):
            *parents, last = rng.choice(_paths(event))
            target = event
            for part in parents:
                target = target[part]
            if isinstance(target, dict) and rng.random() < 0.3:
                del target[last]
            else:
                target[last] = copy.deepcopy(rng.choice(ODD_VALUES))
        response = lambda_handler(event, LocalLambdaContext())
        status = response["statusCode"]
        assert isinstance(status, int) and status < 500, (event, response)
        if status >= 400:
            _assert_error(response, status)
        statuses.add(status)
    assert {200, 400} <= statuses  # both served and refused events were made
