"""One inference operation behind every transport, with real components: onnxruntime on the content-type models,
uvicorn and grpc.aio on 127.0.0.1 (one event loop, one data plane, as in an ``oip serve`` worker), moto's
standalone S3/SQS server for the batch function, ``oip batch`` as a user runs it.

- The same ``pd``, ``str``, ``base64`` and ``datetime`` requests (and a content-type mistake) give the same answers
  through REST, gRPC, SageMaker's ``/invocations``, SQS, S3 and ``oip batch``.
- A gRPC request (unary or streamed) is counted in the statistics and observed by the telemetry as a REST one is.
- Batch holds every line to OIP_MAX_TENSOR_BYTES: a line whose shape is over it is a failed row with the 413's
  message.
"""

# covers: adapters/base.py
# covers: adapters/onnx/backend.py
# covers: adapters/types.py
# covers: handler/inference/exchange.py
# covers: handler/protocol/dataplane.py

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import grpc
import httpx
import numpy as np
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import deserialize_bytes_tensor, triton_to_np_dtype

from adapters.errors import PayloadTooLarge
from adapters.types import InferCall, Tensor
from handler import batch
from handler.batch.aws import aws_client
from handler.batch.service import batch_service
from handler.cli import main
from handler.cli.lambda_context import LocalLambdaContext
from handler.inference.service import InferenceService
from handler.observability.telemetry import InferObservation, Telemetry
from handler.rest.app import create_app
from handler.runtime import container
from handler.runtime.container import build_dataplane
from handler.runtime.loop import run
from scripts import lambda_events
from tests.conftest import make_settings
from tests.integration.conftest import aws_env, moto_server  # noqa: F401  (fixtures)
from tests.support.content_type_models import build_repository
from tests.support.in_process import InProcessServers

DATES = ["2022-01-11T11:00:00", "1999-12-31T23:59:59.250000", "2022-01-11T11:00:00+02:00"]

#: (case, model, request): each request carries its id, so that every transport answers with the same one.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("pd", "people", {
        "parameters": {"content_type": "pd"},
        "inputs": [
            {"name": "First Name", "datatype": "BYTES", "shape": [2], "data": ["Joanne", "Michaël"],
             "parameters": {"content_type": "str"}},
            {"name": "Age", "datatype": "INT32", "shape": [2], "data": [34, 22]},
        ],
    }),
    ("pd_from_model_defaults", "people_defaults", {
        "inputs": [
            {"name": "First Name", "datatype": "BYTES", "shape": [2], "data": ["Joanne", "日本"]},
            {"name": "Age", "datatype": "INT32", "shape": [2, 1], "data": [34, 22]},
        ],
    }),
    ("str", "flat_bytes", {
        "parameters": {"content_type": "str"},
        "inputs": [{"name": "foo", "datatype": "BYTES", "shape": [3], "data": ["bar", "naïve café", "🚀"]}],
    }),
    ("base64_in_and_out", "flat_bytes", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [2], "data": ["UHl0aG9uIGlzIGZ1bg==", "eA=="],
                    "parameters": {"content_type": "base64"}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "base64"}}],
    }),
    ("base64_to_uint8", "flat_uint8", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["AAEC/w=="],
                    "parameters": {"content_type": "base64"}}],
    }),
    ("datetime_to_epoch_and_back", "flat_int64", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [3], "data": DATES,
                    "parameters": {"content_type": "datetime"}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "datetime"}}],
    }),
    ("datetime_as_text", "flat_bytes", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [3], "data": DATES,
                    "parameters": {"content_type": "datetime"}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"content_type": "datetime"}}],
    }),
    ("content_type_mistake", "flat_bytes", {
        "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": ["x"],
                    "parameters": {"content_type": "nope"}}],
    }),
]  # fmt: skip
REQUESTS = {case: (model, {"id": f"req-{case}", **request}) for case, model, request in CASES}

#: An answer as the transports are compared: ("ok", the V2 response document) or ("error", its message).
Answer = tuple[str, Any]


class RecordingTelemetry(Telemetry):
    """``Telemetry`` that keeps a copy of every observation it records."""

    def __init__(self) -> None:
        super().__init__()
        self.observations: list[InferObservation] = []

    def record(self, observation: InferObservation) -> None:
        self.observations.append(replace(observation))
        super().record(observation)


Servers = InProcessServers


def observations(servers: Servers) -> list[InferObservation]:
    """Every observation the servers' telemetry recorded so far."""
    assert isinstance(servers.telemetry, RecordingTelemetry)
    return servers.telemetry.observations


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("one_infer_path"))


@pytest.fixture(scope="module")
def servers(repository: Path) -> Iterator[Servers]:
    """REST and gRPC over one data plane and one recording telemetry."""
    settings = make_settings(repository)
    with InProcessServers(build_dataplane(settings), settings, RecordingTelemetry()) as found:
        yield found


# -- each transport's answer --------------------------------------------------------------------------------


def rest_answer(servers: Servers, model: str, request: dict[str, Any]) -> Answer:
    response = httpx.post(f"{servers.rest}/v2/models/{model}/infer", json=request, timeout=30)
    return ("ok", response.json()) if response.status_code == 200 else ("error", response.json()["error"])


def sagemaker_answer(servers: Servers, model: str, request: dict[str, Any]) -> Answer:
    headers = {"X-Amzn-SageMaker-Custom-Attributes": f"model={model}"}
    response = httpx.post(f"{servers.rest}/invocations", json=request, headers=headers, timeout=30)
    return ("ok", response.json()) if response.status_code == 200 else ("error", response.json()["error"])


def _set(parameter: Any, value: Any) -> None:
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    else:
        parameter.string_param = value


def _value(parameter: Any) -> Any:
    return getattr(parameter, parameter.WhichOneof("parameter_choice"))


#: V2 datatype -> the ``InferTensorContents`` field a client fills.
CONTENTS = {"BYTES": "bytes_contents", "INT32": "int_contents", "INT64": "int64_contents", "FP32": "fp32_contents"}


def grpc_request(model: str, request: dict[str, Any]) -> Any:
    """The V2 JSON request as a ``ModelInferRequest`` with typed contents."""
    message = service_pb2.ModelInferRequest(model_name=model, id=request["id"])
    for key, value in request.get("parameters", {}).items():
        _set(message.parameters[key], value)
    for item in request["inputs"]:
        tensor = message.inputs.add(name=item["name"], datatype=item["datatype"], shape=item["shape"])
        for key, value in item.get("parameters", {}).items():
            _set(tensor.parameters[key], value)
        data = np.asarray(item["data"]).ravel().tolist()
        values = [text.encode() for text in data] if item["datatype"] == "BYTES" else data
        getattr(tensor.contents, CONTENTS[item["datatype"]]).extend(values)
    for item in request.get("outputs", []):
        output = message.outputs.add(name=item["name"])
        for key, value in item.get("parameters", {}).items():
            _set(output.parameters[key], value)
    return message


def grpc_document(response: Any) -> dict[str, Any]:
    """A ``ModelInferResponse`` as the V2 JSON response document REST answers with."""
    outputs = []
    for output, raw in zip(response.outputs, response.raw_output_contents, strict=True):
        if output.datatype == "BYTES":
            data = [item.decode() for item in deserialize_bytes_tensor(raw).tolist()]
        else:
            data = np.frombuffer(raw, dtype=triton_to_np_dtype(output.datatype)).tolist()
        entry: dict[str, Any] = {"name": output.name, "datatype": output.datatype, "shape": list(output.shape),
                                 "data": data}  # fmt: skip
        if output.parameters:
            entry["parameters"] = {key: _value(value) for key, value in output.parameters.items()}
        outputs.append(entry)
    document: dict[str, Any] = {"id": response.id, "model_name": response.model_name,
                                "model_version": response.model_version, "outputs": outputs}  # fmt: skip
    if response.parameters:
        document["parameters"] = {key: _value(value) for key, value in response.parameters.items()}
    return document


def grpc_answer(servers: Servers, model: str, request: dict[str, Any]) -> Answer:
    with grpc.insecure_channel(servers.grpc) as channel:
        try:
            response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(grpc_request(model, request))
        except grpc.RpcError as error:
            return "error", error.details()
    return "ok", grpc_document(response)


def grpc_stream_answers(servers: Servers, requests: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    """Each request's answer on one ``ModelStreamInfer`` stream."""
    with grpc.insecure_channel(servers.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        responses = list(stub.ModelStreamInfer(iter([grpc_request(model, body) for model, body in requests])))
    return [
        ("error", response.error_message) if response.error_message else ("ok", grpc_document(response.infer_response))
        for response in responses
    ]


def batch_lines() -> list[bytes]:
    """Every request as a JSON line naming its model."""
    return [json.dumps({"model_name": model, **request}).encode() for model, request in REQUESTS.values()]


def line_answer(line: dict[str, Any]) -> Answer:
    return ("error", line["error"]) if "error" in line else ("ok", line)


@pytest.fixture
def lambda_container(repository: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The batch function's data plane over the content-type models (the container's, read afresh)."""
    monkeypatch.setenv("MODEL_REPOSITORY", str(repository))
    container.settings.cache_clear()
    container.dataplane.cache_clear()
    batch_service.cache_clear()
    yield
    container.settings.cache_clear()
    container.dataplane.cache_clear()
    batch_service.cache_clear()


@pytest.fixture
def bucket(aws_env: str, lambda_container: None, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    name = f"one-path-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    aws_client.cache_clear()
    monkeypatch.setenv("OIP_RESULTS_S3_URI", f"s3://{name}/results/")
    return name


def _s3_json(bucket: str, key: str) -> Any:
    return json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())


def _s3_lines(bucket: str, key: str) -> list[dict[str, Any]]:
    body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    return [json.loads(line) for line in body.splitlines()]


def sqs_answers(bucket: str, lines: list[bytes]) -> list[Answer]:
    """Each line as an SQS message to the batch function: its result object, or its error object."""
    messages = [(str(uuid.uuid4()), line.decode()) for line in lines]
    batch.lambda_handler(lambda_events.sqs_event(messages), LocalLambdaContext())
    answers = []
    for (message_id, _), line in zip(messages, lines, strict=True):
        model = json.loads(line)["model_name"]
        try:
            answers.append(("ok", _s3_json(bucket, f"results/{model}/{message_id}.json")))
        except boto3.client("s3").exceptions.NoSuchKey:
            answers.append(("error", _s3_json(bucket, f"results/errors/{message_id}.json")["error"]))
    return answers


def s3_answers(bucket: str, lines: list[bytes]) -> list[Answer]:
    """The lines as one S3 object predicted by the batch function: each line's output line."""
    boto3.client("s3").put_object(Bucket=bucket, Key="input/requests.jsonl", Body=b"\n".join(lines) + b"\n")
    batch.lambda_handler(lambda_events.s3_put_event(bucket, "input/requests.jsonl"), LocalLambdaContext())
    return [line_answer(line) for line in _s3_lines(bucket, "output/requests.jsonl.predictions.jsonl")]


def oip_batch_answers(repository: Path, tmp_path: Path, lines: list[bytes]) -> list[Answer]:
    """The lines as a file predicted by ``oip batch``: each line's output line."""
    source = tmp_path / "requests.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    main(["batch", str(source), "--model-repository", str(repository), "--quiet"])
    output = (tmp_path / "requests.jsonl.predictions.jsonl").read_text().splitlines()
    return [line_answer(json.loads(line)) for line in output]


# -- the same answers everywhere ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rest_answers(servers: Servers) -> dict[str, Answer]:
    return {case: rest_answer(servers, model, request) for case, (model, request) in REQUESTS.items()}


def test_rest_answers_apply_the_content_types(rest_answers: dict[str, Answer]) -> None:
    """What the other transports are held to: REST's answers, as the content-type tests check them."""
    pd_answer = rest_answers["pd"][1]
    assert pd_answer["parameters"] == {"content_type": "pd"}
    assert {o["name"]: o["data"] for o in pd_answer["outputs"]} == {
        "First Name_out": ["Joanne", "Michaël"],
        "Age_out": [34, 22],
    }
    assert rest_answers["pd_from_model_defaults"][1]["outputs"][0]["parameters"] == {"content_type": "str"}
    assert rest_answers["base64_in_and_out"][1]["outputs"][0]["data"] == ["UHl0aG9uIGlzIGZ1bg==", "eA=="]
    assert rest_answers["base64_to_uint8"][1]["outputs"][0]["data"] == [0, 1, 2, 255]
    epoch = rest_answers["datetime_to_epoch_and_back"][1]["outputs"][0]
    assert epoch["datatype"] == "BYTES" and epoch["data"][0].startswith("2022-01-11T11:00:00")
    assert rest_answers["datetime_as_text"][1]["outputs"][0]["parameters"] == {"content_type": "datetime"}
    kind, message = rest_answers["content_type_mistake"]
    assert kind == "error" and "unknown content type 'nope'" in message


@pytest.mark.parametrize("case", list(REQUESTS))
def test_grpc_and_sagemaker_answer_as_rest_does(servers: Servers, rest_answers: dict[str, Answer], case: str) -> None:
    model, request = REQUESTS[case]
    assert grpc_answer(servers, model, request) == rest_answers[case]
    assert sagemaker_answer(servers, model, request) == rest_answers[case]


def test_grpc_stream_answers_as_rest_does(servers: Servers, rest_answers: dict[str, Answer]) -> None:
    assert grpc_stream_answers(servers, list(REQUESTS.values())) == list(rest_answers.values())


def test_oip_batch_answers_as_rest_does(repository: Path, tmp_path: Path, rest_answers: dict[str, Answer]) -> None:
    assert oip_batch_answers(repository, tmp_path, batch_lines()) == list(rest_answers.values())


@pytest.mark.integration
def test_sqs_and_s3_answer_as_rest_does(bucket: str, rest_answers: dict[str, Answer]) -> None:
    assert sqs_answers(bucket, batch_lines()) == list(rest_answers.values())
    assert s3_answers(bucket, batch_lines()) == list(rest_answers.values())


# -- statistics and telemetry: gRPC as REST -----------------------------------------------------------------

SMALL = {"id": "small", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1.5, 2.5]}]}
WRONG = {"id": "wrong", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [3], "data": [1.5, 2.5]}]}


def _counts(servers: Servers, model: str) -> tuple[int, int, int]:
    """(successes, failures, inferences) of the model's version 1, from the statistics extension."""
    document = httpx.get(f"{servers.rest}/v2/models/{model}/versions/1/stats", timeout=30).json()
    stats = document["model_stats"][0]
    inference = stats["inference_stats"]
    return inference["success"]["count"], inference["fail"]["count"], stats["inference_count"]


def _observed(servers: Servers, send: Any, model: str, request: dict[str, Any]) -> InferObservation:
    before = len(observations(servers))
    send(servers, model, request)
    seen = observations(servers)[before:]
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize("send", [rest_answer, grpc_answer], ids=["rest", "grpc"])
def test_a_request_is_counted_and_observed_whichever_transport_it_came_by(servers: Servers, send: Any) -> None:
    before = _counts(servers, "flat_fp32")
    answered = _observed(servers, send, "flat_fp32", SMALL)
    assert _counts(servers, "flat_fp32") == (before[0] + 1, before[1], before[2] + 1)
    assert (answered.model, answered.version, answered.status) == ("flat_fp32", "1", 200)
    assert answered.bytes_in > 0 and answered.bytes_out > 0

    failed = _observed(servers, send, "flat_fp32", WRONG)
    assert (failed.model, failed.status) == ("flat_fp32", 400)
    unknown = _observed(servers, send, "absent", SMALL)
    assert (unknown.model, unknown.version, unknown.status) == ("absent", None, 404)


def test_a_streamed_request_is_counted_and_observed(servers: Servers) -> None:
    before_counts = _counts(servers, "flat_fp32")
    before = len(observations(servers))
    answers = grpc_stream_answers(servers, [("flat_fp32", SMALL), ("absent", SMALL), ("flat_fp32", SMALL)])
    assert [kind for kind, _ in answers] == ["ok", "error", "ok"]
    assert _counts(servers, "flat_fp32") == (before_counts[0] + 2, before_counts[1], before_counts[2] + 2)
    observed = sorted((o.model, o.status) for o in observations(servers)[before:])
    assert observed == [("absent", 404), ("flat_fp32", 200), ("flat_fp32", 200)]


def test_rest_and_grpc_observations_agree(servers: Servers) -> None:
    """The same request observed the same way by both transports, but for its size on each wire."""
    rest = _observed(servers, rest_answer, "people", REQUESTS["pd"][1])
    grpc_seen = _observed(servers, grpc_answer, "people", REQUESTS["pd"][1])
    assert (rest.model, rest.version, rest.status) == (grpc_seen.model, grpc_seen.version, grpc_seen.status)
    assert rest.status == 200 and rest.version == "1"


# -- batch holds lines to OIP_MAX_TENSOR_BYTES --------------------------------------------------------------

LIMIT = 1024
WIDE = {"id": "wide", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4096], "data": [1.0]}]}
WIDE_413 = "tensor 'INPUT0' with shape [4096] and datatype FP32 would need 16384 bytes, over the limit of 1024 bytes"


def test_rest_refuses_the_wide_request_with_413(repository: Path) -> None:
    """The answer the batch rows below are held to, from a server with the same limit."""
    from fastapi.testclient import TestClient

    settings = make_settings(repository, max_tensor_bytes=LIMIT)
    with TestClient(create_app(build_dataplane(settings), settings)) as client:
        response = client.post("/v2/models/flat_fp32/infer", json=WIDE)
    assert (response.status_code, response.json()) == (413, {"error": WIDE_413})


def _limit_lines() -> list[bytes]:
    return [
        json.dumps({"model_name": "flat_fp32", **SMALL}).encode(),
        json.dumps({"model_name": "flat_fp32", **WIDE}).encode(),
    ]


def test_oip_batch_holds_lines_to_the_tensor_limit(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OIP_MAX_TENSOR_BYTES", str(LIMIT))
    answers = oip_batch_answers(repository, tmp_path, _limit_lines())
    assert answers[0][0] == "ok" and answers[1] == ("error", WIDE_413)
    manifest = json.loads((tmp_path / "requests.jsonl.predictions.manifest.json").read_text())
    assert manifest["errors"] == 1 and manifest["error_samples"] == [{"line": 2, "error": WIDE_413}]


@pytest.mark.integration
def test_sqs_and_s3_hold_lines_to_the_tensor_limit(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OIP_MAX_TENSOR_BYTES", str(LIMIT))
    container.settings.cache_clear()
    container.dataplane.cache_clear()
    batch_service.cache_clear()
    for answers in (sqs_answers(bucket, _limit_lines()), s3_answers(bucket, _limit_lines())):
        assert answers[0][0] == "ok" and answers[1] == ("error", WIDE_413)


def test_content_types_conversions_are_held_to_the_tensor_limit(repository: Path) -> None:
    """A tensor that its content type makes larger than the limit is refused as its wire form would be: three
    ISO dates (30 bytes of text, under a limit of 16 for BYTES elements counted at one byte) become 24 bytes of
    INT64 epoch seconds."""
    settings = make_settings(repository, max_tensor_bytes=16)
    dates = np.array(["2022-01-11", "2022-01-12", "2022-01-13"], dtype=object)
    call = InferCall((Tensor("INPUT0", "BYTES", (3,), dates, {"content_type": "datetime"}),))
    refused = pytest.raises(PayloadTooLarge, match="would need 24 bytes, over the limit of 16 bytes")
    telemetry = RecordingTelemetry()
    service = InferenceService(build_dataplane(settings), settings, telemetry)
    with refused:
        run(service.infer("flat_int64", None, call))
    assert [o.status for o in telemetry.observations] == [413]


def test_batch_rows_run_together_are_each_counted_and_observed(repository: Path) -> None:
    """Three rows of one chunk run as one execution (a model whose first dimension is variable): three requests and
    one execution in the statistics, three observations; a row that fails fails alone."""
    settings = make_settings(repository)
    telemetry = RecordingTelemetry()
    service = InferenceService(build_dataplane(settings), settings, telemetry)
    rows = [np.array([1.5, 2.5], np.float32), np.array([3.5], np.float32), np.array([4.5, 5.5, 6.5], np.float32)]
    calls = [InferCall((Tensor("INPUT0", "FP32", (len(row),), row),), (), f"r{i}") for i, row in enumerate(rows)]
    wrong = InferCall((Tensor("INPUT9", "FP32", (1,), np.ones(1, np.float32)),), (), "wrong")
    outcomes = run(service.infer_many("flat_fp32", None, [*calls, wrong]))
    assert [o.id for o in outcomes[:3]] == ["r0", "r1", "r2"]  # type: ignore[union-attr]
    for outcome, row in zip(outcomes, rows, strict=False):
        np.testing.assert_array_equal(outcome.outputs[0].data, row)  # type: ignore[union-attr]
    assert "INPUT9" in str(outcomes[3])
    stats = run(service.dataplane.model_statistics("flat_fp32", "1"))[0]
    assert (stats["inference_stats"]["success"]["count"], stats["inference_stats"]["fail"]["count"]) == (3, 1)
    assert (stats["inference_count"], stats["execution_count"]) == (6, 1)  # the failed row ran no inference
    assert sorted(o.status for o in telemetry.observations) == [200, 200, 200, 400]
