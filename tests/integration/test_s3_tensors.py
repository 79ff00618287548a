"""The ``s3_tensors`` extension against moto's standalone S3 over HTTP: inputs read from and outputs written to S3 by
reference, through the Lambda handler, ``oip serve`` (REST and gRPC, tritonclient and the client helper), batch and
the app itself; every error the extension names, with the status it has."""

# covers: handler/codecs/s3_client.py
# covers: handler/inference/s3_errors.py

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import onnxruntime
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from fastapi.testclient import TestClient
from onnx import TensorProto, helper

from handler.codecs.s3_client import S3TensorClient
from handler.inference.s3_tensors import s3_client
from handler.server import build_app
from tests.conftest import free_port, make_settings
from tests.integration.conftest import AWS_TEST_ENV
from tests.support import onnx_models
from tests.support.servers import grpc_ready, http_ok, moto_server, oip_serve, unique_name

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
#: 40 MB of FP32 in, 25 MB out.
IN_ELEMENTS = 10_000_000
OUT_ELEMENTS = 6_250_000


def _slice_model() -> Any:
    """``y = 2 * x[:6_250_000]``: FP32 [n] -> FP32 [min(n, 6_250_000)]."""
    constants = [
        helper.make_tensor("starts", TensorProto.INT64, [1], [0]),
        helper.make_tensor("ends", TensorProto.INT64, [1], [OUT_ELEMENTS]),
        helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
    ]
    nodes = [
        helper.make_node("Slice", ["x", "starts", "ends"], ["head"]),
        helper.make_node("Mul", ["head", "two"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m"])],
        constants,
    )
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("s3_tensors_models")
    onnx_models.save(_slice_model(), root, "big")
    onnx_models.save(onnx_models.identity("FP32"), root, "identity_fp32")
    onnx_models.save(onnx_models.identity("BYTES"), root, "identity_bytes")
    onnx_models.save(onnx_models.add_sub(), root, "simple")
    return root


@pytest.fixture(scope="module")
def big_input() -> np.ndarray:
    return np.random.default_rng(31).standard_normal(IN_ELEMENTS, dtype=np.float32)


@pytest.fixture(scope="module")
def expected(repository: Path, big_input: np.ndarray) -> np.ndarray:
    """onnxruntime's own answer, run directly on the model file."""
    session = onnxruntime.InferenceSession(str(repository / "big" / "1" / "model.onnx"))
    return session.run(["y"], {"x": big_input})[0]


@pytest.fixture
def s3(aws_env: str) -> Any:
    s3_client.cache_clear()  # the server side's client, made again under this test's endpoint
    yield boto3.client("s3")
    s3_client.cache_clear()


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("tensors")
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def prefix(bucket: str) -> str:
    return f"s3://{bucket}/tensors/"


@pytest.fixture
def app_client(repository: Path) -> Iterator[Callable[..., TestClient]]:
    """An app over ``repository`` with the given settings, in this process."""
    opened: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        client = TestClient(build_app(make_settings(repository, **overrides)), raise_server_exceptions=False)
        opened.append(client.__enter__())
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def app(app_client: Callable[..., TestClient], prefix: str) -> TestClient:
    return app_client(s3_tensor_prefixes=(prefix,))


def _put(s3: Any, uri: str, data: bytes) -> None:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    s3.put_object(Bucket=bucket, Key=key, Body=data)


def _exists(s3: Any, uri: str) -> bool:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount", 0) > 0


def _fp32_request(uri: str, shape: list[int], **parameters: Any) -> dict[str, Any]:
    return {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape, "parameters": {"s3_uri": uri, **parameters}}]
    }


# What the extension does


def test_server_metadata_lists_the_extension_only_when_prefixes_are_configured(
    app_client: Callable[..., TestClient],
) -> None:
    assert "s3_tensors" not in app_client().get("/v2").json()["extensions"]
    assert "s3_tensors" in app_client(s3_tensor_prefixes=("s3://b/p/",)).get("/v2").json()["extensions"]


def test_input_and_output_by_reference_answer_as_inline_data(app: TestClient, s3: Any, prefix: str) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    _put(s3, f"{prefix}in/x", x.tobytes())
    request = _fp32_request(f"{prefix}in/x", [3, 4])
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"s3_uri": f"{prefix}out/y"}}]
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 200, answer.text
    output = answer.json()["outputs"][0]
    assert "data" not in output
    assert output["parameters"] == {"s3_uri": f"{prefix}out/y", "s3_byte_size": 48}
    bucket = prefix.removeprefix("s3://").split("/")[0]
    written = s3.get_object(Bucket=bucket, Key="tensors/out/y")["Body"].read()
    assert np.array_equal(np.frombuffer(written, dtype="<f4").reshape(3, 4), x)
    inline = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}in/x", [3, 4]))
    assert inline.json()["outputs"][0]["data"] == x.ravel().tolist()


def test_a_tensor_inside_a_larger_object_by_offset_and_size(app: TestClient, s3: Any, prefix: str) -> None:
    x = np.linspace(0, 1, 6, dtype=np.float32)
    _put(s3, f"{prefix}packed", b"HEADER--" + x.tobytes() + b"TRAILER")
    request = _fp32_request(f"{prefix}packed", [2, 3], s3_offset=8, s3_byte_size=24)
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 200, answer.text
    assert np.array_equal(np.array(answer.json()["outputs"][0]["data"], np.float32), x)


def test_bytes_tensors_use_the_binary_extensions_length_prefixes(app: TestClient, s3: Any, prefix: str) -> None:
    words = [b"s3", b"", b"tensors", "\u00e9t\u00e9".encode()]
    _put(s3, f"{prefix}words", b"".join(len(w).to_bytes(4, "little") + w for w in words))
    request = {
        "inputs": [
            {"name": "INPUT0", "datatype": "BYTES", "shape": [2, 2], "parameters": {"s3_uri": f"{prefix}words"}}
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": f"{prefix}words-out"}}],
    }
    answer = app.post("/v2/models/identity_bytes/infer", json=request)
    assert answer.status_code == 200, answer.text
    assert S3TensorClient(prefix).fetch(answer.json())["OUTPUT0"].ravel().tolist() == words
    truncated = b"".join(len(w).to_bytes(4, "little") + w for w in words)[:-1]
    _put(s3, f"{prefix}words", truncated)
    refused = app.post("/v2/models/identity_bytes/infer", json={"inputs": request["inputs"]})
    assert refused.status_code == 400 and "runs past the data" in refused.json()["error"]


def test_the_client_helper_sends_small_inputs_inline_and_large_ones_by_reference(
    app: TestClient, s3: Any, prefix: str
) -> None:
    helper_ = S3TensorClient(prefix, threshold=64)
    small, large = np.ones((1, 16), np.int32), np.arange(16, dtype=np.int32).reshape(1, 16)
    request = helper_.request({"INPUT0": large, "INPUT1": small}, outputs=["OUTPUT1"])
    assert [sorted(entry) for entry in request["inputs"]] == [["datatype", "name", "parameters", "shape"]] * 2
    assert [entry["parameters"]["s3_byte_size"] for entry in request["inputs"]] == [64, 64]
    helper_.threshold = 65
    request = helper_.request({"INPUT0": large, "INPUT1": small}, outputs=["OUTPUT1"])
    assert [entry["data"] for entry in request["inputs"]] == [large.ravel().tolist(), small.ravel().tolist()]
    helper_.threshold = 64
    body, headers = helper_.request(
        {"INPUT0": large, "INPUT1": small}, outputs=["OUTPUT1"], inline_outputs=["OUTPUT0"], binary=True
    )
    answer = app.post("/v2/models/simple/infer", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    values = helper_.fetch(answer)
    assert np.array_equal(values["OUTPUT0"], large + small) and np.array_equal(values["OUTPUT1"], large - small)
    helper_.cleanup()
    bucket = prefix.removeprefix("s3://").split("/")[0]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="tensors/").get("KeyCount", 0) == 0


@pytest.mark.parametrize("encryption", ["aes256", "aws:kms"])
def test_outputs_are_written_with_the_configured_encryption(
    app_client: Callable[..., TestClient], s3: Any, bucket: str, prefix: str, encryption: str
) -> None:
    key = boto3.client("kms").create_key()["KeyMetadata"]["Arn"] if encryption == "aws:kms" else ""
    app = app_client(s3_tensor_prefixes=(prefix,), s3_tensor_sse=encryption if not key else "", s3_tensor_kms_key=key)
    request = {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": f"{prefix}sealed"}}],
    }
    assert app.post("/v2/models/identity_fp32/infer", json=request).status_code == 200
    head = s3.head_object(Bucket=bucket, Key="tensors/sealed")
    assert head["ServerSideEncryption"] == ("aws:kms" if key else "AES256")
    assert head.get("SSEKMSKeyId") == (key or None)
    assert head["ContentType"] == "application/octet-stream"


# Refusals


def test_a_request_using_the_extension_where_it_is_off_is_told_so(app_client: Callable[..., TestClient]) -> None:
    app = app_client()
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request("s3://b/p/x", [1, 1]))
    assert answer.status_code == 400
    assert (
        "s3_tensors extension is off" in answer.json()["error"] and "OIP_S3_TENSOR_PREFIXES" in answer.json()["error"]
    )
    request = {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": "s3://b/p/y"}}],
    }
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 400 and "output 'OUTPUT0' names an S3 location" in answer.json()["error"]


OUTSIDE = [
    ("{bucket}/secret/x", 403),
    ("{bucket}/tensors-elsewhere/x", 403),  # the prefix's name without its slash
    ("{bucket}-other/tensors/x", 403),
    ("{bucket}/tensors/../secret/x", 400),
    ("{bucket}/tensors/./x", 400),
    ("{bucket}/tensors//x", 400),
    ("{bucket}/tensors/a\\..\\x", 400),
    ("{bucket}/tensors/x\n", 400),
]


@pytest.mark.parametrize(("where", "status"), OUTSIDE, ids=[w for w, _ in OUTSIDE])
def test_locations_outside_the_prefixes_are_refused_with_nothing_read(
    app_client: Callable[..., TestClient],
    s3: Any,
    bucket: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    status: int,
) -> None:
    """Refused before any S3 request: the server's S3 endpoint is a port nothing listens on, where any read would
    be a 503; and the object is there, a valid tensor, where moto would give it."""
    uri = "s3://" + where.format(bucket=bucket)
    if status == 403 and "-other" not in uri:
        _put(s3, uri, np.zeros(4, np.float32).tobytes())
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3_client.cache_clear()
    app = app_client(s3_tensor_prefixes=(prefix,))
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(uri, [2, 2]))
    assert answer.status_code == status, answer.text
    if status == 403:
        assert prefix in answer.json()["error"] and "nothing was read" in answer.json()["error"]
    request = {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": uri}}],
    }
    assert app.post("/v2/models/identity_fp32/infer", json=request).status_code == status


def test_an_output_outside_the_prefixes_is_refused_before_the_model_runs(
    app: TestClient, s3: Any, bucket: str, prefix: str
) -> None:
    _put(s3, f"{prefix}x", np.ones(4, np.float32).tobytes())
    request = _fp32_request(f"{prefix}x", [2, 2])
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"s3_uri": f"s3://{bucket}/elsewhere/y"}}]
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 403 and prefix in answer.json()["error"]
    assert not _exists(s3, f"s3://{bucket}/elsewhere/y")


def test_a_missing_object_is_400_naming_the_input_and_location(app: TestClient, prefix: str) -> None:
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}nothing-here", [2, 2]))
    assert answer.status_code == 400
    assert answer.json()["error"] == f"input 'INPUT0': there is no object at {prefix}nothing-here"
    missing_bucket = "s3://" + prefix.removeprefix("s3://").replace("/tensors/", "-gone/tensors/")
    app_elsewhere = app.post(
        "/v2/models/identity_fp32/infer", json=_fp32_request(f"{missing_bucket}x", [2, 2])
    )  # outside the prefixes before it is missing
    assert app_elsewhere.status_code == 403


def test_sizes_that_do_not_fit_are_refused_before_any_download(
    app_client: Callable[..., TestClient], s3: Any, prefix: str
) -> None:
    app = app_client(s3_tensor_prefixes=(prefix,), max_tensor_bytes=1024)
    _put(s3, f"{prefix}partial", np.ones(10, np.float32).tobytes())  # 40 bytes
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}partial", [3, 4]))
    assert answer.status_code == 400
    assert answer.json()["error"] == (
        f"input 'INPUT0': shape [3, 4] of FP32 needs 48 bytes but {prefix}partial holds 40 bytes; nothing was read"
    )
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}partial", [3, 4], s3_byte_size=48))
    assert answer.status_code == 400 and "runs past the end" in answer.json()["error"]
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}partial", [2, 2], s3_offset=41))
    assert answer.status_code == 400 and "past the end" in answer.json()["error"]
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request(f"{prefix}partial", [16, 17]))
    assert answer.status_code == 413 and "INPUT0" in answer.json()["error"]  # the shape alone, before the HEAD
    _put(s3, f"{prefix}many-words", b"\x00\x00\x00\x00" * 300)  # 1200 bytes of empty strings
    words = {"name": "INPUT0", "datatype": "BYTES", "shape": [1, 300], "parameters": {"s3_uri": f"{prefix}many-words"}}
    answer = app.post("/v2/models/identity_bytes/infer", json={"inputs": [words]})
    assert answer.status_code == 413
    assert answer.json()["error"].startswith("input 'INPUT0': ") and "OIP_MAX_TENSOR_BYTES" in answer.json()["error"]


def test_data_sent_twice_is_refused(app: TestClient, prefix: str) -> None:
    request = _fp32_request(f"{prefix}x", [1, 1])
    request["inputs"][0]["data"] = [1.0]
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 400 and "has its data twice" in answer.json()["error"]


def test_s3_unreachable_is_503_with_retry_after(
    app_client: Callable[..., TestClient], aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3_client.cache_clear()
    app = app_client(s3_tensor_prefixes=("s3://somewhere/tensors/",))
    answer = app.post("/v2/models/identity_fp32/infer", json=_fp32_request("s3://somewhere/tensors/x", [1, 1]))
    assert answer.status_code == 503 and answer.headers.get("retry-after") == "1", (answer.headers, answer.text)
    assert answer.json()["error"] == (
        "input 'INPUT0': S3 could not be reached to read s3://somewhere/tensors/x; retry shortly"
    )
    request = {
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": "s3://somewhere/tensors/y"}}],
    }
    answer = app.post("/v2/models/identity_fp32/infer", json=request)
    assert answer.status_code == 503 and "to write s3://somewhere/tensors/y" in answer.json()["error"]
    s3_client.cache_clear()


def test_access_denied_by_s3_is_403(app_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """A moto server of its own that enforces IAM: a user who may read ``tensors/granted/`` only."""
    with moto_server() as url:
        admin = {**AWS_TEST_ENV, "endpoint_url": url}
        session = boto3.session.Session(
            aws_access_key_id=admin["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=admin["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )
        s3, iam = session.client("s3", endpoint_url=url), session.client("iam", endpoint_url=url)
        s3.create_bucket(Bucket="guarded")
        x = np.ones(4, np.float32).tobytes()
        s3.put_object(Bucket="guarded", Key="tensors/granted/x", Body=x)
        s3.put_object(Bucket="guarded", Key="tensors/secret/x", Body=x)
        iam.create_user(UserName="reader")
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::guarded/tensors/granted/*"}
            ],
        }
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        httpx.post(f"{url}/moto-api/reset-auth", content=b"0").raise_for_status()  # IAM enforced from here on
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        s3_client.cache_clear()
        app = app_client(s3_tensor_prefixes=("s3://guarded/tensors/",))
        granted = app.post(
            "/v2/models/identity_fp32/infer", json=_fp32_request("s3://guarded/tensors/granted/x", [2, 2])
        )
        assert granted.status_code == 200, granted.text
        denied = app.post("/v2/models/identity_fp32/infer", json=_fp32_request("s3://guarded/tensors/secret/x", [2, 2]))
        assert denied.status_code == 403
        assert denied.json()["error"].startswith(
            "input 'INPUT0': S3 denied this server access to read s3://guarded/tensors/secret/x"
        )
        s3_client.cache_clear()


# 40 MB in, 25 MB out: the Lambda handler, oip serve, batch


LAMBDA_PROGRAM = """
import json, sys
from handler.cli.lambda_context import LocalLambdaContext
from handler.http import lambda_handler
event = json.loads(sys.stdin.read())
print(json.dumps(lambda_handler(event, LocalLambdaContext())))
"""


def _lambda(event: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", LAMBDA_PROGRAM],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_lambda_handler_reads_40_mb_and_writes_25_mb_by_reference(
    aws_env: str, s3: Any, bucket: str, prefix: str, repository: Path, big_input: np.ndarray, expected: np.ndarray
) -> None:
    from scripts import lambda_events

    tensors = S3TensorClient(prefix)
    document = tensors.request({"x": big_input}, outputs=["y"])
    body = json.dumps(document).encode()
    event = json.loads((ROOT / "events" / "http-api" / "infer-json.json").read_text())
    event = lambda_events.fill(
        event, "http-api", "POST", "/v2/models/big/infer", body, {"content-type": "application/json"}
    )
    assert len(json.dumps(event)) < 4096, "the event carries references, not tensors"
    env = {"MODEL_REPOSITORY": str(repository), "OIP_S3_TENSOR_PREFIXES": prefix, "OIP_WARM_UP": "0"}
    response = _lambda(event, env)
    assert response["statusCode"] == 200, response
    answer = json.loads(base64.b64decode(response["body"]) if response["isBase64Encoded"] else response["body"])
    assert len(response["body"]) < 4096
    output = answer["outputs"][0]
    assert output["shape"] == [OUT_ELEMENTS] and output["parameters"]["s3_byte_size"] == OUT_ELEMENTS * 4
    assert np.array_equal(tensors.fetch(answer)["y"], expected)

    over = dict(document, inputs=[dict(document["inputs"][0], shape=[IN_ELEMENTS + 1])])
    event["body"] = json.dumps(over)
    refused = _lambda(event, env)
    assert refused["statusCode"] == 400 and "needs 40000004 bytes" in json.loads(refused["body"])["error"]


def test_a_lambda_body_over_the_limit_names_the_extension_and_the_helper() -> None:
    from handler.rest.lambda_event import V2, MalformedEvent, accept

    event = json.loads((ROOT / "events" / "http-api" / "infer-json.json").read_text())
    event["body"] = "x" * 7_000_000
    with pytest.raises(MalformedEvent) as refused:
        accept(event, V2, 6 * 1024 * 1024)
    assert refused.value.status == 413
    assert "s3_tensors" in refused.value.message and "S3TensorClient" in refused.value.message


def test_oip_serve_over_rest_and_grpc_with_tritonclient_and_the_helper(
    aws_env: str, s3: Any, bucket: str, prefix: str, repository: Path, big_input: np.ndarray, expected: np.ndarray
) -> None:
    env = {"MODEL_REPOSITORY": str(repository), "OIP_S3_TENSOR_PREFIXES": prefix, **AWS_TEST_ENV}
    with oip_serve(
        env={**env, "AWS_ENDPOINT_URL": aws_env},
        grpc=True,
        workers=1,
        probe=lambda s: http_ok(f"{s.url}/v2/health/ready") and grpc_ready(f"127.0.0.1:{s.grpc_port}"),
    ) as server:
        tensors = S3TensorClient(prefix)
        assert "s3_tensors" in httpx.get(f"{server.url}/v2").json()["extensions"]

        # tritonclient over HTTP: the reference through its public set_shared_memory
        client = triton_http.InferenceServerClient(server.address, network_timeout=300, connection_timeout=60)
        result = client.infer(
            "big",
            tensors.triton_inputs(triton_http, {"x": big_input}),
            outputs=tensors.triton_outputs(triton_http, ["y"]),
        )
        assert np.array_equal(tensors.fetch(result)["y"], expected)
        client.close()

        # tritonclient over gRPC
        address = f"127.0.0.1:{server.grpc_port}"
        grpc_client = triton_grpc.InferenceServerClient(address)
        assert "s3_tensors" in grpc_client.get_server_metadata().extensions
        result = grpc_client.infer(
            "big",
            tensors.triton_inputs(triton_grpc, {"x": big_input}),
            outputs=tensors.triton_outputs(triton_grpc, ["y"]),
        )
        assert np.array_equal(tensors.fetch(result)["y"], expected)
        # one input by reference beside one sent in raw_input_contents
        a, b = np.arange(16, dtype=np.int32).reshape(1, 16), np.full((1, 16), 3, np.int32)
        tensors.upload(f"{prefix}simple/a", a)
        inputs = [
            triton_grpc.InferInput("INPUT0", [1, 16], "INT32"),
            triton_grpc.InferInput("INPUT1", [1, 16], "INT32"),
        ]
        inputs[0].set_shared_memory(f"{prefix}simple/a", 64)
        inputs[1].set_data_from_numpy(b)
        result = grpc_client.infer("simple", inputs)
        assert np.array_equal(result.as_numpy("OUTPUT0"), a + b) and np.array_equal(result.as_numpy("OUTPUT1"), a - b)
        grpc_client.close()

        # the helper's own REST request, through httpx
        answer = httpx.post(
            f"{server.url}/v2/models/big/infer", json=tensors.request({"x": big_input}, outputs=["y"]), timeout=300
        )
        assert answer.status_code == 200, answer.text
        assert np.array_equal(tensors.fetch(answer)["y"], expected)
        tensors.cleanup()


BATCH_PROGRAM = """
import json, sys
from handler.batch.config import BatchConfig
from handler.batch.s3 import process_object
from handler.batch.service import batch_service
manifest = process_object(sys.argv[1], "input/identity_fp32/refs.jsonl", BatchConfig.from_env(), batch_service())
print(json.dumps(manifest))
"""


def test_batch_lines_read_and_write_tensors_by_reference(
    aws_env: str, s3: Any, bucket: str, prefix: str, repository: Path
) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _put(s3, f"{prefix}batch/x", x.tobytes())
    line = _fp32_request(f"{prefix}batch/x", [2, 3])
    line["outputs"] = [{"name": "OUTPUT0", "parameters": {"s3_uri": f"{prefix}batch/y"}}]
    outside = _fp32_request(f"s3://{bucket}/elsewhere/x", [2, 3])
    s3.put_object(
        Bucket=bucket, Key="input/identity_fp32/refs.jsonl", Body=f"{json.dumps(line)}\n{json.dumps(outside)}\n"
    )
    env = {**os.environ, "MODEL_REPOSITORY": str(repository), "OIP_S3_TENSOR_PREFIXES": prefix}
    result = subprocess.run(
        [sys.executable, "-c", BATCH_PROGRAM, bucket], capture_output=True, text=True, cwd=ROOT, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(result.stdout.strip().splitlines()[-1])
    assert (manifest["rows_in"], manifest["errors"]) == (2, 1)
    written = s3.get_object(Bucket=bucket, Key="tensors/batch/y")["Body"].read()
    assert np.array_equal(np.frombuffer(written, np.float32).reshape(2, 3), x)
    lines = s3.get_object(Bucket=bucket, Key="output/identity_fp32/refs.jsonl.predictions.jsonl")["Body"].read()
    rows = [json.loads(row) for row in lines.splitlines()]
    assert rows[0]["outputs"][0]["parameters"]["s3_uri"] == f"{prefix}batch/y"
    assert prefix in rows[1]["error"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_forwarded_model_gets_the_tensor_read_here_and_its_output_written_here(
    aws_env: str, s3: Any, prefix: str, repository: Path, triton: Any, protocol: str
) -> None:
    """Triton shares no S3 with us: the input is read here and sent on in the request, the output written here
    (over HTTP the pass-through would have sent the body as it came: a reference sends it down the decoding path)."""
    env = {
        "MODEL_REPOSITORY": str(repository),
        "OIP_S3_TENSOR_PREFIXES": prefix,
        "OIP_TRITON_URL": triton.grpc_url if protocol == "grpc" else triton.http_url,
        "OIP_TRITON_PROTOCOL": protocol,
        "OIP_TRITON_MODELS": "remote_simple=simple",
        **AWS_TEST_ENV,
        "AWS_ENDPOINT_URL": aws_env,
    }
    a, b = np.arange(16, dtype=np.int32).reshape(1, 16), np.full((1, 16), 3, np.int32)
    tensors = S3TensorClient(prefix, threshold=64)
    tensors.upload(f"{prefix}remote/a", a)
    request = {
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": {"s3_uri": f"{prefix}remote/a"}},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b.ravel().tolist()},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"s3_uri": f"{prefix}remote/sum"}}, {"name": "OUTPUT1"}],
    }
    with oip_serve(env=env, workers=1, probe=lambda s: http_ok(f"{s.url}/v2/health/ready")) as server:
        answer = httpx.post(f"{server.url}/v2/models/remote_simple/infer", json=request, timeout=60)
    assert answer.status_code == 200, answer.text
    values = tensors.fetch(answer)
    assert np.array_equal(values["OUTPUT0"], a + b) and np.array_equal(values["OUTPUT1"], a - b)
    assert answer.json()["model_name"] == "remote_simple"
