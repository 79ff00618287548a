"""The ``model_versions`` extension: AI Platform's Version resource for each served version, over real sessions.

The seed (projects.models.versions) names the fields: "name", "description", "isDefault" ("If true, this version
will be used to handle prediction requests that do not specify a version"), "deploymentUri", "createTime",
"lastUseTime" ("The time the version was last used for prediction"), "runtimeVersion", "state" (READY "The
version is ready for prediction", CREATING, FAILED "errorMessage should contain the details of the failure",
UNKNOWN "The version state is unspecified"), "errorMessage", "labels", "framework", "pythonVersion",
"autoScaling" ({"minNodes", "maxNodes"}) and "requestLoggingConfig" ({"samplingPercentage": "a fraction from
0 to 1"}).
"""

# covers: handler/protocol/resolved_model.py
# covers: handler/protocol/version_catalog.py

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from adapters.errors import InvalidInput
from handler.config.setting_lists import parse_default_versions
from handler.config.settings import Settings
from handler.protocol.version_catalog import Deployment, parse_labels, rfc3339
from handler.server import build_app
from tests.conftest import make_settings
from tests.support import onnx_models

CREATED = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC).timestamp()
CONFIG = """
parameters { key: "default_version" value { string_value: "2" } }
parameters { key: "description" value { string_value: "identity over FP32 vectors" } }
parameters { key: "labels" value { string_value: "team=vision,stage=prod" } }
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``multi``: versions 1 and 2 load, version 3 is not an ONNX file; ``plain`` has no config at all."""
    root = tmp_path_factory.mktemp("versions")
    for version in (1, 2):
        path = onnx_models.save(onnx_models.identity("FP32", [-1]), root, "multi", version, config=CONFIG)
        os.utime(path, (CREATED, CREATED))
    broken = root / "multi" / "3"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx file")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "plain")
    return root


@pytest.fixture()
def client(repository: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    for key in ("OIP_AUTOSCALING_MIN_NODES", "OIP_AUTOSCALING_MAX_NODES", "OIP_REQUEST_LOG_STREAM"):
        monkeypatch.delenv(key, raising=False)
    with TestClient(build_app(make_settings(repository)), raise_server_exceptions=False) as test_client:
        yield test_client


def infer(client: TestClient, path: str) -> int:
    document = {"inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]}
    return client.post(path, content=orjson.dumps(document), headers={"Content-Type": "application/json"}).status_code


def test_server_metadata_lists_the_extension(client: TestClient) -> None:
    assert "model_versions" in client.get("/v2").json()["extensions"]


def test_list_has_one_resource_per_served_version_with_the_seeds_fields(client: TestClient, repository: Path) -> None:
    response = client.get("/v2/models/multi/versions")
    assert response.status_code == 200
    versions = response.json()["versions"]
    assert [v["name"] for v in versions] == [
        "models/multi/versions/1",
        "models/multi/versions/2",
        "models/multi/versions/3",
    ]
    default = versions[1]
    assert (
        default
        == {
            "name": "models/multi/versions/2",
            "description": "identity over FP32 vectors",
            "isDefault": True,
            "deploymentUri": "multi/2",  # its path inside the repository, not the server's filesystem path
            "createTime": "2024-05-01T12:00:00Z",
            "runtimeVersion": default["runtimeVersion"],
            "state": "READY",  # the default version loads at start-up
            "labels": {"team": "vision", "stage": "prod"},
            "framework": "ONNX",
            "pythonVersion": ".".join(platform.python_version_tuple()[:2]),
        }
    )
    assert default["runtimeVersion"].startswith("oip-serverless ") and "onnxruntime " in default["runtimeVersion"]
    assert [v["isDefault"] for v in versions].count(True) == 1
    # Not loaded yet: the state says so (UNKNOWN) without loading it, and nothing claims READY.
    assert versions[0]["state"] == "UNKNOWN" and "errorMessage" not in versions[0]
    assert client.get("/v2/models/multi/versions/1/resource").json()["state"] == "UNKNOWN"
    # Fields that do not apply are omitted, not faked.
    for absent in ("machineType", "etag", "packageUris", "acceleratorConfig", "lastUseTime", "autoScaling"):
        assert absent not in default


def test_a_version_that_fails_to_load_is_failed_with_its_error(client: TestClient) -> None:
    assert infer(client, "/v2/models/multi/versions/3/infer") == 503
    resource = client.get("/v2/models/multi/versions/3/resource").json()
    assert resource["state"] == "FAILED"
    assert "version 3 failed to load" in resource["errorMessage"]
    assert resource["isDefault"] is False


def test_loading_on_first_use_makes_a_version_ready_and_sets_last_use_time(client: TestClient) -> None:
    before = datetime.now(UTC)
    assert infer(client, "/v2/models/multi/versions/1/infer") == 200
    resource = client.get("/v2/models/multi/versions/1/resource").json()
    assert resource["state"] == "READY"
    used = datetime.fromisoformat(resource["lastUseTime"].replace("Z", "+00:00"))
    assert before <= used <= datetime.now(UTC)
    assert "lastUseTime" not in client.get("/v2/models/multi/versions/2/resource").json()


def test_a_model_without_config_has_no_description_or_labels(client: TestClient) -> None:
    (resource,) = client.get("/v2/models/plain/versions").json()["versions"]
    assert resource["isDefault"] is True and resource["state"] == "READY"
    assert "labels" not in resource and "description" not in resource


@pytest.mark.parametrize(
    "path",
    ["/v2/models/nope/versions", "/v2/models/nope/versions/1/resource", "/v2/models/multi/versions/9/resource"],
)
def test_unknown_model_or_version_is_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert set(response.json()) == {"error"}


def test_the_deployment_overrides_the_default_version(repository: Path) -> None:
    app = build_app(make_settings(repository, default_versions="multi=1"))
    with TestClient(app) as client:
        versions = client.get("/v2/models/multi/versions").json()["versions"]
        assert [v["isDefault"] for v in versions] == [True, False, False]
        assert client.get("/v2/models/multi").json()["versions"] == ["1", "2", "3"]
        assert infer(client, "/v2/models/multi/infer") == 200
        assert "lastUseTime" in client.get("/v2/models/multi/versions/1/resource").json()


def test_a_default_override_naming_no_served_version_makes_the_model_unavailable(repository: Path) -> None:
    with TestClient(build_app(make_settings(repository, default_versions="multi=7"))) as client:
        response = client.get("/v2/models/multi/versions")
        assert response.status_code == 503
        assert "the deployment's default version 7 is not among" in response.json()["error"]


def test_scaling_and_request_logging_as_the_deployment_configured_them(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OIP_AUTOSCALING_MIN_NODES", "2")
    monkeypatch.setenv("OIP_AUTOSCALING_MAX_NODES", "50")
    monkeypatch.setenv("OIP_REQUEST_LOG_SAMPLING", "25")
    monkeypatch.setenv("OIP_REQUEST_LOG_STREAM", "oip-request-log")
    with TestClient(build_app(Settings.from_env(model_repository=str(repository)))) as client:
        resource = client.get("/v2/models/plain/versions/1/resource").json()
    assert resource["autoScaling"] == {"minNodes": 2, "maxNodes": 50}
    assert resource["requestLoggingConfig"] == {"samplingPercentage": 0.25}


def test_deployment_fields_are_omitted_when_not_configured() -> None:
    def deployment(env: dict[str, str]) -> Deployment:
        return Deployment.from_settings(Settings.from_env(env))

    assert deployment({}).fields() == {}
    # Sampling without a stream logs nothing, so it is not reported.
    assert deployment({"OIP_REQUEST_LOG_SAMPLING": "10"}).fields() == {}
    assert deployment({"OIP_AUTOSCALING_MIN_NODES": "0"}).fields() == {"autoScaling": {"minNodes": 0}}


def test_labels_use_gclouds_syntax() -> None:
    assert parse_labels("team=vision, stage=prod,empty=") == {"team": "vision", "stage": "prod", "empty": ""}
    for bad in ("Team=x", "team", "1team=x", "team=Vision", "team=a b"):
        with pytest.raises(InvalidInput, match="label"):
            parse_labels(bad, "m")


def test_default_versions_syntax() -> None:
    assert parse_default_versions("iris=2, tiny_image=1") == {"iris": "2", "tiny_image": "1"}
    with pytest.raises(ValueError, match="OIP_DEFAULT_VERSIONS"):
        parse_default_versions("iris")


def test_rfc3339() -> None:
    assert rfc3339(CREATED) == "2024-05-01T12:00:00Z"
    assert rfc3339(CREATED + 0.5) == "2024-05-01T12:00:00.500000Z"
