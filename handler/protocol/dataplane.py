"""The transport-neutral core that the REST app, the Lambda handlers and batch all call."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from adapters.errors import ModelNotReady, V2Error
from adapters.repository.labels import output_labels
from adapters.repository.model_config import config_to_dict
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.types import InferCall, InferResult, ModelIndexEntry, ModelMetadata
from handler import __version__
from handler.protocol.classification import class_count, classify
from handler.protocol.model_config import auto_config
from handler.protocol.statistics import Statistics
from handler.protocol.versions import VersionUsage

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded

#: A transport that answers server metadata.
Transport = Literal["rest", "grpc"]

_BOTH: tuple[str, ...] = ("binary_tensor_data", "parameters", "model_configuration", "statistics", "classification")

#: Extensions each transport serves, by Triton's names; server metadata lists exactly these. The V2 gRPC
#: service (the ``inference`` proto) has no RPC for a versions resource, so ``model_versions`` is REST's alone.
EXTENSIONS: dict[Transport, tuple[str, ...]] = {"rest": (*_BOTH, "model_versions"), "grpc": _BOTH}


class DataPlane:
    """Health, metadata and inference over local and remote models."""

    def __init__(self, router: ModelRouter | ModelRepository, server_name: str = "oip-serverless") -> None:
        self.router = router if isinstance(router, ModelRouter) else ModelRouter(router)
        self.repository = self.router.repository
        self.server_name = server_name
        self.server_version = __version__
        #: Triton's statistics extension, counted in this process.
        self.statistics = Statistics()
        #: lastUseTime of each model version (the ``model_versions`` extension).
        self.usage = VersionUsage()

    def live(self) -> bool:
        """The process is up and answering."""
        return True

    async def ready(self) -> bool:
        """Every local model's default version can serve, and Triton answers if models are routed to it."""
        return await self.router.ready()

    def server_metadata(self, transport: Transport) -> dict[str, object]:
        """``$metadata_server_response``, listing the extensions that ``transport`` serves."""
        extensions = list(EXTENSIONS[transport])
        return {"name": self.server_name, "version": self.server_version, "extensions": extensions}

    def model_names(self) -> list[str]:
        """Every model this server answers for by name."""
        return self.router.names()

    async def model_metadata(self, name: str, version: str | None = None) -> ModelMetadata:
        """Metadata of one model version, listing every version that may be requested."""
        return await self.router.metadata(name, version)

    async def model_ready(self, name: str, version: str | None = None) -> bool:
        """Whether a model version can serve; ModelNotFound for unknown names/versions."""
        try:
            backend = self.router.backend(name, version)
        except ModelNotReady:
            return False
        backend.load()
        return await backend.ready()

    async def infer(self, name: str, version: str | None, call: InferCall) -> InferResult:
        """Run one inference on the resolved backend, counted in the statistics, classified if asked."""
        backend = self.router.backend(name, version)
        started = time.perf_counter_ns()
        try:
            result = await backend.infer(call)
        except V2Error:
            self.statistics.failure(name, backend.version or version or "", time.perf_counter_ns() - started)
            raise
        self.statistics.success(name, result.model_version, time.perf_counter_ns() - started, result.execution)
        self.usage.touch(name, result.model_version)
        return await self._classify(name, call, result) if call.outputs else result

    def passes_through(self, name: str) -> bool:
        """Whether ``name`` is a Triton model whose inference bodies may go to Triton as they are."""
        return self.router.passes_through(name)

    async def forward(self, name: str, version: str | None, body: bytes, headers: dict[str, str]) -> Forwarded:
        """Pass an inference body through to Triton unchanged, counted in the statistics as ``infer`` is."""
        started = time.perf_counter_ns()
        try:
            forwarded = await self.router.forward(name, version, body, headers)
        except V2Error:
            failed = self.router.backend(name, version).version or version or ""
            self.statistics.failure(name, failed, time.perf_counter_ns() - started)
            raise
        self.statistics.success(name, forwarded.model_version, time.perf_counter_ns() - started, None)
        self.usage.touch(name, forwarded.model_version)
        return forwarded

    async def index(self, ready_only: bool = False) -> list[ModelIndexEntry]:
        """Triton's repository index, local and remote models (``ready``: only those that can serve)."""
        rows = await self.router.index()
        return [row for row in rows if row.state == "READY"] if ready_only else rows

    async def model_statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        """``$model_stat`` per version: every model's, one model's, or one version's (404 for unknown ones)."""
        if name and version:
            self.router.backend(name, version)
            return self.statistics.documents([(name, version)])
        names = [name] if name else self.model_names()
        keys: list[tuple[str, str]] = []
        for model in names:
            if self.router.route(model) is not None:
                keys += self.statistics.recorded(model)
                continue
            entry = self.repository.entry(model)
            if entry.error is not None:
                if name:
                    raise ModelNotReady(entry.error)
                continue
            keys += [(model, v) for v in entry.versions]
        return self.statistics.documents(keys)

    async def _classify(self, name: str, call: InferCall, result: InferResult) -> InferResult:
        counts = {o.name: class_count(o) for o in call.outputs}
        if not any(counts.values()) or self.router.route(name) is not None:
            return result  # Triton classifies forwarded outputs itself
        metadata = await self.router.backend(name, result.model_version).metadata()
        entry = self.repository.entry(name)
        batched = metadata.max_batch_size > 0
        outputs = tuple(
            classify(t, counts[t.name], batched, output_labels(entry.directory, entry.config, t.name))
            if counts.get(t.name)
            else t
            for t in result.outputs
        )
        return replace(result, outputs=outputs)

    async def model_config(self, name: str, version: str | None = None) -> dict[str, object]:
        """Triton's model configuration JSON: config.pbtxt completed from the metadata, or Triton's own."""
        remote = await self.router.remote_config(name, version)
        if remote is not None:
            return remote
        metadata = await self.model_metadata(name, version)
        config = self.router.local_config(name, version)
        return auto_config(config_to_dict(config) if config is not None else {}, metadata)
