"""config.pbtxt ``reshape`` and raw binary requests, as Triton applies them.

model_configuration.md: "the reshape property must be used to specify the shape ... the model expects", and the
client keeps sending ``dims``. extension_binary_data.md, Raw Binary Request: "if the model supports batching,
the request will be treated as batch-1 request" and "If the data type is BYTE, the shape must be [1]".
"""

from __future__ import annotations

import httpx
import numpy as np
import orjson
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http

from tests.support.servers import OipServer


def test_reshape_both_ways_over_rest_and_grpc(server: OipServer) -> None:
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    # The model sees [[a, b], [c, d]] per item and transposes it; the client gets dims [4] back.
    want = np.stack([row.reshape(2, 2).T.ravel() for row in data])
    for client, module in (
        (triton_http.InferenceServerClient(server.address), triton_http),
        (triton_grpc.InferenceServerClient(server.grpc), triton_grpc),
    ):
        item = module.InferInput("INPUT0", [2, 4], "FP32")
        item.set_data_from_numpy(data)
        got = client.infer("reshaped", [item]).as_numpy("OUTPUT0")
        assert got.shape == (2, 4) and np.array_equal(got, want)
    metadata = triton_http.InferenceServerClient(server.address).get_model_metadata("reshaped")
    assert metadata["inputs"][0]["shape"] == [-1, 4] and metadata["outputs"][0]["shape"] == [-1, 4]


def _raw(server: OipServer, model: str, body: bytes) -> httpx.Response:
    headers = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}
    return httpx.post(f"{server.url}/v2/models/{model}/infer", content=body, headers=headers)


def test_raw_request_on_a_batching_model_is_batch_one(server: OipServer) -> None:
    image = np.random.default_rng(1).random((3, 8, 8), dtype=np.float32)
    answer = _raw(server, "image_classifier", image.tobytes())
    assert answer.status_code == 200, answer.text
    length = int(answer.headers["inference-header-content-length"])
    assert orjson.loads(answer.content[:length])["outputs"][0]["shape"] == [1, 10]
    assert np.isclose(np.frombuffer(answer.content[length:], np.float32).sum(), 1.0)
    assert _raw(server, "image_classifier", image.tobytes() * 2).status_code == 400


def test_raw_bytes_only_where_the_shape_is_one(server: OipServer) -> None:
    answer = _raw(server, "raw_string", "héllo".encode())
    assert answer.status_code == 200, answer.text
    length = int(answer.headers["inference-header-content-length"])
    assert answer.content[length:] == len("héllo".encode()).to_bytes(4, "little") + "héllo".encode()
    refused = _raw(server, "raw_strings", b"two elements?")
    assert refused.status_code == 400
    assert refused.json()["error"] == (
        "[request id: <id_unknown>] For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"
    )
