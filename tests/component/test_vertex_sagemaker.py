"""Vertex AI's and SageMaker's HTTP contracts through a real uvicorn, with real payloads.

Vertex AI: the container answers health checks on ``AIP_HEALTH_ROUTE`` and prediction requests
``{"instances": [...], "parameters": {...}}`` on ``AIP_PREDICT_ROUTE`` with ``{"predictions": [...]}``.
SageMaker: ``GET /ping`` and ``POST /invocations``; Triton's SageMaker frontend takes binary tensors under
``application/vnd.sagemaker-triton.binary+json;json-header-size=N`` (SageMaker forwards no custom headers).
"""

# covers: handler/rest/platforms.py
# covers: handler/rest/sagemaker.py

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as triton_http

from handler.config.platform import custom_attributes, target_model
from handler.config.settings import Settings
from handler.server import build_app
from tests.conftest import LiveServer, make_settings
from tests.support import platform_models

HEALTH = "/v1/endpoints/123/deployedModels/456"
PREDICT = "/v1/endpoints/123/deployedModels/456:predict"
BINARY = "application/vnd.sagemaker-triton.binary+json"


def _serve(root: Path, env: dict[str, str]) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        for key in (
            "OIP_DEFAULT_MODEL",
            "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME",
            "AIP_HEALTH_ROUTE",
            "AIP_PREDICT_ROUTE",
        ):
            patch.delenv(key, raising=False)
        for key, value in env.items():
            patch.setenv(key, value)
        # the platform as the environment describes it; everything else as the test says
        server = LiveServer(build_app(make_settings(root, platform=Settings.from_env().platform)))
    server.start()
    yield f"http://{server.url}"
    server.stop()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return platform_models.build(tmp_path_factory.mktemp("platform"))


@pytest.fixture(scope="module")
def vertex(tmp_path_factory: pytest.TempPathFactory, models: Path) -> Iterator[str]:
    root = tmp_path_factory.mktemp("vertex")
    shutil.copytree(models / "half_plus_three", root / "half_plus_three")  # Vertex deploys one model
    yield from _serve(root, {"AIP_HEALTH_ROUTE": HEALTH, "AIP_PREDICT_ROUTE": PREDICT, "AIP_HTTP_PORT": "8080"})


@pytest.fixture(scope="module")
def sagemaker(models: Path) -> Iterator[str]:
    yield from _serve(models, {"SAGEMAKER_BIND_TO_PORT": "8080"})


def test_vertex_health_route(vertex: str) -> None:
    response = httpx.get(f"{vertex}{HEALTH}")
    assert (response.status_code, response.json()) == (200, {"name": "half_plus_three", "ready": True})


def test_vertex_predict_route_answers_predictions(vertex: str) -> None:
    response = httpx.post(f"{vertex}{PREDICT}", json={"instances": [1.0, 2.0, 5.0], "parameters": {"top_k": 1}})
    assert (response.status_code, response.json()) == (200, {"predictions": [3.5, 4.0, 5.5]})


def test_vertex_bad_instance_is_400(vertex: str) -> None:
    response = httpx.post(f"{vertex}{PREDICT}", json={"instances": [[1.0, 2.0]]})
    assert response.status_code == 400 and "'x'" in response.json()["error"]


def test_vertex_server_still_speaks_v2(vertex: str) -> None:
    assert httpx.get(f"{vertex}/v2/models/half_plus_three/ready").status_code == 200


def test_ping(sagemaker: str) -> None:
    assert httpx.get(f"{sagemaker}/ping").status_code == 200


def test_invocations_with_several_models_needs_a_target(sagemaker: str) -> None:
    document = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    response = httpx.post(f"{sagemaker}/invocations", json=document)
    assert response.status_code == 400
    assert "X-Amzn-SageMaker-Custom-Attributes" in response.json()["error"]


def test_invocations_v2_json_to_the_model_the_custom_attributes_name(sagemaker: str) -> None:
    document = {"id": "7", "inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]}
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "trace=abc, model=half_plus_three, version=1"}
    response = httpx.post(f"{sagemaker}/invocations", json=document, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert (body["id"], body["model_name"], body["model_version"]) == ("7", "half_plus_three", "1")
    assert body["outputs"][0]["data"] == [3.5, 4.0]


def test_invocations_binary_under_tritons_sagemaker_content_type(sagemaker: str) -> None:
    # As Triton's SageMaker tests and notebooks send it: tritonclient's body, the header length in the type.
    values = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    tensor = triton_http.InferInput("x", [3], "FP32")
    tensor.set_data_from_numpy(values, binary_data=True)
    outputs = [triton_http.InferRequestedOutput("y", binary_data=True)]
    body, header_length = triton_http.InferenceServerClient.generate_request_body([tensor], outputs=outputs)
    response = httpx.post(
        f"{sagemaker}/invocations",
        content=body,
        headers={
            "Content-Type": f"{BINARY};json-header-size={header_length}",
            "X-Amzn-SageMaker-Custom-Attributes": "model=half_plus_three",
        },
    )
    assert response.status_code == 200, response.text
    prefix = f"{BINARY};json-header-size="
    assert response.headers["content-type"].startswith(prefix)
    result = triton_http.InferenceServerClient.parse_response_body(
        response.content, header_length=int(response.headers["content-type"][len(prefix) :])
    )
    np.testing.assert_array_equal(result.as_numpy("y"), values * 0.5 + 3)


@pytest.mark.parametrize(
    ("size", "error"),
    [
        ("9" * 4400, "json-header-size of 4400 digits is larger than any body"),
        ("\u00b2", "json-header-size '\u00b2' is not a non-negative integer"),
    ],
)
def test_a_json_header_size_that_is_no_byte_count_is_400(sagemaker: str, size: str, error: str) -> None:
    headers = {
        "Content-Type": f"{BINARY};json-header-size={size}".encode("latin-1"),
        "X-Amzn-SageMaker-Custom-Attributes": b"model=half_plus_three",
    }
    response = httpx.post(f"{sagemaker}/invocations", content=b"{}", headers=headers)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": error}


def test_invocations_take_tf_serving_instances_too(sagemaker: str) -> None:
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "model=half_plus_three"}
    response = httpx.post(f"{sagemaker}/invocations", json={"instances": [1.0, 2.0]}, headers=headers)
    assert response.json() == {"predictions": [3.5, 4.0]}


@pytest.mark.parametrize(
    ("content_type", "status"),
    [("text/csv", 415), (BINARY, 400), (f"{BINARY};json-header-size=x", 400), (f"{BINARY};json-header-size=9999", 400)],
)
def test_invocations_content_type_errors(sagemaker: str, content_type: str, status: int) -> None:
    headers = {"Content-Type": content_type, "X-Amzn-SageMaker-Custom-Attributes": "model=half_plus_three"}
    response = httpx.post(f"{sagemaker}/invocations", content=b'{"inputs": []}', headers=headers)
    assert response.status_code == status and set(response.json()) == {"error"}


def test_invocations_unknown_model_is_404(sagemaker: str) -> None:
    headers = {"X-Amzn-SageMaker-Custom-Attributes": "model=nope"}
    response = httpx.post(f"{sagemaker}/invocations", json={"inputs": []}, headers=headers)
    assert response.status_code == 404 and "nope" in response.json()["error"]


def test_invocations_default_model_from_tritons_variable(models: Path) -> None:
    for url in _serve(
        models, {"SAGEMAKER_BIND_TO_PORT": "8080", "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "half_plus_three"}
    ):
        document = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [4.0]}]}
        assert httpx.post(f"{url}/invocations", json=document).json()["outputs"][0]["data"] == [5.0]


def test_target_model_rules() -> None:
    assert custom_attributes("model=a; version=2,x") == {"model": "a", "version": "2"}
    assert target_model(["a", "b"], None, {"model": "b:3"}) == ("b", "3")
    assert target_model(["a", "b"], "a:2", {}) == ("a", "2")
    assert target_model(["a"], None, {"version": "4"}) == ("a", "4")
