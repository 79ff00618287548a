"""Errors never leak internals, on any transport: no library source paths, no Python class names, no server
filesystem paths. Against ``oip serve --grpc-port`` (REST and gRPC of one real process), an in-process gRPC
server over a backend with a bug, and an S3 repository on moto's standalone server.
"""

# covers: adapters/onnx/messages.py

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from fastapi.testclient import TestClient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from adapters.repository.repository import ModelRepository
from handler.config.settings import Settings
from handler.grpc.server import build_server
from handler.protocol.dataplane import DataPlane
from handler.rest.app import create_app
from handler.server import build_app
from tests.integration.conftest import aws_env, moto_server  # noqa: F401  (fixtures)
from tests.support import onnx_models
from tests.support.buggy_backend import BuggyBackend
from tests.support.servers import HeldPort, OipServer, live, oip_serve, unique_name

#: What an answer must never hold: onnxruntime's sources and C++ names, Python's class names and tracebacks.
INTERNALS = re.compile(
    r"onnxruntime_src|onnxruntime/core|\.(?:h|cc|cpp|py):\d|::|<class |Traceback|DecodeError|Exception\b|"
    r"ONNXRuntimeError|site-packages"
)
GENERIC = re.compile(r"internal server error \(error id ([0-9a-f]{16})\); the server log has the details")
SERVICE = "/inference.GRPCInferenceService"


def assert_no_internals(text: str, *paths: Path) -> None:
    assert INTERNALS.search(text) is None, text
    for path in paths:
        assert str(path) not in text, text


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``fixed_reshape`` fails at run time for any element count but 4; ``corrupt`` is not an ONNX file."""
    root = tmp_path_factory.mktemp("leaks")
    onnx_models.save(onnx_models.fixed_reshape(), root, "fixed_reshape")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "identity")
    (root / "corrupt" / "1").mkdir(parents=True)
    (root / "corrupt" / "1" / "model.onnx").write_bytes(b"this is not an onnx file")
    return root


@pytest.fixture(scope="module")
def served(repository: Path) -> Iterator[OipServer]:
    with oip_serve(
        "--model-repository", str(repository), "--exit-on-error", "false", grpc=True, workers=1, probe=live
    ) as found:
        yield found


def _rest_infer(served: OipServer, model: str, count: int) -> httpx.Response:
    document = {"inputs": [{"name": "INPUT0", "shape": [count], "datatype": "FP32", "data": [1.0] * count}]}
    return httpx.post(f"{served.url}/v2/models/{model}/infer", json=document, timeout=30)


def _grpc_infer(served: OipServer, model: str, count: int) -> InferenceServerException:
    client = triton_grpc.InferenceServerClient(served.grpc)
    item = triton_grpc.InferInput("INPUT0", [count], "FP32")
    item.set_data_from_numpy(np.ones(count, np.float32))
    with pytest.raises(InferenceServerException) as failed:
        client.infer(model, [item])
    return failed.value


def test_a_model_failing_at_run_time_answers_without_onnxruntimes_sources(served: OipServer, repository: Path) -> None:
    response = _rest_infer(served, "fixed_reshape", 5)
    assert response.status_code == 500
    message = response.json()["error"]
    assert message.startswith("model 'fixed_reshape' failed while running: ")
    assert "The input tensor cannot be reshaped to the requested shape. Input shape:{5}, requested shape:{2,2}" in (
        message
    )
    assert_no_internals(message, repository)
    error = _grpc_infer(served, "fixed_reshape", 5)
    assert error.status() == "StatusCode.INTERNAL"
    assert error.message() == message


def test_a_model_that_cannot_load_is_named_without_the_servers_path(served: OipServer, repository: Path) -> None:
    response = _rest_infer(served, "corrupt", 1)
    assert response.status_code == 503
    message = response.json()["error"]
    assert message.startswith("model 'corrupt' version 1 failed to load: ") and "model.onnx" in message
    assert_no_internals(message, repository)
    error = _grpc_infer(served, "corrupt", 1)
    assert (error.status(), error.message()) == ("StatusCode.UNAVAILABLE", message)
    rows = httpx.post(f"{served.url}/v2/repository/index", timeout=30).json()
    grpc_rows = triton_grpc.InferenceServerClient(served.grpc).get_model_repository_index(as_json=True)["models"]
    for text in (str(rows), str(grpc_rows), httpx.get(f"{served.url}/v2/models/corrupt/versions/1/resource").text):
        assert_no_internals(text, repository)


def test_version_resources_show_the_path_inside_the_repository(served: OipServer, repository: Path) -> None:
    (resource,) = httpx.get(f"{served.url}/v2/models/identity/versions", timeout=30).json()["versions"]
    assert resource["deploymentUri"] == "identity/1"
    failed = httpx.get(f"{served.url}/v2/models/corrupt/versions/1/resource", timeout=30).json()
    assert failed["state"] == "FAILED" and failed["deploymentUri"] == "corrupt/1"
    assert_no_internals(str(failed), repository)


def _valid_request() -> bytes:
    request = service_pb2.ModelInferRequest(model_name="identity", id="ok")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[2])
    request.raw_input_contents.append(np.array([1.0, 2.0], np.float32).tobytes())
    return request.SerializeToString()


MALFORMED = {
    "garbage": b"\xff\xff\xff\xff",
    "truncated": _valid_request()[:-3],
    "invalid UTF-8 in a string field": service_pb2.ModelInferRequest(model_name="x").SerializeToString()[:-1] + b"\xff",
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_protobuf_is_invalid_argument_with_a_plain_message(served: OipServer, body: bytes) -> None:
    async def call() -> grpc.aio.AioRpcError:
        async with grpc.aio.insecure_channel(served.grpc) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await channel.unary_unary(f"{SERVICE}/ModelInfer")(body, timeout=30)
            assert (await channel.unary_unary(f"{SERVICE}/ModelInfer")(_valid_request(), timeout=30)) != b""
        return failed.value

    error = asyncio.run(call())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "the request is not a valid inference.ModelInferRequest protobuf message"


def test_a_malformed_message_in_a_stream_is_answered_and_the_stream_goes_on(served: OipServer) -> None:
    async def call() -> list[Any]:
        async with grpc.aio.insecure_channel(served.grpc) as channel:
            stream = channel.stream_stream(f"{SERVICE}/ModelStreamInfer")
            answers = [answer async for answer in stream(iter([_valid_request(), b"\xff\xff", _valid_request()]))]
        return [service_pb2.ModelStreamInferResponse.FromString(answer) for answer in answers]

    first, malformed, last = asyncio.run(call())
    assert first.error_message == last.error_message == ""
    assert first.infer_response.id == last.infer_response.id == "ok"
    assert malformed.error_message == "the request is not a valid inference.ModelInferRequest protobuf message"


# -- an unexpected exception (a bug) -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def buggy_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("buggy")
    for name in ("buggy", "buggy_metadata"):
        onnx_models.save(onnx_models.identity("FP32", [1]), root, name)
    return root


def _buggy_request() -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="buggy")
    request.inputs.add(name="x", datatype="FP32", shape=[1])
    request.raw_input_contents.append(np.ones(1, np.float32).tobytes())
    return request


def _logged(caplog: pytest.LogCaptureFixture, error_id: str) -> logging.LogRecord:
    (record,) = [r for r in caplog.records if error_id in r.getMessage()]
    return record


def test_an_unexpected_exception_in_a_grpc_handler_is_internal_with_an_error_id(
    buggy_repository: Path, caplog: pytest.LogCaptureFixture
) -> None:
    held = HeldPort()  # the gRPC server binds beside it
    address = f"127.0.0.1:{held.port}"

    async def calls() -> tuple[grpc.aio.AioRpcError, grpc.aio.AioRpcError, Any]:
        server = build_server(DataPlane(ModelRepository(buggy_repository, BuggyBackend)), Settings(), address)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                infer = channel.unary_unary(
                    f"{SERVICE}/ModelInfer",
                    request_serializer=service_pb2.ModelInferRequest.SerializeToString,
                    response_deserializer=service_pb2.ModelInferResponse.FromString,
                )
                metadata = channel.unary_unary(
                    f"{SERVICE}/ModelMetadata",
                    request_serializer=service_pb2.ModelMetadataRequest.SerializeToString,
                    response_deserializer=service_pb2.ModelMetadataResponse.FromString,
                )
                stream = channel.stream_stream(
                    f"{SERVICE}/ModelStreamInfer",
                    request_serializer=service_pb2.ModelInferRequest.SerializeToString,
                    response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
                )
                with pytest.raises(grpc.aio.AioRpcError) as unary:
                    await infer(_buggy_request(), timeout=30)
                with pytest.raises(grpc.aio.AioRpcError) as other:
                    await metadata(service_pb2.ModelMetadataRequest(name="buggy_metadata"), timeout=30)
                (streamed,) = [answer async for answer in stream(iter([_buggy_request()]), timeout=30)]
        finally:
            await server.stop(None)
        return unary.value, other.value, streamed

    with held, caplog.at_level(logging.ERROR):
        unary, other, streamed = asyncio.run(calls())
    for error in (unary, other):
        assert error.code() == grpc.StatusCode.INTERNAL
        found = GENERIC.fullmatch(error.details() or "")
        assert found is not None, error.details()
        assert "secret" in str(_logged(caplog, found[1]).exc_info)
    found = GENERIC.fullmatch(streamed.error_message)
    assert found is not None, streamed.error_message
    assert "secret internal detail" in str(_logged(caplog, found[1]).exc_info)


def test_an_unexpected_exception_on_rest_is_a_500_with_an_error_id(
    buggy_repository: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(DataPlane(ModelRepository(buggy_repository, BuggyBackend)))
    with TestClient(app, raise_server_exceptions=False) as client, caplog.at_level(logging.ERROR):
        answers = [
            client.post("/v2/models/buggy/infer", json={"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
                                                                    "data": [1]}]}),
            client.get("/v2/models/buggy_metadata"),
        ]  # fmt: skip
    for response in answers:
        assert response.status_code == 500
        found = GENERIC.fullmatch(response.json()["error"])
        assert found is not None, response.text
        assert "secret" in str(_logged(caplog, found[1]).exc_info)
        assert_no_internals(response.text)


# -- an object-store repository ------------------------------------------------------------------------------------


@pytest.mark.integration
def test_version_resources_of_an_s3_repository_show_its_uri(
    aws_env: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    s3 = boto3.client("s3")
    bucket = unique_name("leaks")
    s3.create_bucket(Bucket=bucket)
    model = onnx_models.identity("FP32", [-1]).SerializeToString()
    s3.put_object(Bucket=bucket, Key="prod/repo/identity/1/model.onnx", Body=model)
    settings = Settings(model_repository=f"s3://{bucket}/prod/repo/", cache_dir=str(tmp_path))
    with TestClient(build_app(settings)) as client:
        (resource,) = client.get("/v2/models/identity/versions").json()["versions"]
    assert resource["deploymentUri"] == f"s3://{bucket}/prod/repo/identity/1"
    assert str(tmp_path) not in str(resource)
