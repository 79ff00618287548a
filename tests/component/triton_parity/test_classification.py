"""Triton's classification extension: "the returned tensor will not be the shape and type produced by the model,
but will instead be type BYTES with shape [ batch-size, <count> ]", each element "<value>:<index>[:<label>]".
REST asks with the output parameter ``"classification": N``, gRPC with ``class_count`` (``int64_param``).
"""

# covers: adapters/repository/labels.py

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.support import parity_repository as repository
from tests.support.servers import OipServer

IMAGES = np.random.default_rng(7).random((2, 3, 8, 8), dtype=np.float32)


def expected(images: np.ndarray, count: int) -> list[list[bytes]]:
    """Top ``count`` of the classifier's softmax per image, formatted as Triton's std::to_string does."""
    logits = images.mean(axis=(2, 3)) @ repository.classifier_weights()
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    rows = []
    for row in probabilities:
        order = np.argsort(-row, kind="stable")[:count]
        rows.append([f"{row[i]:f}:{i}:{repository.LABELS[i]}".encode() for i in order])
    return rows


def _infer(client: Any, module: Any, count: int, binary: bool = True) -> np.ndarray:
    image = module.InferInput("image", list(IMAGES.shape), "FP32")
    image.set_data_from_numpy(IMAGES)
    if module is triton_http:
        output = module.InferRequestedOutput("probabilities", binary_data=binary, class_count=count)
    else:
        output = module.InferRequestedOutput("probabilities", class_count=count)
    return client.infer("image_classifier", [image], outputs=[output]).as_numpy("probabilities")


@pytest.mark.parametrize("count", [1, 3, 10])
def test_top_n_with_labels_same_over_rest_and_grpc(server: OipServer, count: int) -> None:
    over_rest = _infer(triton_http.InferenceServerClient(server.address), triton_http, count)
    over_grpc = _infer(triton_grpc.InferenceServerClient(server.grpc), triton_grpc, count)
    assert over_rest.shape == over_grpc.shape == (2, count)
    assert over_rest.tolist() == over_grpc.tolist()
    got = [[item.split(b":") for item in row] for row in over_rest.tolist()]
    want = [[item.split(b":") for item in row] for row in expected(IMAGES, count)]
    assert [[(i, label) for _, i, label in row] for row in got] == [[(i, lb) for _, i, lb in row] for row in want]
    assert np.allclose([[float(v) for v, _, _ in row] for row in got], [[float(v) for v, _, _ in r] for r in want])


def test_json_response_as_the_extension_text_shows(server: OipServer) -> None:
    body = {
        "inputs": [{"name": "image", "shape": [1, 3, 8, 8], "datatype": "FP32", "data": IMAGES[0].ravel().tolist()}],
        "outputs": [{"name": "probabilities", "parameters": {"classification": 2}}],
    }
    output = httpx.post(f"{server.url}/v2/models/image_classifier/infer", json=body).json()["outputs"][0]
    assert output["datatype"] == "BYTES" and output["shape"] == [1, 2]
    assert output["data"] == [item.decode() for item in expected(IMAGES[:1], 2)[0]]


def test_a_count_over_the_classes_gives_every_class_as_triton_2_51_does(server: OipServer) -> None:
    """Measured on tritonserver 2.51: classification 20 of a 10-element output answers the 10, sorted."""
    over_rest = _infer(triton_http.InferenceServerClient(server.address), triton_http, 11)
    over_grpc = _infer(triton_grpc.InferenceServerClient(server.grpc), triton_grpc, 11)
    assert over_rest.shape == over_grpc.shape == (2, 10)
    assert over_rest.tolist() == over_grpc.tolist()
    assert [[item.split(b":")[1] for item in row] for row in over_rest.tolist()] == [
        [item.split(b":")[1] for item in row] for row in expected(IMAGES, 10)
    ]


def test_unlabelled_integer_output_prints_plain_integers(server: OipServer) -> None:
    """A batch of one: 0..15 + 1, so the top 2 are 16 (index 15) and 15 (index 14), printed as integers."""
    inputs = []
    for name, value in (("INPUT0", np.arange(16)), ("INPUT1", np.ones(16))):
        item = triton_grpc.InferInput(name, [1, 16], "INT32")
        item.set_data_from_numpy(value.astype(np.int32).reshape(1, 16))
        inputs.append(item)
    outputs = [triton_grpc.InferRequestedOutput("OUTPUT0", class_count=2)]
    result = triton_grpc.InferenceServerClient(server.grpc).infer("simple", inputs, outputs=outputs)
    assert result.as_numpy("OUTPUT0").tolist() == [[b"16:15", b"15:14"]]


@pytest.mark.parametrize(
    ("model", "output", "count", "message"),
    [
        ("image_classifier", "probabilities", 2**32, "'classification' 4294967296 is over Triton's limit"),
        ("simple_string", "OUTPUT0", 1, "output 'OUTPUT0' is BYTES: classification needs a numeric output"),
    ],
)
def test_bad_classification_is_invalid_on_both(
    server: OipServer, model: str, output: str, count: int, message: str
) -> None:
    if model == "image_classifier":
        inputs = [{"name": "image", "shape": [1, 3, 8, 8], "datatype": "FP32", "data": [0.5] * 192}]
    else:
        inputs = [{"name": n, "shape": [1, 16], "datatype": "BYTES", "data": ["1"] * 16} for n in ("INPUT0", "INPUT1")]
    body = {"inputs": inputs, "outputs": [{"name": output, "parameters": {"classification": count}}]}
    answer = httpx.post(f"{server.url}/v2/models/{model}/infer", json=body)
    assert answer.status_code == 400 and message in answer.json()["error"]
    grpc_inputs = []
    for item in inputs:
        tensor = triton_grpc.InferInput(item["name"], item["shape"], item["datatype"])
        dtype = np.object_ if item["datatype"] == "BYTES" else np.float32
        tensor.set_data_from_numpy(np.array(item["data"], dtype=dtype).reshape(item["shape"]))
        grpc_inputs.append(tensor)
    with pytest.raises(InferenceServerException) as info:
        triton_grpc.InferenceServerClient(server.grpc).infer(
            model, grpc_inputs, outputs=[triton_grpc.InferRequestedOutput(output, class_count=count)]
        )
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT" and info.value.message() == answer.json()["error"]


@pytest.mark.parametrize("module", [triton_http, triton_grpc], ids=["rest", "grpc"])
def test_a_classified_output_over_a_million_elements_is_tritons_400(server: OipServer, module: Any) -> None:
    """Triton's ``qa/L0_parameters/class_count_test.py`` ``test_classification_output_tensor_too_large``: an
    identity of [1, 1000001] FP32 asked for 5 classes; Triton's ``TopkClassifications`` refuses a batch item of more
    than 1,000,000 elements with ``TRITONSERVER_ERROR_INVALID_ARG``."""
    client = module.InferenceServerClient(server.address if module is triton_http else server.grpc)
    inputs = [module.InferInput("INPUT0", [1, 1_000_001], "FP32")]
    inputs[0].set_data_from_numpy(np.ones((1, 1_000_001), dtype=np.float32))
    outputs = [module.InferRequestedOutput(name="OUTPUT0", class_count=5)]
    with pytest.raises(InferenceServerException) as info:
        client.infer(model_name="identity_fp32", inputs=inputs, outputs=outputs)
    assert "classification output tensor too large" in str(info.value)
    assert info.value.message() == "classification output tensor too large"
    assert info.value.status() == ("400" if module is triton_http else "StatusCode.INVALID_ARGUMENT")


def test_a_million_elements_per_batch_item_are_still_classified(server: OipServer) -> None:
    """The limit is per batch item, as Triton's: two items of 1,000,000 each are classified."""
    data = np.zeros((2, 1_000_000), dtype=np.float32)
    data[0, 999_999], data[1, 7] = 2.0, 3.0
    item = triton_grpc.InferInput("INPUT0", list(data.shape), "FP32")
    item.set_data_from_numpy(data)
    outputs = [triton_grpc.InferRequestedOutput("OUTPUT0", class_count=1)]
    result = triton_grpc.InferenceServerClient(server.grpc).infer("identity_fp32", [item], outputs=outputs)
    assert result.as_numpy("OUTPUT0").tolist() == [[b"2.000000:999999"], [b"3.000000:7"]]
