"""Nothing outside the repository is read or written.

An object-store repository is copied under its local copy only: real S3 objects (moto's standalone server) whose
keys try to leave it are refused. config.pbtxt's ``label_filename``, ``default_model_filename`` (and config.pbtxt
itself) stay inside the model's directory: a model naming a file outside is not ready, and its reason echoes
neither that file's contents nor the server's paths.
"""

# covers: adapters/repository/confined.py
# covers: adapters/repository/object_uri.py

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient

from adapters.errors import InvalidInput
from adapters.repository.object_uri import local_target
from adapters.repository.s3 import download_repository
from handler.server import build_app
from tests.conftest import make_settings
from tests.integration.conftest import aws_env, moto_server  # noqa: F401  (fixtures)
from tests.support import onnx_models

SECRET = "top-secret-line-one\ntop-secret-line-two\n"
LABELS = "setosa\nversicolor\nvirginica\n"
CLASSIFIER_CONFIG = 'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "{}" }} ]\n'
MODEL_FILE_CONFIG = 'default_model_filename: "{}"\n'


# -- object keys of an S3 repository -------------------------------------------------------------------------------


ESCAPING_KEYS = [
    "repo//tmp/oip-escape-absolute",  # the object's file would be /tmp/oip-escape-absolute
    "repo/../oip-escape-parent",
    "repo/m/../../oip-escape-climb",
    "repo/./m/dot-segment",
    "repo/m//double-slash",
    "repo/m\\..\\..\\oip-escape-backslash",
]


def _bucket(name: str, keys: dict[str, bytes]) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=name)
    for key, body in keys.items():
        s3.put_object(Bucket=name, Key=key, Body=body)
    listed = [item["Key"] for item in s3.list_objects_v2(Bucket=name)["Contents"]]
    assert sorted(listed) == sorted(keys)  # S3 (moto) kept every key as written


@pytest.mark.integration
@pytest.mark.parametrize("key", ESCAPING_KEYS)
def test_an_object_key_leaving_the_copy_is_refused(aws_env: str, tmp_path: Path, key: str) -> None:  # noqa: F811
    bucket = f"escape-{ESCAPING_KEYS.index(key)}"
    model = onnx_models.identity("FP32", [-1]).SerializeToString()
    _bucket(bucket, {"repo/m/1/model.onnx": model, key: b"written by whoever can write to the bucket"})
    cache = tmp_path / "cache"
    before = _files_outside(tmp_path, cache)
    with pytest.raises(InvalidInput, match="is not a plain relative path under 'repo/'") as refused:
        download_repository(f"s3://{bucket}/repo", cache / "copy")
    assert repr(key) in str(refused.value)
    assert str(tmp_path) not in str(refused.value)
    assert _files_outside(tmp_path, cache) == before
    assert not Path("/tmp/oip-escape-absolute").exists()
    assert not (cache / "copy" / ".complete").exists()  # a later start tries again rather than serve half a copy


@pytest.mark.integration
def test_folder_markers_and_plain_keys_are_copied(aws_env: str, tmp_path: Path) -> None:  # noqa: F811
    model = onnx_models.identity("FP32", [-1]).SerializeToString()
    _bucket("plain-keys", {"repo/": b"", "repo/m/": b"", "repo/m/1/model.onnx": model, "repo/m/labels..txt": b"a"})
    copy = download_repository("s3://plain-keys/repo", tmp_path / "copy")
    files = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
    assert files == [".complete", "m/1/model.onnx", "m/labels..txt"]


@pytest.mark.integration
def test_a_link_in_the_cache_does_not_lead_the_copy_outside(aws_env: str, tmp_path: Path) -> None:  # noqa: F811
    """A stale copy whose directory is a link elsewhere (left by anyone who could write to the cache)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "m").symlink_to(outside, target_is_directory=True)
    _bucket("linked-cache", {"repo/m/1/model.onnx": b"onnx bytes"})
    with pytest.raises(InvalidInput, match="outside the local copy"):
        download_repository("s3://linked-cache/repo", copy)
    assert list(outside.iterdir()) == []


def _files_outside(root: Path, cache: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.is_relative_to(cache)}


@pytest.mark.parametrize(
    ("key", "expected"),
    [("p/", None), ("p/m/", None), ("p/m/1/model.onnx", "m/1/model.onnx"), ("p/a..b", "a..b")],
)
def test_local_target_of_plain_keys(tmp_path: Path, key: str, expected: str | None) -> None:
    """The rule gs:// copies share with s3:// ones (``object_uri.local_target``)."""
    target = local_target(tmp_path, key, "p/")
    assert (None if target is None else target.relative_to(tmp_path.resolve()).as_posix()) == expected


@pytest.mark.parametrize("key", ["p//etc/x", "p/../x", "p/m/../../x", "p/./x", "p/m\\x", "p/m\x00x", "q/x", "p/m//x"])
def test_local_target_refuses_keys_leaving_the_copy(tmp_path: Path, key: str) -> None:
    with pytest.raises(InvalidInput, match="the copy is refused"):
        local_target(tmp_path / "copy", key, "p/")
    assert list(tmp_path.iterdir()) == []  # not even a directory was made


# -- files a model's config.pbtxt names ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def escapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository beside a secret file and an outside model, with one model per way out of its directory."""
    base = tmp_path_factory.mktemp("escapes")
    secret = base / "secret.txt"
    secret.write_text(SECRET)
    outside_model = onnx_models.save(onnx_models.identity("FP32", [-1]), base / "elsewhere", "outside_model")
    root = base / "repository"

    def classifier(name: str, label_filename: str) -> Path:
        config = CLASSIFIER_CONFIG.format(label_filename)
        onnx_models.save(onnx_models.identity("FP32", [-1, 3]), root, name, config=config)
        return root / name

    def with_model_file(name: str, filename: str) -> Path:
        onnx_models.save(onnx_models.identity("FP32", [-1]), root, name, config=MODEL_FILE_CONFIG.format(filename))
        return root / name

    (classifier("labels_ok", "labels.txt") / "labels.txt").write_text(LABELS)
    (classifier("labels_sub", "sub/labels.txt") / "sub").mkdir()
    (root / "labels_sub" / "sub" / "labels.txt").write_text(LABELS)
    classifier("labels_climb", "../../../../../../../../../../etc/passwd")
    classifier("labels_relative", "../../secret.txt")
    classifier("labels_absolute", str(secret))
    (classifier("labels_link", "labels.txt") / "labels.txt").symlink_to(secret)
    (classifier("labels_link_dir", "d/secret.txt") / "d").symlink_to(base, target_is_directory=True)
    classifier("labels_missing", "absent.txt")
    with_model_file("file_climb", "../../../elsewhere/outside_model/1/model.onnx")
    with_model_file("file_absolute", str(outside_model))
    (with_model_file("file_link", "linked.onnx") / "1" / "linked.onnx").symlink_to(outside_model)
    (with_model_file("file_sub", "sub/custom.onnx") / "1" / "sub").mkdir()
    onnx.save(onnx_models.identity("FP32", [-1]), root / "file_sub" / "1" / "sub" / "custom.onnx")
    (root / "model_link" / "1").mkdir(parents=True)
    (root / "model_link" / "1" / "model.onnx").symlink_to(outside_model)
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "config_link")
    (root / "config_link" / "config.pbtxt").symlink_to(secret)
    # A model directory that is itself a link is served from its target (the files stay inside that).
    onnx_models.save(onnx_models.identity("FP32", [-1]), base / "elsewhere", "linked_model")
    (root / "linked_model").symlink_to(base / "elsewhere" / "linked_model", target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def client(escapes: Path) -> Iterator[TestClient]:
    with TestClient(build_app(make_settings(escapes)), raise_server_exceptions=False) as test_client:
        yield test_client


def _classify(client: TestClient, model: str) -> httpx.Response:
    document = {
        "inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "data": [0.1, 0.7, 0.2]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
    }
    return client.post(f"/v2/models/{model}/infer", json=document)


def _infer(client: TestClient, model: str) -> httpx.Response:
    document = {"inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]}
    return client.post(f"/v2/models/{model}/infer", json=document)


def test_labels_inside_the_model_directory_are_read(client: TestClient) -> None:
    for model in ("labels_ok", "labels_sub"):
        response = _classify(client, model)
        assert response.status_code == 200, response.text
        assert response.json()["outputs"][0]["data"] == ["0.700000:1:versicolor", "0.200000:2:virginica"]


@pytest.mark.parametrize(
    "model",
    ["labels_climb", "labels_relative", "labels_absolute", "labels_link", "labels_link_dir", "config_link",
     "file_climb", "file_absolute", "file_link", "model_link"],
)  # fmt: skip
def test_a_model_naming_a_file_outside_its_directory_is_not_ready(
    client: TestClient, escapes: Path, model: str
) -> None:
    answers = [
        _classify(client, model) if model.startswith("labels") else _infer(client, model),
        client.get(f"/v2/models/{model}/ready"),
        client.get(f"/v2/models/{model}"),
    ]
    assert [response.status_code for response in answers] == [503, 400, 503], [r.text for r in answers]
    (row,) = [row for row in client.post("/v2/repository/index").json() if row["name"] == model]
    assert row["state"] == "UNAVAILABLE"
    assert "names a file outside the model's directory" in row["reason"]
    for text in [row["reason"], *(response.text for response in answers)]:
        assert "top-secret" not in text and "root:" not in text
        assert str(escapes.parent) not in text


@pytest.mark.parametrize("model", ["file_sub", "linked_model"])
def test_a_model_file_inside_the_model_directory_loads(client: TestClient, model: str) -> None:
    response = _infer(client, model)
    assert response.status_code == 200, response.text
    assert np.allclose(response.json()["outputs"][0]["data"], [1.0, 2.0])


def test_a_missing_label_file_is_named_without_the_servers_path(client: TestClient, escapes: Path) -> None:
    response = _classify(client, "labels_missing")
    assert response.status_code == 503
    assert "labels_missing/absent.txt" in response.json()["error"]
    assert str(escapes) not in response.text


def test_the_other_models_are_served(client: TestClient) -> None:
    """One model's escape makes that model unavailable, never the server."""
    ready = {row["name"] for row in client.post("/v2/repository/index", json={"ready": True}).json()}
    assert {"labels_ok", "labels_sub", "file_sub", "linked_model"} <= ready
