"""The Triton-layout repository: versions, version_policy, default version, lazy loading."""

# covers: adapters/repository/model_config.py

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.errors import ModelNotFound, ModelNotReady
from adapters.onnx.backend import OnnxBackend
from adapters.repository.model_config import parse_model_config
from adapters.repository.repository import ModelRepository, select_versions
from tests.support import onnx_models


def _repository(root: Path) -> ModelRepository:
    return ModelRepository(root, lambda name, version, path, config: OnnxBackend(name, version, path, config))


def _versions(root: Path, name: str, versions: list[int], config: str | None = None) -> None:
    for version in versions:
        onnx_models.save(onnx_models.identity("FP32", [-1]), root, name, version, config)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", [1, 2, 5, 10]),
        ("version_policy: { all: {} }", [1, 2, 5, 10]),
        ("version_policy: { latest: { num_versions: 1 } }", [10]),
        ("version_policy: { latest: { num_versions: 2 } }", [5, 10]),
        ("version_policy: { specific: { versions: [2, 5, 7] } }", [2, 5]),
    ],
)
def test_version_policy(policy: str, expected: list[int]) -> None:
    config = parse_model_config(policy) if policy else None
    assert select_versions([1, 2, 5, 10], config) == expected


def test_versions_sort_numerically_and_default_is_highest(tmp_path: Path) -> None:
    _versions(tmp_path, "m", [2, 10, 9])
    repository = _repository(tmp_path)
    assert repository.entry("m").versions == ("2", "9", "10")
    assert repository.resolve_version("m", None) == "10"
    assert repository.resolve_version("m", "2") == "2"


def test_config_can_name_the_default_version(tmp_path: Path) -> None:
    config = 'parameters { key: "default_version" value { string_value: "1" } }'
    _versions(tmp_path, "m", [1, 2], config)
    assert _repository(tmp_path).resolve_version("m", None) == "1"


def test_policy_limits_what_can_be_requested(tmp_path: Path) -> None:
    _versions(tmp_path, "m", [1, 2, 3], "version_policy: { latest: { num_versions: 1 } }")
    repository = _repository(tmp_path)
    assert repository.entry("m").versions == ("3",)
    with pytest.raises(ModelNotFound, match="unknown model: 'm' version 1 is not found; available versions: 3"):
        repository.resolve_version("m", "1")


def test_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    _versions(tmp_path, "m", [1])
    with pytest.raises(ModelNotFound, match=r"Request for unknown model: 'x' is not found; this server has m$"):
        _repository(tmp_path).backend("x")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('name: "other"', "differs from the directory name"),
        ("version_policy: { specific: { versions: [7] } }", "no version directory"),
        ('parameters { key: "default_version" value { string_value: "4" } }', "default_version 4 is not among"),
        ("max_batch_size: [", "config.pbtxt"),
    ],
)
def test_bad_config_makes_the_model_unavailable_not_the_server(tmp_path: Path, config: str, message: str) -> None:
    _versions(tmp_path, "bad", [1], config)
    _versions(tmp_path, "good", [1])
    repository = _repository(tmp_path)
    with pytest.raises(ModelNotReady, match=message):
        repository.backend("bad")
    repository.load_defaults()
    assert repository.backend("good").error is None


async def _index(repository: ModelRepository) -> list[tuple[str, str, str]]:
    return [(row.name, row.version, row.state) for row in await repository.index()]


def test_defaults_load_eagerly_others_on_first_use(tmp_path: Path) -> None:
    import anyio

    _versions(tmp_path, "m", [1, 2])
    repository = _repository(tmp_path)
    repository.load_defaults()
    assert anyio.run(_index, repository) == [("m", "1", "UNLOADED"), ("m", "2", "READY")]
    repository.backend("m", "1").load()
    assert anyio.run(_index, repository) == [("m", "1", "READY"), ("m", "2", "READY")]


def test_model_file_name_from_config(tmp_path: Path) -> None:
    directory = tmp_path / "m" / "1"
    directory.mkdir(parents=True)
    import onnx

    onnx.save(onnx_models.identity("FP32", [-1]), directory / "custom.onnx")
    (tmp_path / "m" / "config.pbtxt").write_text('default_model_filename: "custom.onnx"')
    backend = _repository(tmp_path).backend("m")
    backend.load()
    assert backend.error is None


def test_missing_repository_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _repository(tmp_path / "absent")
