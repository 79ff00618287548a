"""The transport-neutral core that the REST app, the Lambda handlers and batch all call."""

from __future__ import annotations

from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from adapters.errors import ModelNotReady
from adapters.onnx import OnnxBackend, SessionSettings
from adapters.repository import ModelRepository
from adapters.types import InferCall, InferResult, ModelIndexEntry, ModelMetadata
from handler.settings import Settings

#: Extensions this server implements, by Triton's names.
EXTENSIONS: tuple[str, ...] = ("binary_tensor_data", "parameters", "model_configuration")


def _package_version() -> str:
    try:
        return version("oip-serverless")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0.0.0"


class DataPlane:
    """Health, metadata and inference over a model repository."""

    def __init__(self, repository: ModelRepository, server_name: str = "oip-serverless") -> None:
        self.repository = repository
        self.server_name = server_name
        self.server_version = _package_version()

    def live(self) -> bool:
        """The process is up and answering."""
        return True

    async def ready(self) -> bool:
        """Every model's default version can serve."""
        for name in self.repository.names():
            try:
                if not await self.repository.backend(name).ready():
                    return False
            except ModelNotReady:
                return False
        return True

    def server_metadata(self) -> dict[str, object]:
        """``$metadata_server_response``."""
        return {"name": self.server_name, "version": self.server_version, "extensions": list(EXTENSIONS)}

    async def model_metadata(self, name: str, version: str | None = None) -> ModelMetadata:
        """Metadata of one model version, listing every version that may be requested."""
        metadata = await self.repository.backend(name, version).metadata()
        return replace(metadata, name=name, versions=self.repository.entry(name).versions)

    async def model_ready(self, name: str, version: str | None = None) -> bool:
        """Whether a model version can serve; ModelNotFound for unknown names/versions."""
        try:
            backend = self.repository.backend(name, version)
        except ModelNotReady:
            return False
        backend.load()
        return await backend.ready()

    async def infer(self, name: str, version: str | None, call: InferCall) -> InferResult:
        """Run one inference on the resolved version."""
        return await self.repository.backend(name, version).infer(call)

    async def index(self) -> list[ModelIndexEntry]:
        """Triton's repository index."""
        return await self.repository.index()

    def model_config(self, name: str, version: str | None = None) -> object:
        """The parsed config.pbtxt (None when the model has none)."""
        self.repository.resolve_version(name, version)
        return self.repository.entry(name).config


def build_dataplane(settings: Settings) -> DataPlane:
    """Materialise the repository (copying it from S3 if needed), load defaults, return the core."""
    root = settings.model_repository
    if root.startswith("s3://"):
        from adapters.s3 import download_repository

        path = download_repository(root)
    else:
        path = Path(root)
    session_settings = SessionSettings.from_env()
    repository = ModelRepository(
        path, lambda name, ver, file, config: OnnxBackend(name, ver, file, config, session_settings)
    )
    if settings.eager_load:
        repository.load_defaults()
    return DataPlane(repository, settings.server_name)
