"""How one Lambda container (or process) wires settings, repository and backends into its data plane, once.

The HTTP and batch entry points both take the data plane from here, so a function wired to HTTP and queue
events at once loads its models once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.triton.settings import TritonSettings
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.protocol.versions import parse_default_versions


@cache
def settings() -> Settings:
    """Settings from the environment, read once."""
    return Settings.from_env()


@cache
def dataplane() -> DataPlane:
    """The data plane over the configured repository, default versions loaded."""
    return build_dataplane(settings())


def build_dataplane(settings: Settings) -> DataPlane:
    """Materialise the repository (copying it from S3 if needed), load defaults, return the core.

    onnxruntime is imported here, not with this module: its import may start a thread (its telemetry uploader,
    when a deployment turns it on: adapters/onnx/__init__.py), so a process that will fork (``oip serve``'s
    supervisor, handler/cli/serve.py) may import this module but must not build a data plane.
    """
    from adapters.onnx.backend import OnnxBackend, SessionSettings

    root = settings.model_repository
    if root.startswith("s3://"):
        from adapters.repository.s3 import download_repository

        path = download_repository(root)
    elif root.startswith("gs://"):
        from adapters.repository.gcs import download_gcs_repository

        path = download_gcs_repository(root)
    else:
        path = Path(root)
    session_settings = SessionSettings.from_env()
    repository = ModelRepository(
        path,
        lambda name, ver, file, config: OnnxBackend(name, ver, file, config, session_settings),
        parse_default_versions(settings.default_versions),
    )
    if settings.eager_load:
        repository.load_defaults()
    return DataPlane(ModelRouter(repository, TritonSettings.from_env()), settings.server_name)
