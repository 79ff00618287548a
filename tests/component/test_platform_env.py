"""``oip serve`` with no arguments in a child process, as Vertex AI and SageMaker start the container: the
platform's environment alone decides the port, the routes and the model repository."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from handler.config.platform import SAGEMAKER_MODEL_DIR, Platform
from handler.config.settings import Settings
from tests.support import platform_models
from tests.support.servers import HeldPort, environment, http_ok, running, serve_command

PLATFORM_VARIABLES = ("AIP_", "SAGEMAKER_", "OIP_", "MODEL_REPOSITORY")


@contextmanager
def serve_without_arguments(env: dict[str, str], health: str, command: list[str] | None = None) -> Iterator[str]:
    """``oip serve`` with no arguments (or ``command``) in the platform's environment ``env``, whose port variable
    names ``{port}``: a held port put there. Yields the base URL once ``health`` answers 200."""
    with HeldPort() as held:
        base = f"http://127.0.0.1:{held.port}"
        # OIP_PORT and OIP_HOST as a generic image bakes them in: the platform's variables must win over them.
        # Metrics off: its fixed default port (8002) would collide with other servers on this machine.
        baked = {"OIP_PORT": "1", "OIP_HOST": "127.0.0.2", "OIP_WORKERS": "1", "OIP_METRICS_PORT": "0"}
        platform = {key: value.format(port=held.port) for key, value in env.items()}
        with running(
            "oip serve",
            command or serve_command("--no-access-log"),
            lambda _: http_ok(base + health),
            env=environment(baked | platform, drop=PLATFORM_VARIABLES),
        ):
            yield base


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-model")
    platform_models._save(platform_models.half_plus_three(), root, "half_plus_three")
    return root


def test_vertex_ai_contract(repository: Path) -> None:
    env = {
        "AIP_HTTP_PORT": "{port}",
        "AIP_HEALTH_ROUTE": "/v1/endpoints/1/deployedModels/2",
        "AIP_PREDICT_ROUTE": "/v1/endpoints/1/deployedModels/2:predict",
        "AIP_STORAGE_URI": str(repository),
    }
    with serve_without_arguments(env, "/v1/endpoints/1/deployedModels/2") as base:
        response = httpx.post(f"{base}/v1/endpoints/1/deployedModels/2:predict", json={"instances": [1.0, 5.0]})
        assert response.json() == {"predictions": [3.5, 5.5]}


def test_sagemaker_contract(repository: Path) -> None:
    env = {"SAGEMAKER_BIND_TO_PORT": "{port}", "MODEL_REPOSITORY": str(repository)}
    with serve_without_arguments(env, "/ping") as base:
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
    entrypoint = Path(__file__).resolve().parents[2] / "infra" / "entrypoint.sh"
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", "OIP_PORT": "8000",
           "SAGEMAKER_BIND_TO_PORT": "{port}", "MODEL_REPOSITORY": str(repository)}  # fmt: skip
    with serve_without_arguments(env, "/ping", ["sh", str(entrypoint), "serve"]) as base:
        assert httpx.get(f"{base}/ping").status_code == 200
