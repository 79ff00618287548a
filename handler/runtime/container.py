"""How one Lambda container (or process) wires settings, repository and backends into its data plane, once.

The HTTP and batch entry points both take the data plane from here, so a function wired to HTTP and queue
events at once loads its models once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from handler.config.setting_lists import parse_default_versions
from handler.config.settings import Settings
from handler.protocol.dataplane import DataPlane
from handler.protocol.statistics_counters import Statistics
from handler.runtime.startup import check_repository, repository_failure

#: Explicit settings over the environment's for this process (``configure``).
_overrides: dict[str, Any] = {}


def configure(**overrides: Any) -> None:
    """Settings over the environment's for this process's data plane (``oip invoke --model-repository``; None:
    the environment's), given before ``settings()`` is first read; RuntimeError for a different value after."""
    given = {name: value for name, value in overrides.items() if value is not None}
    if settings.cache_info().currsize and any(getattr(settings(), k) != v for k, v in given.items()):
        raise RuntimeError("this process's settings were read already")
    _overrides.update(given)


@cache
def settings() -> Settings:
    """This process's settings, read once: a process answering one event at a time (``Settings.for_lambda``)."""
    return Settings.for_lambda(**_overrides)


@cache
def dataplane() -> DataPlane:
    """The data plane over the configured repository, default versions loaded."""
    return build_dataplane(settings())


def build_dataplane(settings: Settings) -> DataPlane:
    """Materialise the repository (copying it from S3 if needed), load defaults, return the core.

    StartupFailure (handler/runtime/startup.py) for anything that stops it: a repository that is not there or
    cannot be read or copied, a package it needs, an exception while loading the models (a model that does not load
    is not one: it is unavailable, and the others serve).

    onnxruntime is imported here, not with this module: its import may start a thread (its telemetry uploader,
    when a deployment turns it on: adapters/onnx/__init__.py), so a process that will fork (``oip serve``'s
    supervisor, handler/cli/serve.py) may import this module but must not build a data plane.
    """
    from adapters.onnx.backend import OnnxBackend, SessionSettings

    root = settings.model_repository
    check_repository(root)
    try:
        path = _local_repository(root, settings.cache_dir)
    except Exception as exc:
        raise repository_failure(exc, root, "copy") from exc
    session_settings = SessionSettings(
        settings.ort_intra_op_threads,
        settings.ort_inter_op_threads,
        settings.inline_run_ms,
        settings.dynamic_batching,
        settings.ort_allow_spinning,
    )
    try:
        repository = ModelRepository(
            path,
            lambda name, ver, file, config: OnnxBackend(name, ver, file, config, session_settings),
            parse_default_versions(settings.default_versions),
            settings.model_name,
        )
    except Exception as exc:
        raise repository_failure(exc, root, "read") from exc
    if settings.eager_load:
        try:
            repository.load_defaults()
        except Exception as exc:
            raise repository_failure(exc, root, "load the models of") from exc
    router = ModelRouter(repository, settings.triton)
    extensions = ("s3_tensors",) if settings.s3_tensor_prefixes else ()
    return DataPlane(router, settings.server_name, Statistics(settings.stats_dir), extensions)


def _local_repository(root: str, cache_dir: str | None) -> Path:
    """The local directory of the repository at ``root``: itself, or its copy of an object store's prefix."""
    if root.startswith("s3://"):
        from adapters.repository.object_uri import local_copy
        from adapters.repository.s3 import download_repository

        return download_repository(root, local_copy(root, cache_dir))
    if root.startswith("gs://"):
        from adapters.repository.gcs import download_gcs_repository
        from adapters.repository.object_uri import local_copy

        return download_gcs_repository(root, local_copy(root, cache_dir))
    return Path(root)
