"""Tensors by reference in S3 against ``oip serve`` and moto's server on 127.0.0.1: a request is checked against its
model before any S3 request is made, and its objects' sizes (their HEADs) against the request budget before any
GET. What reached S3 is read from moto's own request recorder; what the server spent, from /proc (peak resident
memory, CPU time), never from wall-clock time."""

# covers: handler/inference/call_checks.py

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.integration.conftest import AWS_TEST_ENV
from tests.support import onnx_models
from tests.support.iris_requests import normal_requests
from tests.support.servers import OipServer, moto_server, oip_serve

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
#: One object of 24 MiB of FP32 zeros, and one of 2 Mi empty BYTES elements (8 MiB of length prefixes).
BIG_ELEMENTS = 6 * MiB
WORDS = 2 * MiB
#: The request budget of the server under test: less than the big object.
REQUEST_BUDGET = 16 * MiB


@dataclass(frozen=True)
class Moto:
    url: str

    def recorded(self) -> list[dict[str, Any]]:
        """The requests moto received since the recording was last reset (method, url, headers)."""
        text = httpx.get(f"{self.url}/moto-api/recorder/download-recording", timeout=30).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def record_afresh(self) -> None:
        httpx.post(f"{self.url}/moto-api/recorder/reset-recording", timeout=30).raise_for_status()
        httpx.post(f"{self.url}/moto-api/recorder/start-recording", timeout=30).raise_for_status()

    def reads_of(self, key: str) -> list[str]:
        """The methods of the recorded requests that named ``key``."""
        return [entry["method"] for entry in self.recorded() if key in entry["url"]]


@dataclass(frozen=True)
class Setup:
    server: OipServer
    moto: Moto
    prefix: str  # s3://bucket/tensors/


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("s3_budget_models")
    shutil.copytree(ROOT / "models" / "iris", root / "iris")
    onnx_models.save(onnx_models.identity("BYTES"), root, "words")
    onnx_models.save(onnx_models.identity("FP32", ["n"]), root, "vector")
    return root


@pytest.fixture(scope="module")
def setup(repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """moto's server of its own (its recorder writes to a file of this test's), two objects in a bucket, and
    ``oip serve`` reading tensors under the bucket's ``tensors/``."""
    workdir = tmp_path_factory.mktemp("moto")
    moto_env = {**AWS_TEST_ENV, "MOTO_RECORDER_FILEPATH": str(workdir / "recording.jsonl")}
    with moto_server(env=moto_env, drop=("AWS_",), cwd=workdir) as url:
        s3 = boto3.client("s3", endpoint_url=url, **_credentials())
        s3.create_bucket(Bucket="budget")
        s3.put_object(Bucket="budget", Key="tensors/big", Body=bytes(BIG_ELEMENTS * 4))
        s3.put_object(Bucket="budget", Key="tensors/words", Body=bytes(WORDS * 4))
        s3.put_object(Bucket="budget", Key="tensors/small", Body=bytes(4 * 4))
        server_env = {
            **AWS_TEST_ENV,
            "AWS_ENDPOINT_URL": url,
            "OIP_S3_TENSOR_PREFIXES": "s3://budget/tensors/",
            "OIP_MAX_REQUEST_BYTES": str(REQUEST_BUDGET),
        }
        with oip_serve("--model-repository", str(repository), env=server_env, workers=1, log_level="warning") as server:
            # One small read first: the server's S3 client (boto3 and its data) is made then, so that what the
            # tests measure of its memory is their own requests'.
            warm = json.dumps({"inputs": [_reference("INPUT0", "s3://budget/tensors/small", [4])]})
            answer = httpx.post(f"{server.url}/v2/models/vector/infer", content=warm,
                                headers={"content-type": "application/json"})  # fmt: skip
            assert answer.status_code == 200, answer.text
            yield Setup(server, Moto(url), "s3://budget/tensors/")


def _credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": AWS_TEST_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": AWS_TEST_ENV["AWS_DEFAULT_REGION"],
    }


def _post(setup: Setup, model: str, body: bytes) -> tuple[httpx.Response, float]:
    """The answer, and the server's CPU seconds while it was made."""
    cpu = setup.server.cpu_seconds()
    response = httpx.post(
        f"{setup.server.url}/v2/models/{model}/infer", content=body, headers={"content-type": "application/json"}
    )
    return response, setup.server.cpu_seconds() - cpu


def _reference(name: str, uri: str, shape: list[int], datatype: str = "FP32") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "parameters": {"s3_uri": uri}}


def test_sixteen_unknown_inputs_on_one_large_object_read_nothing(setup: Setup) -> None:
    """The probe that took the server from 128 MB to 1.2 GB: in0..in15 on ``iris``, all naming one large object."""
    big = f"{setup.prefix}big"
    body = json.dumps({"inputs": [_reference(f"in{i}", big, [1, BIG_ELEMENTS]) for i in range(16)]}).encode()
    assert len(body) < 2048
    setup.moto.record_afresh()
    peak = setup.server.peak_rss()
    with normal_requests(setup.server.url):
        response, cpu = _post(setup, "iris", body)
    assert response.status_code == 400
    assert response.json() == {"error": "model 'iris' has no input 'in0'; its inputs are ['input']"}
    assert setup.moto.reads_of("tensors/big") == []  # no HEAD, no GET
    assert setup.server.peak_rss() - peak < BIG_ELEMENTS * 4  # less than one object: none was read
    assert cpu < 0.5


def test_an_unknown_input_naming_a_missing_object_gets_the_name_error(setup: Setup) -> None:
    body = json.dumps({"inputs": [_reference("in0", f"{setup.prefix}not-there", [1, 4])]}).encode()
    response, _ = _post(setup, "iris", body)
    assert response.status_code == 400
    assert response.json() == {"error": "model 'iris' has no input 'in0'; its inputs are ['input']"}


def test_a_wrong_datatype_or_shape_is_refused_before_the_object_is_touched(setup: Setup) -> None:
    """The 117-byte request with shape [1] that cost 10 s of CPU when a 64 MiB object was parsed as BYTES first."""
    words = f"{setup.prefix}words"
    setup.moto.record_afresh()
    body = json.dumps({"inputs": [_reference("input", words, [1], "BYTES")]}).encode()
    assert len(body) < 128
    response, cpu = _post(setup, "iris", body)
    assert response.status_code == 400
    assert response.json() == {"error": "input 'input' has datatype BYTES but the model expects FP32"}
    body = json.dumps({"inputs": [_reference("input", words, [1, 5])]}).encode()
    response, _ = _post(setup, "iris", body)
    assert response.status_code == 400
    assert response.json()["error"] == "input 'input' has shape [1, 5] but the model expects [-1, 4] (-1 is any size)"
    assert setup.moto.reads_of("tensors/words") == []
    assert cpu < 0.5


def test_bytes_data_is_parsed_no_further_than_its_shape(setup: Setup) -> None:
    """2 Mi BYTES elements for a shape of one: the parse stops at the second element."""
    body = json.dumps({"inputs": [_reference("INPUT0", f"{setup.prefix}words", [1, 1], "BYTES")]}).encode()
    response, cpu = _post(setup, "words", body)
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "tensor 'INPUT0': the data holds more than the 1 BYTES elements its shape has"
    )
    assert cpu < 1  # 0.27 s measured, mostly the GET; 1.8 s more of Python when all 2 Mi elements were parsed


def test_objects_over_the_request_budget_are_refused_after_their_head(setup: Setup) -> None:
    setup.moto.record_afresh()
    peak = setup.server.peak_rss()
    body = json.dumps({"inputs": [_reference("INPUT0", f"{setup.prefix}big", [BIG_ELEMENTS])]}).encode()
    response, _ = _post(setup, "vector", body)
    assert response.status_code == 413
    assert response.json() == {
        "error": f"the request's tensors (0 bytes inline, {BIG_ELEMENTS * 4} in S3) of {BIG_ELEMENTS * 4} bytes is "
        f"over the limit of {REQUEST_BUDGET} bytes one request may bring into memory (OIP_MAX_REQUEST_BYTES); "
        "nothing was read from S3"
    }
    assert setup.moto.reads_of("tensors/big") == ["HEAD"]
    assert setup.server.peak_rss() - peak < BIG_ELEMENTS * 4


def test_two_outputs_to_one_object_are_refused(setup: Setup) -> None:
    out = {"s3_uri": f"{setup.prefix}out/same"}
    request = {
        "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.7, 3.0, 5.2, 2.3]}],
        "outputs": [{"name": "label", "parameters": out}, {"name": "probabilities", "parameters": out}],
    }
    response, _ = _post(setup, "iris", json.dumps(request).encode())
    assert response.status_code == 400
    assert response.json() == {
        "error": f"output 'probabilities' and output 'label' are both to be written to {setup.prefix}out/same; give "
        "each output an S3 object of its own"
    }
