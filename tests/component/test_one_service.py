"""One request through each transport, all over one ``InferenceService``: each is counted, observed and traced by
the service the same way (statistics, the telemetry's observation, its spans), whichever transport carried it.

REST V2, KServe V1, SageMaker and Vertex AI through the served app (httpx's ASGI transport), gRPC through a
``grpc.aio`` server on a held port, an SQS event and an S3 event through the batch function (moto's standalone
server), and ``oip batch``'s file prediction; every one hands its request to the same service object.
"""

# covers: handler/cli/batch_files.py
# covers: handler/inference/service.py

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from handler import batch
from handler.batch.aws import aws_client
from handler.cli import build_parser
from handler.cli.batch import Interrupt, predict_file
from handler.cli.batch_files import batch_files
from handler.cli.lambda_context import LocalLambdaContext
from handler.config.platform import Platform
from handler.grpc.server import build_server
from handler.inference.service import InferenceService
from handler.observability.telemetry import InferObservation, Telemetry
from handler.rest.starlette_app import create_serving_app
from handler.runtime.container import build_dataplane
from handler.runtime.loop import run
from scripts import lambda_events
from tests.conftest import make_settings
from tests.integration.conftest import aws_env, moto_server  # noqa: F401  (fixtures)
from tests.support.content_type_models import build_repository
from tests.support.servers import HeldPort

MODEL = "flat_fp32"
ROW = [1.5, 2.5]
V2_REQUEST = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": ROW}]}


class TracingTelemetry(Telemetry):
    """``Telemetry`` that keeps every observation it records and the name of every span it opens."""

    def __init__(self) -> None:
        super().__init__()
        self.observations: list[InferObservation] = []
        self.spans: list[str] = []

    def span(self, name: str) -> AbstractContextManager[Any]:
        self.spans.append(name)
        return nullcontext()

    def record(self, observation: InferObservation) -> None:
        self.observations.append(replace(observation))
        super().record(observation)


@dataclass(frozen=True)
class Seen:
    """What one transport's request left behind: statistics' successes and inferences, observations, spans."""

    successes: int
    inferences: int
    observations: list[InferObservation]
    spans: list[str]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repository(tmp_path_factory.mktemp("one_service"))


@pytest.fixture
def service(repository: Path) -> InferenceService:
    platform = Platform(predict_route="/vertex/predict", health_route="/vertex/health", default_model=MODEL)
    settings = make_settings(repository, platform=platform)
    return InferenceService(build_dataplane(settings), settings, TracingTelemetry())


@pytest.fixture
def bucket(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # noqa: F811
    name = f"one-service-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    aws_client.cache_clear()
    monkeypatch.setenv("OIP_RESULTS_S3_URI", f"s3://{name}/results/")
    yield name
    aws_client.cache_clear()


def seen(service: InferenceService, send: Callable[[], None]) -> Seen:
    """What ``send`` (one request through one transport) added to the service's statistics and telemetry."""
    telemetry = service.telemetry
    assert isinstance(telemetry, TracingTelemetry)
    before = _counts(service)
    observed, spans = len(telemetry.observations), len(telemetry.spans)
    send()
    after = _counts(service)
    return Seen(
        after[0] - before[0],
        after[1] - before[1],
        telemetry.observations[observed:],
        telemetry.spans[spans:],
    )


def _counts(service: InferenceService) -> tuple[int, int]:
    document = run(service.dataplane.model_statistics(MODEL, "1"))[0]
    return document["inference_stats"]["success"]["count"], document["inference_count"]


def rest(service: InferenceService, method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> None:
    app = create_serving_app(service.dataplane, service.settings, service.telemetry, service=service)

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://oip") as client:
            return await client.request(method, path, json=body, headers=headers)

    answer = run(send())
    assert answer.status_code == 200, answer.text


def grpc_infer(service: InferenceService) -> None:
    held = HeldPort()
    address = f"127.0.0.1:{held.port}"
    request = service_pb2.ModelInferRequest(model_name=MODEL)
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[2])
    tensor.contents.fp32_contents.extend(ROW)

    async def send() -> Any:
        server = build_server(service.dataplane, service.settings, address, service.telemetry, service)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                return await service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
        finally:
            await server.stop(None)

    try:
        response = run(send())
    finally:
        held.close()
    assert response.outputs[0].name == "OUTPUT0"


def sqs(service: InferenceService, bucket: str) -> None:
    message_id = str(uuid.uuid4())
    body = json.dumps({"model_name": MODEL, **V2_REQUEST})
    answer = batch.lambda_handler(lambda_events.sqs_event([(message_id, body)]), LocalLambdaContext(), service)
    assert answer == {"batchItemFailures": []}
    result = boto3.client("s3").get_object(Bucket=bucket, Key=f"results/{MODEL}/{message_id}.json")["Body"].read()
    assert json.loads(result)["outputs"][0]["data"] == ROW


def s3(service: InferenceService, bucket: str) -> None:
    line = json.dumps({"model_name": MODEL, **V2_REQUEST}).encode() + b"\n"
    boto3.client("s3").put_object(Bucket=bucket, Key="input/one.jsonl", Body=line)
    answer = batch.lambda_handler(lambda_events.s3_put_event(bucket, "input/one.jsonl"), LocalLambdaContext(), service)
    assert answer["manifests"][0]["rows_out"] == 1 and answer["manifests"][0]["errors"] == 0


def oip_batch(service: InferenceService, directory: Path) -> None:
    source = directory / "one.jsonl"
    source.write_bytes(json.dumps(V2_REQUEST).encode() + b"\n")
    args: argparse.Namespace = build_parser().parse_args(["batch", str(source), "--model", MODEL, "--quiet"])
    assert predict_file(args, batch_files(source, None), Interrupt(), service) == 0


@pytest.mark.integration
def test_every_transport_is_counted_observed_and_traced_by_the_one_service(
    service: InferenceService, bucket: str, tmp_path: Path
) -> None:
    sagemaker_headers = {"X-Amzn-SageMaker-Custom-Attributes": f"model={MODEL}"}
    exchanges = {
        "rest v2": lambda: rest(service, "POST", f"/v2/models/{MODEL}/infer", V2_REQUEST),
        "v1": lambda: rest(service, "POST", f"/v1/models/{MODEL}:predict", {"instances": ROW}),
        "sagemaker": lambda: rest(service, "POST", "/invocations", V2_REQUEST, sagemaker_headers),
        "vertex": lambda: rest(service, "POST", "/vertex/predict", {"instances": ROW}),
        "grpc": lambda: grpc_infer(service),
        "sqs": lambda: sqs(service, bucket),
    }
    files = {"s3": lambda: s3(service, bucket), "oip batch": lambda: oip_batch(service, tmp_path)}
    results = {name: seen(service, send) for name, send in {**exchanges, **files}.items()}
    for name, found in results.items():
        assert (found.successes, found.inferences) == (1, 1), name  # one request, counted once
        assert [(o.model, o.version, o.status) for o in found.observations] == [(MODEL, "1", 200)], name
        assert found.spans.count("run") == 1, name
    for name in exchanges:  # a request read from the wire: its decoding, encoding and sizes too
        found = results[name]
        assert found.spans == ["decode", "run", "encode"], name
        assert found.observations[0].bytes_in > 0 and found.observations[0].bytes_out > 0, name
