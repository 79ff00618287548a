"""adapters/repository/repository.py: the states the start-up log shows, and which names are version directories."""

# covers: adapters/repository/repository.py

from __future__ import annotations

from pathlib import Path

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from tests.support import onnx_models


def _repository(root: Path) -> ModelRepository:
    return ModelRepository(root, lambda name, version, file, config: OnnxBackend(name, version, file, config))


def test_states_without_waiting(tmp_path: Path) -> None:
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "two", version=1)
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "two", version=2)
    (tmp_path / "corrupt" / "1").mkdir(parents=True)
    (tmp_path / "corrupt" / "1" / "model.onnx").write_bytes(b"not onnx")
    (tmp_path / "empty").mkdir()
    repository = _repository(tmp_path)
    repository.load_defaults()
    rows = [(row.name, row.version, row.state, row.reason[:40]) for row in repository.states()]
    assert rows == [
        ("corrupt", "1", "UNAVAILABLE", "model 'corrupt' version 1 failed to load"),
        ("empty", "", "UNAVAILABLE", "model 'empty' has no version directory t"),
        ("two", "1", "UNLOADED", ""),
        ("two", "2", "READY", ""),
    ]


def test_a_version_directory_is_named_by_ascii_digits(tmp_path: Path) -> None:
    """``²`` passes ``str.isdigit`` but not ``int``: it is no version, and the repository is read."""
    onnx_models.save(onnx_models.identity("FP32", [-1]), tmp_path, "m", version=1)
    (tmp_path / "m" / "²").mkdir()
    assert _repository(tmp_path).entry("m").versions == ("1",)
