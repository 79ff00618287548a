"""The V2 gRPC API, driven by ``tritonclient.grpc`` against ``oip serve --grpc-port`` (a real process on 127.0.0.1)."""

# covers: handler/grpc/server.py
# covers: handler/grpc/service.py

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.support.samples import SAMPLES, STATEFUL_CALLS, TABLE_DATATYPES, as_bytes_array
from tests.support.servers import live, oip_serve


@pytest.fixture(scope="module")
def grpc_url(test_repository: Path) -> Iterator[str]:
    with oip_serve(
        "--model-repository", str(test_repository), "--exit-on-error", "false", grpc=True, workers=1, probe=live
    ) as served:
        yield served.grpc


@pytest.mark.parametrize("datatype", TABLE_DATATYPES)
def test_every_datatype_round_trips(grpc_url: str, datatype: str) -> None:
    _, array = SAMPLES[datatype]
    if datatype == "BYTES":
        array = as_bytes_array(array)
    client = triton_grpc.InferenceServerClient(grpc_url)
    item = triton_grpc.InferInput("INPUT0", list(array.shape), datatype)
    item.set_data_from_numpy(array)
    result = client.infer(f"identity_{datatype.lower()}", [item], request_id="g1")
    got = result.as_numpy("OUTPUT0")
    assert result.get_response().id == "g1"
    assert got.tolist() == array.tolist()


def test_health_and_metadata(grpc_url: str) -> None:
    client = triton_grpc.InferenceServerClient(grpc_url)
    assert client.is_server_live()
    assert not client.is_server_ready()  # the test repository holds a model that fails to load
    assert client.is_model_ready("simple") and not client.is_model_ready("corrupt")
    metadata = client.get_model_metadata("versioned", "1", as_json=True)
    assert metadata["versions"] == ["1", "3"] and metadata["platform"] == "onnx_onnxv1"
    assert "binary_tensor_data" in client.get_server_metadata(as_json=True)["extensions"]


def test_typed_contents_instead_of_raw(grpc_url: str) -> None:
    """ "An alternative to the 'raw' representation is to use InferTensorContents" """
    request = service_pb2.ModelInferRequest(model_name="simple", id="typed")
    for name, values in (("INPUT0", range(16)), ("INPUT1", [2] * 16)):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        tensor.contents.int_contents.extend(values)
    with grpc.insecure_channel(grpc_url) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert response.id == "typed" and response.model_version == "1"
    out = {
        o.name: np.frombuffer(raw, np.int32)
        for o, raw in zip(response.outputs, response.raw_output_contents, strict=True)
    }
    assert out["OUTPUT0"].tolist() == [i + 2 for i in range(16)]


@pytest.mark.parametrize(
    ("model", "shape", "datatype", "code", "message"),
    [
        ("absent", [1, 16], "INT32", grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'absent' is not found"),
        ("simple", [2, 8], "INT32", grpc.StatusCode.INVALID_ARGUMENT, "has shape [2, 8]"),
        ("simple", [1, 16], "FP32", grpc.StatusCode.INVALID_ARGUMENT, "has datatype FP32"),
        ("corrupt", [1], "FP32", grpc.StatusCode.UNAVAILABLE, "failed to load"),
    ],
)
def test_errors_carry_grpc_status(
    grpc_url: str, model: str, shape: list[int], datatype: str, code, message: str
) -> None:  # type: ignore[no-untyped-def]
    request = service_pb2.ModelInferRequest(model_name=model)
    for name in ("INPUT0", "INPUT1"):
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(bytes(int(np.prod(shape)) * 4))
    with grpc.insecure_channel(grpc_url) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert info.value.code() == code
    assert message in info.value.details()


def test_typed_contents_out_of_range_is_invalid(grpc_url: str) -> None:
    request = service_pb2.ModelInferRequest(model_name="identity_int8")
    request.inputs.add(name="INPUT0", datatype="INT8", shape=[1, 2]).contents.int_contents.extend([1, 300])
    with grpc.insecure_channel(grpc_url) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "out of range for INT8" in info.value.details()


def _simple_inputs(datatype: str = "INT32", shape: tuple[int, ...] = (1, 16)) -> list[triton_grpc.InferInput]:
    inputs = []
    for name, values in (("INPUT0", np.arange(16)), ("INPUT1", np.full(16, 2))):
        item = triton_grpc.InferInput(name, list(shape), datatype)
        item.set_data_from_numpy(values.reshape(shape).astype(np.float32 if datatype == "FP32" else np.int32))
        inputs.append(item)
    return inputs


def test_stream_infer_answers_each_request_and_goes_on_after_an_error(grpc_url: str) -> None:
    """Triton's streaming inference, with tritonclient's own stream: "the GRPC API adds a streaming version of
    the inference API to allow a sequence of inference requests to be sent over the same GRPC stream ... and may
    be used by requests that do not specify a sequence_id. The ModelInferRequest is the same as for the ModelInfer
    API." A ModelStreamInferResponse's ``error_message``: "The empty message indicates the inference was
    successful without errors." """
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = triton_grpc.InferenceServerClient(grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer("simple", _simple_inputs(), request_id="s1")
        client.async_stream_infer("simple", _simple_inputs("FP32"), request_id="s2")  # refused alone
        client.async_stream_infer("absent", _simple_inputs(), request_id="s3")
        client.async_stream_infer("simple", _simple_inputs(), request_id="s4")
        got = [answers.get(timeout=30) for _ in range(4)]
    finally:
        client.stop_stream()
    (first, no_error), (none2, wrong_type), (none3, unknown), (last, no_error4) = got
    assert no_error is None and no_error4 is None and none2 is None and none3 is None
    assert [first.get_response().id, last.get_response().id] == ["s1", "s4"]  # in the order the requests came
    assert first.as_numpy("OUTPUT0").tolist() == [[i + 2 for i in range(16)]]
    assert last.as_numpy("OUTPUT1").tolist() == [[i - 2 for i in range(16)]]
    assert "has datatype FP32" in wrong_type.message()
    assert "Request for unknown model: 'absent' is not found" in unknown.message()


def test_stream_infer_runs_many_requests_on_one_stream(grpc_url: str) -> None:
    """More requests than the server runs at once on a stream (its window), each answered with its own id."""
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client = triton_grpc.InferenceServerClient(grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    count = 150
    try:
        for index in range(count):
            client.async_stream_infer("simple", _simple_inputs(), request_id=f"r{index}")
        got = [answers.get(timeout=60) for _ in range(count)]
    finally:
        client.stop_stream()
    assert all(error is None for _, error in got)
    assert [result.get_response().id for result, _ in got] == [f"r{index}" for index in range(count)]


def test_stream_infer_with_the_raw_stub(grpc_url: str) -> None:
    """The RPC itself: one ModelStreamInferResponse per ModelInferRequest, the model's version in it."""
    requests = []
    for request_id in ("a", "b"):
        request = service_pb2.ModelInferRequest(model_name="simple", id=request_id)
        for name in ("INPUT0", "INPUT1"):
            request.inputs.add(name=name, datatype="INT32", shape=[1, 16])
            request.raw_input_contents.append(np.ones(16, np.int32).tobytes())
        requests.append(request)
    with grpc.insecure_channel(grpc_url) as channel:
        responses = list(service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(iter(requests)))
    assert [(r.error_message, r.infer_response.id, r.infer_response.model_version) for r in responses] == [
        ("", "a", "1"),
        ("", "b", "1"),
    ]


@pytest.mark.parametrize(("call", "arguments", "phrase"), STATEFUL_CALLS)
def test_triton_stateful_extensions_are_unimplemented_with_a_reason(
    grpc_url: str, call: str, arguments: tuple[object, ...], phrase: str
) -> None:
    """The same refusals over gRPC: UNIMPLEMENTED with our reason, not grpcio's "Method not implemented!"."""
    client = triton_grpc.InferenceServerClient(grpc_url)
    with pytest.raises(InferenceServerException) as info:
        getattr(client, call)(*arguments)
    assert phrase in info.value.message()
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"
