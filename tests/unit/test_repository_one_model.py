"""A repository that is one model's own files, as KServe's storage initializer leaves them at /mnt/models, served
under the name ``oip serve --model_name`` gives (adapters/repository/repository.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import onnx
import pytest

from adapters.errors import ModelNotReady
from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository, model_file, one_model
from tests.support import onnx_models


def _repository(root: Path, model_name: str | None = None) -> ModelRepository:
    factory = lambda name, version, path, config: OnnxBackend(name, version, path, config)  # noqa: E731
    return ModelRepository(root, factory, model_name=model_name)


def _flat(root: Path, file_name: str = "model.onnx") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    onnx.save(onnx_models.identity("FP32", [-1]), root / file_name)
    return root


def _loads(repository: ModelRepository, name: str) -> bool:
    backend = repository.backend(name)
    backend.load()
    return asyncio.run(backend.ready())


def test_a_model_file_at_the_top_is_version_1_of_the_named_model(tmp_path: Path) -> None:
    root = _flat(tmp_path / "mnt")
    repository = _repository(root, "iris")
    assert repository.names() == ["iris"]
    entry = repository.entry("iris")
    assert entry.versions == ("1",) and entry.default_version == "1"
    assert model_file(entry, "1") == root / "model.onnx"
    assert [(row.name, row.version, row.state) for row in repository.states()] == [("iris", "1", "UNLOADED")]


def test_the_only_onnx_file_is_served_whatever_its_name(tmp_path: Path) -> None:
    root = _flat(tmp_path / "mnt", "iris.onnx")
    repository = _repository(root, "iris")
    assert model_file(repository.entry("iris"), "1") == root / "iris.onnx"
    assert _loads(repository, "iris")


def test_two_onnx_files_and_no_model_onnx_make_the_model_unavailable(tmp_path: Path) -> None:
    root = _flat(_flat(tmp_path / "mnt", "a.onnx"), "b.onnx")
    repository = _repository(root, "iris")
    with pytest.raises(ModelNotReady, match=r"2 \.onnx files at its top"):
        repository.backend("iris")


def test_a_model_directory_with_config_and_versions_is_the_named_model(tmp_path: Path) -> None:
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "mnt", 1, 'name: "iris"\n')
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "mnt", 2)
    # The InferenceService names the model: config.pbtxt's own name does not have to agree.
    repository = _repository(tmp_path / "mnt", "iris-grpc")
    entry = repository.entry("iris-grpc")
    assert entry.versions == ("1", "2") and entry.flat_file is None and entry.error is None
    assert model_file(entry, "2") == tmp_path / "mnt" / "2" / "model.onnx"


def test_version_directories_alone_are_one_model(tmp_path: Path) -> None:
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "mnt", 3)
    assert one_model(tmp_path / "mnt")
    assert _repository(tmp_path / "mnt", "m").entry("m").versions == ("3",)


def test_a_triton_repository_keeps_its_models_names(tmp_path: Path) -> None:
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "a")
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "b", 1, 'name: "b"\n')
    assert not one_model(tmp_path)
    assert _repository(tmp_path, "iris").names() == ["a", "b"]


def test_without_a_model_name_nothing_changes(tmp_path: Path) -> None:
    """Without a model name, a repository is model directories only: files at its top are no model of it."""
    root = _flat(tmp_path / "mnt")
    onnx_models.save(onnx_models.identity("FP32", [-1]), root, "a")
    assert _repository(root).names() == ["a"]


def test_a_flat_model_file_must_stay_inside(tmp_path: Path) -> None:
    outside = _flat(tmp_path / "elsewhere")
    root = tmp_path / "mnt"
    root.mkdir()
    (root / "model.onnx").symlink_to(outside / "model.onnx")
    repository = _repository(root, "iris")
    with pytest.raises(ModelNotReady, match="outside the model's directory"):
        repository.backend("iris")
