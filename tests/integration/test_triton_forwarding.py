"""Forwarding to a real Triton server (tritonserver from the nvidia-pytriton wheel, on CPU), through
tritonclient's HTTP and gRPC asyncio clients, with tritonclient.http as the outside client. No mock Triton."""

# covers: adapters/router.py
# covers: adapters/triton/backend.py

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.settings import TritonSettings
from handler.config.settings import DEMO_REPOSITORY
from handler.protocol.dataplane import DataPlane
from handler.rest.app import create_app
from tests.support.servers import LiveServer, wait_for
from tests.support.triton_server import TritonServer, build_repository

pytestmark = pytest.mark.integration
ROWS = np.random.default_rng(0).random((3, 4)).astype(np.float32)


def _server(triton: TritonServer, protocol: str, **settings: object) -> LiveServer:
    url = triton.grpc_url if protocol == "grpc" else triton.http_url
    options = {
        "url": url,
        "protocol": protocol,
        "routes": TritonSettings.parse_routes("iris_gpu=iris, slow=slow_iris, simple, identity_bytes, pinned=iris:1"),
        "request_timeout": 10.0,
        "retries": 1,
        **settings,
    }
    repository = ModelRepository(DEMO_REPOSITORY, lambda n, v, p, c: OnnxBackend(n, v, p, c))
    repository.load_defaults()
    app = create_app(DataPlane(ModelRouter(repository, TritonSettings(**options))))  # type: ignore[arg-type]
    server = LiveServer(app)
    server.start()
    return server


@pytest.fixture(scope="module", params=["http", "grpc"])
def ours(request: pytest.FixtureRequest, triton: TritonServer) -> Iterator[LiveServer]:
    server = _server(triton, request.param)
    yield server
    server.stop()


def _iris_input(binary: bool) -> triton_http.InferInput:
    item = triton_http.InferInput("input", list(ROWS.shape), "FP32")
    item.set_data_from_numpy(ROWS, binary_data=binary)
    return item


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_forwarded_infer_matches_triton_direct(ours: LiveServer, triton: TritonServer, binary: bool) -> None:
    direct = triton_http.InferenceServerClient(triton.http_url).infer("iris", [_iris_input(binary)])
    outputs = [triton_http.InferRequestedOutput(name, binary_data=binary) for name in ("probabilities", "label")]
    forwarded = triton_http.InferenceServerClient(ours.url).infer(
        "iris_gpu", [_iris_input(binary)], outputs=outputs, request_id="fwd-1"
    )
    for name in ("probabilities", "label"):
        assert np.array_equal(forwarded.as_numpy(name), direct.as_numpy(name))
    response = forwarded.get_response()
    assert response["model_name"] == "iris_gpu" and response["id"] == "fwd-1" and response["model_version"] == "1"
    for output in response["outputs"]:
        assert ("binary_data_size" in output.get("parameters", {})) is binary


def test_multi_input_and_bytes_models(ours: LiveServer) -> None:
    client = triton_http.InferenceServerClient(ours.url)
    a, b = np.arange(16, dtype=np.int32).reshape(1, 16), np.full((1, 16), 3, np.int32)
    inputs = [triton_http.InferInput("INPUT0", [1, 16], "INT32"), triton_http.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("simple", inputs)
    assert np.array_equal(result.as_numpy("OUTPUT0"), a + b) and np.array_equal(result.as_numpy("OUTPUT1"), a - b)
    text = np.array(["naïve".encode(), b"x"], dtype=object)
    item = triton_http.InferInput("INPUT0", [2], "BYTES")
    item.set_data_from_numpy(text)
    assert client.infer("identity_bytes", [item]).as_numpy("OUTPUT0").tolist() == text.tolist()


def test_metadata_ready_and_index_pass_through(ours: LiveServer, triton: TritonServer) -> None:
    client = triton_http.InferenceServerClient(ours.url)
    metadata = client.get_model_metadata("iris_gpu")
    direct = triton_http.InferenceServerClient(triton.http_url).get_model_metadata("iris")
    assert metadata["name"] == "iris_gpu"
    assert (metadata["inputs"], metadata["outputs"], metadata["versions"]) == (
        direct["inputs"], direct["outputs"], direct["versions"]
    )  # fmt: skip
    assert client.is_model_ready("iris_gpu") and client.is_server_ready()
    assert client.get_model_config("iris_gpu")["max_batch_size"] == 256
    index = {(row["name"], row.get("state")) for row in client.get_model_repository_index()}
    assert {("iris", "READY"), ("tiny_image", "READY"), ("iris_gpu", "READY"), ("simple", "READY")} <= index


def test_triton_errors_pass_through(ours: LiveServer) -> None:
    client = triton_http.InferenceServerClient(ours.url)
    bad = triton_http.InferInput("input", [1, 3], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("iris_gpu", [bad])
    assert info.value.status() == "400"
    assert "unexpected shape for input 'input'" in info.value.message()


def test_pinned_version_and_unknown_version(ours: LiveServer) -> None:
    response = httpx.get(f"http://{ours.url}/v2/models/pinned")
    assert response.status_code == 200 and response.json()["name"] == "pinned"
    response = httpx.get(f"http://{ours.url}/v2/models/iris_gpu/versions/7")
    assert response.status_code in (400, 404), response.text
    assert "error" in response.json()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_slow_model_times_out_with_504(triton: TritonServer, protocol: str) -> None:
    server = _server(triton, protocol, request_timeout=0.5)
    try:
        document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        response = httpx.post(f"http://{server.url}/v2/models/slow/infer", json=document, timeout=30)
        assert response.status_code == 504
        assert "did not answer" in response.json()["error"]
    finally:
        server.stop()


def test_proxy_mode_forwards_unknown_names(triton: TritonServer) -> None:
    server = _server(triton, "http", routes={}, proxy_all=True)
    try:
        client = triton_http.InferenceServerClient(server.url)
        assert np.array_equal(client.infer("iris", [_iris_input(True)]).as_numpy("label"),
                              client.infer("iris", [_iris_input(False)]).as_numpy("label"))  # fmt: skip
        result = client.infer("slow_iris", [_iris_input(True)])  # only on Triton: forwarded
        assert result.get_response()["model_name"] == "slow_iris"
        assert httpx.get(f"http://{server.url}/v2/models/absent").status_code == 404
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_triton_down_gives_503_then_recovers(tmp_path: Path, protocol: str) -> None:
    """Kill Triton mid-run: clean 503s with Retry-After, model not ready, then recovery once it is back."""
    triton = TritonServer(build_repository(tmp_path / "models"), tmp_path)
    triton.start()
    server = _server(triton, protocol, retries=0)
    url = f"http://{server.url}/v2/models/iris_gpu"
    document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
    try:
        assert httpx.post(f"{url}/infer", json=document).status_code == 200
        triton.stop()
        response = httpx.post(f"{url}/infer", json=document, timeout=30)
        assert response.status_code == 503, response.text
        assert "unavailable" in response.json()["error"] and response.headers["retry-after"] == "5"
        assert httpx.get(f"{url}/ready").status_code == 400
        assert httpx.get(f"http://{server.url}/v2/health/ready").status_code == 400
        assert httpx.get(f"http://{server.url}/v2/models/iris/ready").status_code == 200  # local models keep serving
        triton.start()
        wait_for(triton.answers_iris, "tritonserver did not answer after its restart", timeout=60)
        response = httpx.post(f"{url}/infer", json=document, timeout=30)
        assert response.status_code == 200, response.text
        assert httpx.get(f"{url}/ready").status_code == 200
    finally:
        server.stop()
        triton.close()
