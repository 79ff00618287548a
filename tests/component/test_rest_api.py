"""Every REST endpoint of the protocol, with and without ``/versions/{v}``, over real onnxruntime sessions."""

# covers: handler/rest/health.py
# covers: handler/rest/infer_entry.py
# covers: handler/rest/inference.py
# covers: handler/rest/metadata.py
# covers: handler/rest/responses.py

from __future__ import annotations

import gzip
import uuid
import zlib
from pathlib import Path

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from handler.config.settings import Settings
from handler.server import build_app

SIMPLE_INPUTS = [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
]


def infer(client: TestClient, model: str, document: dict, **kwargs: object):
    return client.post(f"/v2/models/{model}/infer", content=orjson.dumps(document),
                       headers={"Content-Type": "application/json"}, **kwargs)  # fmt: skip


# Health: "A 200 status code indicates true and a 4xx status code indicates false."


def test_server_live(client: TestClient) -> None:
    response = client.get("/v2/health/live")
    assert (response.status_code, response.json()) == (200, {"live": True})


def test_server_ready_is_true_when_every_model_is(demo_client: TestClient) -> None:
    response = demo_client.get("/v2/health/ready")
    assert (response.status_code, response.json()) == (200, {"ready": True})


def test_server_ready_is_false_with_a_model_that_failed_to_load(client: TestClient) -> None:
    # "The 'server ready' health API indicates if all the models are ready for inferencing."
    response = client.get("/v2/health/ready")
    assert (response.status_code, response.json()) == (400, {"ready": False})


@pytest.mark.parametrize("path", ["/v2/models/simple/ready", "/v2/models/versioned/versions/1/ready"])
def test_model_ready(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.json()["ready"] is True


def test_model_not_ready_is_4xx(client: TestClient) -> None:
    response = client.get("/v2/models/corrupt/ready")
    assert (response.status_code, response.json()) == (400, {"name": "corrupt", "ready": False})


@pytest.mark.parametrize("path", ["/v2/models/nope/ready", "/v2/models/versioned/versions/2/ready"])
def test_model_ready_unknown_is_404(client: TestClient, path: str) -> None:
    assert client.get(path).status_code == 404


def test_server_metadata_lists_supported_extensions(client: TestClient) -> None:
    response = client.get("/v2")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "oip-serverless" and body["version"]
    assert {"binary_tensor_data", "parameters"} <= set(body["extensions"])


def test_server_name_comes_from_oip_server_name(monkeypatch: pytest.MonkeyPatch, test_repository: Path) -> None:
    """Triton's simple_{http,grpc}_health_metadata examples require the name "triton"; a deployment that runs them
    says so with ``OIP_SERVER_NAME`` (the V2 spec: "name" : "A descriptive name for the server")."""
    monkeypatch.setenv("OIP_SERVER_NAME", "triton")
    with TestClient(build_app(Settings.from_env(model_repository=str(test_repository)))) as named:
        assert named.get("/v2").json()["name"] == "triton"


def test_model_metadata(client: TestClient) -> None:
    response = client.get("/v2/models/simple")
    assert response.status_code == 200
    assert response.json() == {
        "name": "simple",
        "versions": ["1"],
        "platform": "onnx_onnxv1",
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16]},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]},
            {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16]},
        ],
    }


def test_model_metadata_versions_and_dynamic_dims(client: TestClient) -> None:
    for path in ("/v2/models/versioned", "/v2/models/versioned/versions/1", "/v2/models/versioned/versions/3"):
        body = client.get(path).json()
        assert body["versions"] == ["1", "3"]
        assert body["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}]


def test_model_metadata_with_batch_dimension_from_config(client: TestClient) -> None:
    body = client.get("/v2/models/batched").json()
    assert body["inputs"][0]["shape"] == [-1, 3]


def test_model_config(client: TestClient) -> None:
    body = client.get("/v2/models/batched/config").json()
    assert body["max_batch_size"] == 4
    assert body["input"] == [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [3]}]


# Inference


def test_infer_simple(client: TestClient) -> None:
    response = infer(client, "simple", {"id": "42", "inputs": SIMPLE_INPUTS})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["id"] == "42"
    assert body["model_name"] == "simple" and body["model_version"] == "1"
    assert body["outputs"] == [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16], "data": [i + 1 for i in range(16)]},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16], "data": [i - 1 for i in range(16)]},
    ]


def test_infer_without_id_still_answers_an_id(client: TestClient) -> None:
    answers = [infer(client, "simple", {"inputs": SIMPLE_INPUTS}) for _ in range(2)]
    assert [answer.status_code for answer in answers] == [200, 200]
    ids = [answer.json()["id"] for answer in answers]
    assert [str(uuid.UUID(each)) for each in ids] == ids and ids[0] != ids[1]  # a UUID of its own each
    assert [o["name"] for o in answers[0].json()["outputs"]] == ["OUTPUT0", "OUTPUT1"]


def test_outputs_filter_and_order(client: TestClient) -> None:
    # "outputs": "The output tensors requested for this inference."
    body = infer(client, "simple", {"inputs": SIMPLE_INPUTS, "outputs": [{"name": "OUTPUT1"}]}).json()
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT1"]
    both = [{"name": "OUTPUT1"}, {"name": "OUTPUT0"}]
    body = infer(client, "simple", {"inputs": SIMPLE_INPUTS, "outputs": both}).json()
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT1", "OUTPUT0"]


def test_parameters_are_accepted(client: TestClient) -> None:
    inputs = [{**SIMPLE_INPUTS[0], "parameters": {"p": 1}}, SIMPLE_INPUTS[1]]
    document = {
        "parameters": {"s": "x", "n": 1.5, "b": True},
        "inputs": inputs,
        "outputs": [{"name": "OUTPUT0", "parameters": {"k": "v"}}],
    }
    assert infer(client, "simple", document).status_code == 200


def test_nested_data_is_accepted(client: TestClient) -> None:
    # "Tensor elements may be presented in their nature multi-dimensional representation"
    nested = [{**SIMPLE_INPUTS[0], "data": [list(range(16))]}, {**SIMPLE_INPUTS[1], "data": [[1] * 16]}]
    assert infer(client, "simple", {"inputs": nested}).json()["outputs"][0]["data"][:3] == [1, 2, 3]


@pytest.mark.parametrize(
    ("path", "version"), [("versioned", "3"), ("versioned/versions/1", "1"), ("versioned/versions/3", "3")]
)
def test_model_version_in_response(client: TestClient, path: str, version: str) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
    response = client.post(f"/v2/models/{path}/infer", json=document)
    assert response.status_code == 200
    assert response.json()["model_version"] == version


def test_fp16_json_numbers_are_converted(client: TestClient) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP16", "data": [1.5, -0.25]}]}
    body = infer(client, "identity_fp16", document).json()
    assert body["outputs"][0]["data"] == [1.5, -0.25]


def test_bytes_json_non_ascii(client: TestClient) -> None:
    document = {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "BYTES", "data": ["日本", "é"]}]}
    assert infer(client, "identity_bytes", document).json()["outputs"][0]["data"] == ["日本", "é"]


def test_batch_dimension_is_checked(client: TestClient) -> None:
    ok = {"inputs": [{"name": "INPUT0", "shape": [4, 3], "datatype": "FP32", "data": [0.0] * 12}]}
    assert infer(client, "batched", ok).status_code == 200
    over = {"inputs": [{"name": "INPUT0", "shape": [5, 3], "datatype": "FP32", "data": [0.0] * 15}]}
    response = infer(client, "batched", over)
    assert response.status_code == 400
    assert "batch size 5 over the model's max_batch_size 4" in response.json()["error"]


# Binary tensor data extension over HTTP


def test_binary_request_and_response(client: TestClient) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    header = orjson.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
        }
    )
    response = client.post(
        "/v2/models/simple/infer",
        content=header + a.tobytes() + b.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 200
    length = int(response.headers["Inference-Header-Content-Length"])
    document = orjson.loads(response.content[:length])
    assert document["outputs"][0]["parameters"] == {"binary_data_size": 64}
    assert "data" not in document["outputs"][0]
    assert document["outputs"][1]["data"] == (a - b).ravel().tolist()
    assert np.array_equal(np.frombuffer(response.content[length:], np.int32), (a + b).ravel())


def test_raw_binary_request(client: TestClient) -> None:
    # Inference-Header-Content-Length: 0 -> the whole body is the single input's raw tensor.
    data = np.arange(6, dtype=np.float32)
    response = client.post(
        "/v2/models/versioned/infer", content=data.tobytes(), headers={"Inference-Header-Content-Length": "0"}
    )
    assert response.status_code == 200
    length = int(response.headers["Inference-Header-Content-Length"])
    document = orjson.loads(response.content[:length])
    assert document["outputs"][0]["shape"] == [6]
    assert np.array_equal(np.frombuffer(response.content[length:], np.float32), data)


def test_raw_binary_request_needs_a_single_input_model(client: TestClient) -> None:
    response = client.post(
        "/v2/models/simple/infer", content=bytes(128), headers={"Inference-Header-Content-Length": "0"}
    )
    assert response.status_code == 400
    assert "needs a model with one input" in response.json()["error"]


# Compression


@pytest.mark.parametrize(("encoding", "compressor"), [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_compressed_request_and_response(client: TestClient, encoding: str, compressor) -> None:
    body = compressor(orjson.dumps({"inputs": SIMPLE_INPUTS}))
    response = client.post(
        "/v2/models/simple/infer",
        content=body,
        headers={"Content-Encoding": encoding, "Accept-Encoding": encoding, "Content-Type": "application/json"},
    )
    assert response.status_code == 200
    assert response.headers["content-encoding"] == encoding
    assert response.json()["outputs"][0]["data"][0] == 1  # httpx decodes the response


# Errors: always {"error": "..."} with a fitting status


def _single(name: str, shape: list[int], datatype: str, data: list) -> bytes:
    return orjson.dumps({"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]})


@pytest.mark.parametrize(
    ("model", "body", "status", "message"),
    [
        ("simple", b"{not json", 400, "malformed JSON"),
        ("simple", b'{"inputs": "x"}', 400, "inputs: Input should be a valid list"),
        ("simple", orjson.dumps({"inputs": [{**SIMPLE_INPUTS[0], "data": [1, 2]}, SIMPLE_INPUTS[1]]}), 400,
         "needs 16 elements but the data holds 2"),
        ("simple", orjson.dumps({"inputs": [{**SIMPLE_INPUTS[0], "datatype": "FP32"}, SIMPLE_INPUTS[1]]}), 400,
         "has datatype FP32 but the model expects INT32"),
        ("simple", orjson.dumps({"inputs": [{**SIMPLE_INPUTS[0], "shape": [2, 8]}, SIMPLE_INPUTS[1]]}), 400,
         "has shape [2, 8] but the model expects [1, 16]"),
        ("simple", orjson.dumps({"inputs": [{**SIMPLE_INPUTS[0], "name": "INPUTX"}, SIMPLE_INPUTS[1]]}), 400,
         "has no input 'INPUTX'"),
        ("simple", orjson.dumps({"inputs": SIMPLE_INPUTS[:1]}), 400, "needs input(s) ['INPUT1']"),
        ("simple", orjson.dumps({"inputs": SIMPLE_INPUTS, "outputs": [{"name": "OUT"}]}), 400, "has no output 'OUT'"),
        ("nope", orjson.dumps({"inputs": SIMPLE_INPUTS}), 404, "Request for unknown model: 'nope' is not found"),
        ("versioned/versions/2", orjson.dumps({"inputs": SIMPLE_INPUTS}), 404, "'versioned' version 2 is not found"),
        ("simple", _single("a", [100000, 100000], "FP64", [1]), 413, "would need 80000000000 bytes"),
        ("corrupt", orjson.dumps({"inputs": SIMPLE_INPUTS}), 503, "failed to load"),
        ("fixed_reshape", _single("INPUT0", [3], "FP32", [1, 2, 3]), 500, "failed while running"),
    ],
)  # fmt: skip
def test_error_statuses(client: TestClient, model: str, body: bytes, status: int, message: str) -> None:
    response = client.post(f"/v2/models/{model}/infer", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert list(response.json()) == ["error"]
    assert message in response.json()["error"]
    assert "Traceback" not in response.text


def test_body_over_the_limit_is_413(client: TestClient) -> None:
    response = client.post("/v2/models/simple/infer", content=b" " * (1024 * 1024 + 1))
    assert response.status_code == 413
    assert "over the limit of 1048576 bytes" in response.json()["error"]


def test_unsupported_content_type_is_415(client: TestClient) -> None:
    response = client.post("/v2/models/simple/infer", content=b"<xml/>", headers={"Content-Type": "text/xml"})
    assert response.status_code == 415
    assert "Content-Type 'text/xml' is not supported" in response.json()["error"]


def test_unknown_route_and_method(client: TestClient) -> None:
    assert client.get("/v3").json() == {"error": "no such endpoint: GET /v3"}
    response = client.get("/v2/models/simple/infer")
    assert response.status_code == 405 and "not allowed" in response.json()["error"]


def test_metadata_errors(client: TestClient) -> None:
    assert client.get("/v2/models/nope").status_code == 404
    assert client.get("/v2/models/versioned/versions/7").status_code == 404
    response = client.get("/v2/models/corrupt")
    assert response.status_code == 503 and "failed to load" in response.json()["error"]


def test_load_and_unload_are_refused_clearly(client: TestClient) -> None:
    response = client.post("/v2/repository/models/simple/load")
    assert response.status_code == 501 and "stateless" in response.json()["error"]


def test_repository_index(client: TestClient) -> None:
    rows = client.post("/v2/repository/index").json()
    states = {(row["name"], row["version"]): row["state"] for row in rows}
    assert states[("simple", "1")] == "READY"
    assert states[("corrupt", "1")] == "UNAVAILABLE"
    ready = client.post("/v2/repository/index", json={"ready": True}).json()
    assert all(row["state"] == "READY" for row in ready)


def test_openapi_documents_the_v2_schema(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    document = client.get("/openapi.json").json()
    assert "InferenceRequest" in document["components"]["schemas"]
    infer_body = document["paths"]["/v2/models/{model_name}/infer"]["post"]["requestBody"]
    assert infer_body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/InferenceRequest"}


def test_non_utf8_bytes_into_an_onnx_string_tensor_is_400(client: TestClient) -> None:
    header = orjson.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES", "parameters": {"binary_data_size": 5}}]}
    )
    response = client.post(
        "/v2/models/identity_bytes/infer",
        content=header + b"\x01\x00\x00\x00\x80",
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status_code == 400
    assert "not valid UTF-8" in response.json()["error"]


def test_openapi_documents_responses_and_errors(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    infer = paths["/v2/models/{model_name}/versions/{model_version}/infer"]["post"]["responses"]
    assert infer["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/InferenceResponse"}
    assert infer["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    assert "422" not in infer
    assert (
        "MetadataServerResponse"
        in paths["/v2"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    )


@pytest.mark.parametrize(
    ("path", "body", "headers", "status"),
    [
        ("/v2/models/simple/infer", b"{not json", {"Content-Type": "application/json"}, 400),
        ("/v2/models/nope/infer", orjson.dumps({"inputs": SIMPLE_INPUTS}), {}, 404),
        ("/v2/models/simple/infer", b" " * (1024 * 1024 + 1), {}, 413),
        ("/v2/models/simple/infer", b"<x/>", {"Content-Type": "text/xml"}, 415),
        ("/v2/models/corrupt/infer", orjson.dumps({"inputs": SIMPLE_INPUTS}), {}, 503),
        ("/v2/models/simple/infer", orjson.dumps({"id": "h", "inputs": SIMPLE_INPUTS}), {}, 200),
    ],
)
def test_statuses_over_real_http(live_server, path: str, body: bytes, headers: dict, status: int) -> None:  # type: ignore[no-untyped-def]
    import httpx

    response = httpx.post(f"http://{live_server.url}{path}", content=body, headers=headers)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    if status != 200:
        assert set(response.json()) == {"error"}
