"""How one Lambda container (or process) wires settings, repository and backends into its data plane, once.

The HTTP and batch entry points both take the data plane from here, so a function wired to HTTP and queue
events at once loads its models once.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from handler.protocol.dataplane import DataPlane
from handler.protocol.settings import Settings
from handler.protocol.versions import parse_default_versions

if TYPE_CHECKING:
    from adapters.triton.settings import TritonSettings


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
    return DataPlane(ModelRouter(repository, _triton_settings()), settings.server_name)


def _triton_settings() -> TritonSettings | None:
    """Triton's settings when ``OIP_TRITON_URL`` is set; None otherwise (nothing can be forwarded without a URL,
    and a deployment with no remote model does not import the Triton adapter at all)."""
    if not os.environ.get("OIP_TRITON_URL"):
        return None
    from adapters.triton.settings import TritonSettings

    return TritonSettings.from_env()
