"""Wire compatibility with the reference client: bytes made by tritonclient decode here, and ours parse there.

``InferenceServerClient.generate_request_body`` and ``parse_response_body`` need no server.
"""

# covers: handler/codecs/content_types/wire.py

from __future__ import annotations

import numpy as np
import orjson
import pytest
import tritonclient.http as triton_http

from adapters.errors import InvalidInput
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor, TensorSpec
from handler.codecs.request import decode_infer_request, decode_raw_request
from handler.codecs.response import encode_infer_response
from tests.support.samples import SAMPLES, TABLE_DATATYPES, as_bytes_array

LIMIT = 64 * 1024 * 1024


def _triton_input(name: str, datatype: str, array: np.ndarray, binary: bool) -> triton_http.InferInput:
    item = triton_http.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=binary)
    return item


#: tritonclient refuses FP16 as JSON in both directions (the JSON-number tests cover ours).
CLIENT_CASES = [
    pytest.param(datatype, binary, id=f"{datatype}-{'binary' if binary else 'json'}")
    for datatype in TABLE_DATATYPES
    for binary in (True, False)
    if binary or datatype != "FP16"
]


@pytest.mark.parametrize(("datatype", "binary"), CLIENT_CASES)
def test_tritonclient_request_decodes(datatype: str, binary: bool) -> None:
    _, array = SAMPLES[datatype]
    if datatype == "BYTES":
        array = as_bytes_array(array)
    body, json_size = triton_http.InferenceServerClient.generate_request_body(
        [_triton_input("x", datatype, array, binary)],
        outputs=[triton_http.InferRequestedOutput("y", binary_data=binary)],
        request_id="req-1",
        parameters={"custom": "value"},
    )
    call = decode_infer_request(body, json_size, LIMIT)
    assert call.id == "req-1"
    assert call.parameters == {"custom": "value"}
    assert call.outputs == (RequestedOutput("y", binary),)
    (tensor,) = call.inputs
    assert (tensor.name, tensor.datatype, tensor.shape) == ("x", datatype, (2, 3))
    expected = array.tolist()
    got = tensor.data.tolist()
    if datatype == "BYTES":
        got = [[v.encode() if isinstance(v, str) else v for v in row] for row in got]
    assert got == expected


@pytest.mark.parametrize(("datatype", "binary"), CLIENT_CASES)
def test_our_response_parses_in_tritonclient(datatype: str, binary: bool) -> None:
    _, array = SAMPLES[datatype]
    result = InferResult("m", "3", (Tensor("y", datatype, (2, 3), array),), "req-9")
    call = InferCall((), (RequestedOutput("y", binary),))
    body, json_size = encode_infer_response(result, call)
    parsed = triton_http.InferenceServerClient.parse_response_body(body, header_length=json_size)
    assert parsed.get_response()["id"] == "req-9"
    assert parsed.get_response()["model_version"] == "3"
    got = parsed.as_numpy("y")
    if datatype == "BYTES":  # tritonclient yields bytes from binary, str from JSON
        assert got.tolist() == (as_bytes_array(array) if binary else array).tolist()
    else:
        assert got.dtype == array.dtype and np.array_equal(got, array)


def test_binary_data_output_applies_to_all_unless_overridden() -> None:
    # "binary_data_output": all outputs binary "unless overridden by 'binary_data' on a specific output".
    a = Tensor("a", "INT32", (2,), np.array([1, 2], np.int32))
    b = Tensor("b", "INT32", (2,), np.array([3, 4], np.int32))
    call = InferCall((), (RequestedOutput("a"), RequestedOutput("b", False)), parameters={"binary_data_output": True})
    body, json_size = encode_infer_response(InferResult("m", "1", (a, b)), call)
    assert json_size is not None
    header = orjson.loads(body[:json_size])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert "data" not in header["outputs"][0]
    assert header["outputs"][1]["data"] == [3, 4]
    assert body[json_size:] == np.array([1, 2], np.int32).tobytes()


def test_all_json_response_has_no_header_length() -> None:
    result = InferResult("m", "1", (Tensor("a", "FP32", (1,), np.array([0.5], np.float32)),), "x")
    body, json_size = encode_infer_response(result, InferCall(()))
    assert json_size is None
    assert orjson.loads(body) == {
        "id": "x",
        "model_name": "m",
        "model_version": "1",
        "outputs": [{"name": "a", "datatype": "FP32", "shape": [1], "data": [0.5]}],
    }


def _request(**fields: object) -> bytes:
    return orjson.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}], **fields})


@pytest.mark.parametrize(
    ("body", "header", "message"),
    [
        (b"{", None, "malformed JSON"),
        (b"[]", None, "must be a JSON object"),
        (b"{}", None, "inputs: Field required"),
        (orjson.dumps({"inputs": []}), None, "at least one tensor"),
        (_request(id=5), None, "id: Input should be a valid string"),
        (_request(parameters={"k": [1]}), None, "parameters"),
        (orjson.dumps({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]}), None, "shape.0"),
        (orjson.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}), None, "must be a JSON array"),
        (orjson.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "F32", "data": [1]}]}), None, "datatype"),
        (_request() + b"\x00\x00", len(_request()), "2 bytes after the tensors"),
        (_request(), 10_000, "larger than the body"),
        (
            orjson.dumps(
                {"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}
            ),
            None,
            "runs past the end",
        ),
        (
            orjson.dumps(
                {
                    "inputs": [
                        {
                            "name": "x",
                            "shape": [1],
                            "datatype": "FP32",
                            "data": [1],
                            "parameters": {"binary_data_size": 4},
                        }
                    ]
                }
            )
            + bytes(4),
            None,
            "has its data twice",
        ),
        (_request(outputs=[{"name": "a"}, {"name": "a"}]), None, "requested twice"),
        (_request(outputs=[{"name": "a", "parameters": {"binary_data": 1}}]), None, "true or false"),
    ],
)
def test_bad_requests_are_invalid_input(body: bytes, header: int | None, message: str) -> None:
    if header is None and b"binary_data_size" in body and b'"data"' not in body:
        header = len(body)
    if b"data twice" in message.encode():
        header = len(body) - 4
    with pytest.raises(InvalidInput, match=message):
        decode_infer_request(body, header, LIMIT)


def test_raw_request_deduces_the_variable_dimension() -> None:
    body = np.arange(6, dtype=np.float32).tobytes()
    call = decode_raw_request(body, TensorSpec("x", "FP32", (-1, 3)), LIMIT)
    assert call.inputs[0].shape == (2, 3)
    assert call.binary_output_default is True
    with pytest.raises(InvalidInput, match="does not fit"):
        decode_raw_request(body[:-4], TensorSpec("x", "FP32", (-1, 3)), LIMIT)
    with pytest.raises(InvalidInput, match="more than one variable"):
        decode_raw_request(body, TensorSpec("x", "FP32", (-1, -1)), LIMIT)


def test_raw_bytes_request_is_one_element() -> None:
    call = decode_raw_request("héllo".encode(), TensorSpec("x", "BYTES", (1,)), LIMIT)
    assert call.inputs[0].shape == (1,)
    assert call.inputs[0].data.tolist() == ["héllo".encode()]
    with pytest.raises(InvalidInput, match=r"the model must have input shape \[1\]"):
        decode_raw_request(b"x", TensorSpec("x", "BYTES", (-1,)), LIMIT)
