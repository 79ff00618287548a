"""One set of request checks for both transports, and the same configuration and index over REST and gRPC.

Triton's model configuration extension: "GET v2/models/${MODEL_NAME}[/versions/${MODEL_VERSION}]/config" and,
over gRPC, "rpc ModelConfig(ModelConfigRequest) returns (ModelConfigResponse)"; its model repository extension:
"POST v2/repository/index" and "rpc RepositoryIndex(RepositoryIndexRequest) returns (RepositoryIndexResponse)".
"""

# covers: adapters/validation.py
# covers: handler/protocol/model_config.py
# covers: handler/rest/repository.py

from __future__ import annotations

from typing import Any

import grpc
import httpx
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

from tests.support.servers import OipServer

ROW = list(range(16))


def _rest_input(name: str, shape: list[int], data: list[Any], datatype: str = "INT32") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def _grpc_request(inputs: list[dict[str, Any]], outputs: list[str]) -> Any:
    request = service_pb2.ModelInferRequest(model_name="simple")
    for item in inputs:
        tensor = request.inputs.add(name=item["name"], datatype=item["datatype"], shape=item["shape"])
        if item["datatype"] == "INT32":
            tensor.contents.int_contents.extend(item["data"])
    for name in outputs:
        request.outputs.add(name=name)
    return request


GOOD = [_rest_input("INPUT0", [1, 16], ROW), _rest_input("INPUT1", [1, 16], ROW)]
CASES = {
    "duplicate output": (GOOD, ["OUTPUT0", "OUTPUT0"], "output 'OUTPUT0' is requested twice"),
    "duplicate input": ([GOOD[0], GOOD[0]], [], "input 'INPUT0' is given twice"),
    "unknown input": ([GOOD[0], _rest_input("INPUTX", [1, 16], ROW)], [], "has no input 'INPUTX'"),
    "unknown output": (GOOD, ["OUTPUTX"], "has no output 'OUTPUTX'"),
    "wrong shape": ([GOOD[0], _rest_input("INPUT1", [2, 8], ROW)], [], "input 'INPUT1' has shape [2, 8]"),
    "33 dimensions": ([GOOD[0], _rest_input("INPUT1", [1] * 33, [1])], [], "input 'INPUT1' has 33 dimensions"),
    "count overflow": (
        [GOOD[0], _rest_input("INPUT1", [2**32, 2**32], [1])],
        [],
        "input 'INPUT1': shape [4294967296, 4294967296] has more elements than a 64-bit count can hold",
    ),
    "count mismatch": (
        [GOOD[0], _rest_input("INPUT1", [1, 16], ROW[:15])],
        [],
        "tensor 'INPUT1': shape [1, 16] needs 16 elements but the data holds 15",
    ),
    "unknown datatype": ([GOOD[0], _rest_input("INPUT1", [1, 16], ROW, "FP8")], [], "unknown datatype 'FP8'"),
    "no inputs": ([], [], "'inputs' must list at least one tensor"),
}


@pytest.mark.parametrize("case", CASES)
def test_same_check_same_message_on_both_transports(server: OipServer, case: str) -> None:
    inputs, outputs, message = CASES[case]
    body = {"inputs": inputs, "outputs": [{"name": name} for name in outputs]}
    answer = httpx.post(f"{server.url}/v2/models/simple/infer", json=body)
    assert answer.status_code == 400, answer.text
    with grpc.insecure_channel(server.grpc) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(_grpc_request(inputs, outputs))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in answer.json()["error"]
    assert info.value.details() == answer.json()["error"]


def test_data_given_twice_is_refused_by_both_transports(server: OipServer) -> None:
    """REST: ``data`` with ``binary_data_size``; gRPC: "raw_input_contents" with typed ``contents``."""
    header = b'{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":%s,' % str(ROW).encode()
    header += b'"parameters":{"binary_data_size":64}}]}'
    answer = httpx.post(
        f"{server.url}/v2/models/simple/infer",
        content=header + bytes(64),
        headers={"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"},
    )
    request = _grpc_request([_rest_input("INPUT0", [1, 16], ROW), _rest_input("INPUT1", [1, 16], ROW)], [])
    request.raw_input_contents.extend([bytes(64), bytes(64)])
    with grpc.insecure_channel(server.grpc) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert answer.status_code == 400 and info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert answer.json()["error"] == info.value.details()
    assert info.value.details().startswith("input 'INPUT0' has its data twice")


def test_server_metadata_advertises_exactly_what_each_transport_serves(
    server: OipServer, rest: triton_http.InferenceServerClient, grpc_client: triton_grpc.InferenceServerClient
) -> None:
    """Each transport lists the extensions it serves (the other tests here exercise each), no more.

    ``model_versions`` (``GET /v2/models/{m}/versions``) is REST's alone: the V2 gRPC service has no RPC for it.
    """
    served_by_both = ["binary_tensor_data", "parameters", "model_configuration", "statistics", "classification"]
    rpcs = set(service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods_by_name)
    assert not {rpc for rpc in rpcs if "Version" in rpc}
    assert rest.get_server_metadata()["extensions"] == [*served_by_both, "model_versions"]
    assert list(grpc_client.get_server_metadata().extensions) == served_by_both
    assert httpx.get(f"{server.url}/v2/models/simple/versions").status_code == 200


@pytest.mark.parametrize("model", ["simple", "simple_string", "image_classifier", "reshaped"])
def test_model_config_is_the_same_over_grpc(
    rest: triton_http.InferenceServerClient, grpc_client: triton_grpc.InferenceServerClient, model: str
) -> None:
    over_rest = json_format.ParseDict(rest.get_model_config(model), model_config_pb2.ModelConfig())
    over_grpc = grpc_client.get_model_config(model).config
    assert over_grpc == over_rest
    assert over_grpc.name == model and over_grpc.max_batch_size > 0
    if model == "reshaped":
        assert list(over_grpc.input[0].reshape.shape) == [2, 2] and list(over_grpc.input[0].dims) == [4]
    if model == "image_classifier":
        assert over_grpc.output[0].label_filename == "labels.txt"


def test_model_config_of_an_unknown_model_is_not_found(
    rest: triton_http.InferenceServerClient, grpc_client: triton_grpc.InferenceServerClient
) -> None:
    with pytest.raises(triton_grpc.InferenceServerException) as info:
        grpc_client.get_model_config("absent")
    assert (
        info.value.status() == "StatusCode.NOT_FOUND"
        and "Request for unknown model: 'absent' is not found" in info.value.message()
    )


@pytest.mark.parametrize("ready", [False, True])
def test_repository_index_is_the_same_over_grpc(server: OipServer, ready: bool) -> None:
    over_rest = httpx.post(f"{server.url}/v2/repository/index", json={"ready": ready}).json()
    with grpc.insecure_channel(server.grpc) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        over_grpc = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=ready)).models
    assert [(m.name, m.version, m.state, m.reason) for m in over_grpc] == [
        (r["name"], r["version"], r["state"], r.get("reason", "")) for r in over_rest
    ]
    assert {"name": "simple", "version": "1", "state": "READY"} in over_rest


def test_negative_dimensions_are_invalid_on_both_transports(server: OipServer) -> None:
    """REST's schema says dimensions are unsigned; gRPC's int64 shapes are checked in protocol.checks."""
    inputs = [GOOD[0], _rest_input("INPUT1", [-1, 16], ROW)]
    answer = httpx.post(f"{server.url}/v2/models/simple/infer", json={"inputs": inputs})
    with grpc.insecure_channel(server.grpc) as channel, pytest.raises(grpc.RpcError) as info:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(_grpc_request(inputs, []))
    assert answer.status_code == 400 and "inputs.1.shape.0" in answer.json()["error"]
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "input 'INPUT1': shape [-1, 16] has a negative dimension"
