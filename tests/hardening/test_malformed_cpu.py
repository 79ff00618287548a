"""Malformed request bodies cost little server CPU, whatever their shape: a generated body (a ``shape`` of up to a
million bad dimensions or nested arrays, up to 300,000 parameters, names and ids of megabytes, up to a thousand
inputs each with its mistakes, gzipped or not) sent to one real ``oip serve --workers 1`` is refused with a 400, and
the server process's CPU time (``/proc/<pid>/stat``, all its threads) grows by at most ``BUDGET_S`` per refusal,
HTTP included. ``/proc`` counts CPU time in clock ticks (10 ms), so one tick is allowed on top. The same kinds of
bodies are refused by the Lambda handler and their equivalents by gRPC.

The first request that pydantic must judge imports it and builds its schemas, once per process: the fixture sends
one before anything is measured."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import grpc
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2, service_pb2_grpc

from handler.cli.lambda_context import LocalLambdaContext
from tests.support.grpc_receiving import receiving_cpu
from tests.support.servers import OipServer, oip_serve

#: Server CPU one refusal may cost.
BUDGET_S = 0.050
#: ``/proc``'s unit of CPU time: a measured difference may be one off.
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
#: The most a refusal may be measured at: the budget and one tick (plus the rounding of summed float ticks).
CEILING_S = BUDGET_S + TICK_S + 1e-9
#: The largest body generated (Lambda's limit; oip serve accepts more) and the largest gzip body the property is
#: stated for.
BODY_LIMIT = 6 * 1024 * 1024
GZIP_LIMIT = 64 * 1024

GOOD_INPUT = {"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}
#: Things that are no dimension: strings, negative, too large, fractional, nested.
BAD_DIMENSIONS = ['"a"', "-1", str(2**70), "1.5", "[1]", "null", "true"]
#: Things that are no parameter value.
BAD_PARAMETERS = ["[]", "{}", "null", "[1,2]"]
SIZES = [33, 1_000, 100_000, 1_000_000]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


KINDS = ["shape", "deep", "parameters", "input-parameters", "long", "members", "many"]
#: What each kind's size is drawn from.
COUNTS = {
    "shape": [33, 1_000, 100_000, 1_000_000],
    "deep": [100, 1_000, 100_000, 1_000_000],
    "parameters": [257, 10_000, 300_000],
    "input-parameters": [65, 10_000, 300_000],
    "long": [4_097, 1_000_000, 5_000_000],
    "members": [257, 100_000],
    "many": [16, 64],
}
FIELDS = ["id", "name", "datatype", "parameter", "output"]


class Recipe(NamedTuple):
    """A malformed body, small to show: its kind, its size, what it repeats and which field it makes long."""

    kind: str
    count: int
    value: str
    field: str


@st.composite
def malformed(draw: st.DrawFn) -> Recipe:
    kind = draw(st.sampled_from(KINDS))
    values = BAD_DIMENSIONS if kind == "shape" else [*BAD_PARAMETERS, "1", '"x"']
    return Recipe(
        kind, draw(st.sampled_from(COUNTS[kind])), draw(st.sampled_from(values)), draw(st.sampled_from(FIELDS))
    )


def build(recipe: Recipe) -> bytes:
    """The body of at most ``BODY_LIMIT`` bytes ``recipe`` describes."""
    kind, count, value, field = recipe
    good = _json(GOOD_INPUT)
    if kind == "shape":
        shape = ",".join([value] * min(count, BODY_LIMIT // (len(value) + 1) - 100))
        return f'{{"inputs":[{{"name":"input","datatype":"FP32","shape":[{shape}],"data":[1]}}]}}'.encode()
    if kind == "deep":
        return f'{{"inputs":[{{"name":"input","datatype":"FP32","shape":{"[" * count}{"]" * count}}}]}}'.encode()
    if kind in ("parameters", "input-parameters"):
        entries = ",".join(f'"p{index}":{value}' for index in range(count))
        if kind == "parameters":
            return f'{{"parameters":{{{entries}}},"inputs":[{good}]}}'.encode()
        return f'{{"inputs":[{{"name":"input","datatype":"FP32","shape":[1,4],"parameters":{{{entries}}}}}]}}'.encode()
    if kind == "long":
        text = "x" * count
        if field == "id":
            return f'{{"id":"{text}","inputs":[{good}]}}'.encode()
        if field == "parameter":
            return f'{{"parameters":{{"{text}":1}},"inputs":[{good}]}}'.encode()
        if field == "output":
            return f'{{"inputs":[{good}],"outputs":[{{"name":"{text}"}}]}}'.encode()
        return _json({"inputs": [{**GOOD_INPUT, field: text}]}).encode()
    if kind == "members":
        extra = ",".join(f'"m{index}":[]' for index in range(count))
        return f'{{"inputs":[{{"name":"input","datatype":"FP32","shape":[1,4],{extra}}}],"id":5}}'.encode()
    # many inputs (as many as a model's own count lets through), each with as many mistakes as the bounds let through
    item = '{"name":1,"datatype":2,"shape":[' + ",".join(['"a"'] * 32) + '],"parameters":{'
    item += ",".join(f'"p{index}":[]' for index in range(64)) + "}}"
    return ('{"inputs":[' + ",".join([item] * count) + "]}").encode()


def _encoded(body: bytes, zipped: bool) -> tuple[bytes, dict[str, str]]:
    """The body as sent (gzipped when asked and it fits ``GZIP_LIMIT``) and its headers."""
    headers = {"content-type": "application/json"}
    if zipped:
        compressed = gzip.compress(body, 6)
        if len(compressed) <= GZIP_LIMIT:
            return compressed, headers | {"content-encoding": "gzip"}
    return body, headers


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(workers=1, log_level="warning") as served:
        warm = httpx.post(f"{served.url}/v2/models/iris/infer", json={"inputs": [{"name": 1}]}, timeout=60)
        assert warm.status_code == 400  # pydantic imported, its schemas built
        yield served


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recipe=malformed(), zipped=st.booleans())
def test_a_malformed_body_is_refused_within_the_cpu_budget(server: OipServer, recipe: Recipe, zipped: bool) -> None:
    body = build(recipe)
    assert len(body) <= BODY_LIMIT
    content, headers = _encoded(body, zipped)
    with httpx.Client(timeout=60) as client:  # connected before the measure: a refusal's cost, not a handshake's
        client.get(f"{server.url}/v2/health/live")
        before = server.cpu_seconds()
        answer = client.post(f"{server.url}/v2/models/iris/infer", content=content, headers=headers)
        spent = server.cpu_seconds() - before
    assert answer.status_code == 400, answer.text[:300]
    assert set(answer.json()) == {"error"} and len(answer.text) < 2_000 + 4_096
    assert spent <= CEILING_S, f"{spent:.3f} s of server CPU for {answer.json()['error'][:200]}"


def test_the_probes_of_the_issue(server: OipServer) -> None:
    """A 5 MB body whose shape holds a million strings; the same gzipped (4 KB); 300,000 invalid parameters."""
    million = b'{"inputs":[{"name":"input","datatype":"FP32","shape":[' + b",".join([b'"a"'] * 1_000_000) + b"]}]}"
    parameters = ",".join(f'"p{index}":[]' for index in range(300_000))
    many = f'{{"parameters":{{{parameters}}},"inputs":[{_json(GOOD_INPUT)}]}}'.encode()
    for body, zipped in ((million, False), (million, True), (many, False), (many, True)):
        content, headers = _encoded(body, zipped)
        before = server.cpu_seconds()
        answer = httpx.post(f"{server.url}/v2/models/iris/infer", content=content, headers=headers, timeout=60)
        spent = server.cpu_seconds() - before
        assert answer.status_code == 400
        assert spent <= CEILING_S, (len(content), spent, answer.json())
    assert answer.json() == {"error": "the request has 300000 parameters; at most 256 are accepted"}


@pytest.fixture(scope="module")
def lambda_handler() -> Any:
    from handler.http import lambda_handler

    return lambda_handler


def _lambda_event(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    import base64

    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/v2/models/iris/infer",
        "rawQueryString": "",
        "headers": {"host": "example.execute-api.us-east-1.amazonaws.com", **headers},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api-id",
            "domainName": "id.execute-api.us-east-1.amazonaws.com",
            "http": {"method": "POST", "path": "/v2/models/iris/infer", "protocol": "HTTP/1.1", "sourceIp": "1.2.3.4"},
            "requestId": "id",
            "routeKey": "$default",
            "stage": "$default",
            "time": "12/Mar/2020:19:03:58 +0000",
            "timeEpoch": 1583348638390,
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recipe=malformed(), zipped=st.booleans())
def test_the_lambda_handler_refuses_the_same_bodies(lambda_handler: Any, recipe: Recipe, zipped: bool) -> None:
    body = build(recipe)
    content, headers = _encoded(body, zipped)
    if len(content) * 4 // 3 > BODY_LIMIT:  # base64 in the event: Lambda's own limit applies first
        content, headers = gzip.compress(body, 9), headers | {"content-encoding": "gzip"}
    response = lambda_handler(_lambda_event(content, headers), LocalLambdaContext())
    assert response["statusCode"] in (400, 413), response["body"][:300]
    assert set(json.loads(response["body"])) == {"error"}


def _grpc_requests() -> list[tuple[str, Any]]:
    """gRPC's equivalents: a million dimensions, 300,000 parameters (request, input, output), megabyte names.
    Each label says whether the CPU budget holds: protobuf's own parse of 300,000 map entries, in the request's
    deserializer before any check of ours, costs more than the budget."""
    requests = []

    def base() -> Any:
        request = service_pb2.ModelInferRequest(model_name="iris")
        tensor = request.inputs.add(name="input", datatype="FP32", shape=[1, 4])
        tensor.contents.fp32_contents.extend(GOOD_INPUT["data"])
        return request

    request = base()
    request.inputs[0].shape.extend([1] * 1_000_000)
    requests.append(("dimensions (budget)", request))
    for where in ("request", "input", "output"):
        request = base()
        holder = {"request": request, "input": request.inputs[0], "output": request.outputs.add(name="output")}[where]
        for index in range(300_000):
            holder.parameters[f"p{index}"].int64_param = index
        requests.append((f"{where} parameters", request))
    for field in ("id", "name", "datatype"):
        request = base()
        target = request if field == "id" else request.inputs[0]
        setattr(target, field, "x" * 5_000_000)
        requests.append((f"long {field} (budget)", request))
    return requests


def test_grpc_refuses_the_same_mistakes() -> None:
    """Those labelled "budget" cost at most ``BUDGET_S``, or twice the cost of receiving as many bytes in a message
    refused at once (measured just before and after it) where a busy machine makes that more."""
    with oip_serve(grpc=True, workers=1, log_level="warning") as served:
        assert served.grpc is not None
        with grpc.insecure_channel(served.grpc) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            for label, request in _grpc_requests():
                size = request.ByteSize()
                assert size <= BODY_LIMIT, label
                budgeted = "budget" in label
                receiving = receiving_cpu(served, channel, size) if budgeted else 0.0
                before = served.cpu_seconds()
                with pytest.raises(grpc.RpcError) as caught:
                    stub.ModelInfer(request, timeout=60)
                spent = served.cpu_seconds() - before
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (label, caught.value.details())
                assert len(caught.value.details()) < 2_000, label
                if budgeted:
                    receiving = max(receiving, receiving_cpu(served, channel, size))
                    ceiling = max(BUDGET_S, 2 * receiving) + TICK_S + 1e-9
                    assert spent <= ceiling, (label, spent, ceiling)
