"""``oip serve`` with no arguments in a child process, as Vertex AI and SageMaker start the container: the
platform's environment alone decides the port, the routes and the model repository."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from handler.protocol.platform import SAGEMAKER_MODEL_DIR, Platform
from handler.protocol.settings import Settings
from tests import platform_models
from tests.conftest import free_port

PLATFORM_VARIABLES = ("AIP_", "SAGEMAKER_", "OIP_", "MODEL_REPOSITORY")


@contextmanager
def serve_without_arguments(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PLATFORM_VARIABLES)}
    # OIP_PORT and OIP_HOST as a generic image bakes them in: the platform's variables must win over them.
    command = [sys.executable, "-m", "handler.cli", "serve", "--no-access-log"]
    environment = {**clean, "OIP_PORT": "1", "OIP_HOST": "127.0.0.2", "OIP_WORKERS": "1", **env}
    with subprocess.Popen(command, env=environment, stderr=subprocess.PIPE) as process:
        try:
            yield process
        finally:
            process.terminate()
            process.wait(timeout=30)


def wait_for(process: subprocess.Popen[bytes], url: str) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"oip serve exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            return httpx.get(url, timeout=1)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-model")
    platform_models._save(platform_models.half_plus_three(), root, "half_plus_three")
    return root


def test_vertex_ai_contract(repository: Path) -> None:
    port = free_port()
    env = {
        "AIP_HTTP_PORT": str(port),
        "AIP_HEALTH_ROUTE": "/v1/endpoints/1/deployedModels/2",
        "AIP_PREDICT_ROUTE": "/v1/endpoints/1/deployedModels/2:predict",
        "AIP_STORAGE_URI": str(repository),
    }
    with serve_without_arguments(env) as process:
        base = f"http://127.0.0.1:{port}"
        health = wait_for(process, f"{base}/v1/endpoints/1/deployedModels/2")
        assert health.status_code == 200
        response = httpx.post(f"{base}/v1/endpoints/1/deployedModels/2:predict", json={"instances": [1.0, 5.0]})
        assert response.json() == {"predictions": [3.5, 5.5]}


def test_sagemaker_contract(repository: Path) -> None:
    port = free_port()
    env = {"SAGEMAKER_BIND_TO_PORT": str(port), "MODEL_REPOSITORY": str(repository)}
    with serve_without_arguments(env) as process:
        base = f"http://127.0.0.1:{port}"
        assert wait_for(process, f"{base}/ping").status_code == 200
        document = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [2.0]}]}
        response = httpx.post(f"{base}/invocations", json=document)
        assert response.json()["outputs"][0]["data"] == [4.0]


def _platform(env: dict[str, str]) -> Platform:
    return Settings.from_env(env).platform


def test_platform_detection_and_defaults() -> None:
    sagemaker = _platform({"SAGEMAKER_BIND_TO_PORT": "9000"})
    assert (sagemaker.name, sagemaker.host, sagemaker.port) == ("sagemaker", "0.0.0.0", 9000)
    assert sagemaker.model_repository == SAGEMAKER_MODEL_DIR == "/opt/ml/model"
    assert _platform({"OIP_PLATFORM": "sagemaker"}).port == 8080
    vertex = _platform({"AIP_HTTP_PORT": "8080", "AIP_STORAGE_URI": "gs://b/m", "OIP_PORT": "1"})
    assert (vertex.name, vertex.address(), vertex.model_repository) == ("vertex", ("0.0.0.0", 8080), "gs://b/m")
    assert _platform({"AIP_HTTP_PORT": "8080", "MODEL_REPOSITORY": "/m"}).model_repository == "/m"
    server = _platform({"OIP_PORT": "9"})
    assert (server.name, server.address(), server.model_repository) == ("server", ("127.0.0.1", 9), None)
    assert server.address("0.0.0.0", 7) == ("0.0.0.0", 7)  # explicit --host/--port win
    with pytest.raises(ValueError, match="AIP_HTTP_PORT"):
        _platform({"AIP_HTTP_PORT": "http"})
    with pytest.raises(ValueError, match="OIP_PLATFORM"):
        _platform({"OIP_PLATFORM": "azure"})


def test_the_images_entrypoint_serves_sagemakers_serve_argument(repository: Path) -> None:
    # SageMaker runs `docker run IMAGE serve`; infra/entrypoint.sh is the image's ENTRYPOINT.
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PLATFORM_VARIABLES)}
    env = {**clean, "PATH": f"{Path(sys.executable).parent}:{clean.get('PATH', '')}", "OIP_PORT": "8000",
           "OIP_WORKERS": "1", "SAGEMAKER_BIND_TO_PORT": str(port), "MODEL_REPOSITORY": str(repository)}  # fmt: skip
    entrypoint = Path(__file__).resolve().parents[2] / "infra" / "entrypoint.sh"
    with subprocess.Popen(["sh", str(entrypoint), "serve"], env=env, stderr=subprocess.PIPE) as process:
        try:
            assert wait_for(process, f"http://127.0.0.1:{port}/ping").status_code == 200
        finally:
            process.terminate()
            process.wait(timeout=30)
