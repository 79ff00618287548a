"""The transport-neutral core that the REST app, the Lambda handlers and batch all call."""

from __future__ import annotations

import functools
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from adapters.base import ModelBackend
from adapters.errors import ModelNotReady, V2Error
from adapters.repository.labels import output_labels
from adapters.repository.model_config import config_to_dict
from adapters.repository.repository import ModelRepository
from adapters.router import ModelRouter
from adapters.types import Execution, InferCall, InferResult, ModelIndexEntry, ModelMetadata
from handler import __version__
from handler.protocol.classification import asks_classes, class_count, classify
from handler.protocol.limits import TensorCounts
from handler.protocol.merged_run import execution_shares, holds_rows, joined_results, merged_parts
from handler.protocol.merging import merge_key, merged_call, row_cap, split_result, within_cap
from handler.protocol.model_config import auto_config
from handler.protocol.resolved_model import ResolvedModel, resolve_model
from handler.protocol.statistics_counters import Statistics
from handler.protocol.version_catalog import Deployment, VersionCatalog, VersionUsage

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded

_T = TypeVar("_T")

#: A transport that answers server metadata.
Transport = Literal["rest", "grpc"]

_BOTH: tuple[str, ...] = ("binary_tensor_data", "parameters", "model_configuration", "statistics", "classification")

#: Extensions each transport serves, by Triton's names; server metadata lists exactly these. The V2 gRPC
#: service (the ``inference`` proto) has no RPC for a versions resource, so ``model_versions`` is REST's alone.
EXTENSIONS: dict[Transport, tuple[str, ...]] = {"rest": (*_BOTH, "model_versions"), "grpc": _BOTH}

#: The request parameter (and config.pbtxt parameter) naming a request-level content type, which may map several
#: of a request's inputs onto one of the model's (``TensorCounts.mapped_inputs``); the codecs name it too.
REQUEST_CONTENT_TYPE: Final = "content_type"

#: Tensor counts kept per backend object (kept with it, so that its id is not reused): a model version's backend
#: lives as long as its metadata and configuration do.
MAX_KEPT_COUNTS: Final = 256


def _at_once(step: Coroutine[Any, Any, _T]) -> _T | None:
    """What ``step`` returns when it finishes without waiting (driven here, with no event loop); None when it
    would wait (it is closed then)."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    step.close()
    return None


@functools.cache
def _capped(cap: int) -> TensorCounts:
    return TensorCounts.cap(cap)


class DataPlane:
    """Health, metadata and inference over local and remote models: what every transport reaches the models
    through (the router behind it is its own)."""

    def __init__(
        self,
        router: ModelRouter | ModelRepository,
        server_name: str = "oip-serverless",
        statistics: Statistics | None = None,
        extensions: Sequence[str] = (),
    ) -> None:
        self.router = router if isinstance(router, ModelRouter) else ModelRouter(router)
        self.repository = self.router.repository
        self.server_name = server_name
        self.server_version = __version__
        #: Triton's statistics extension, counted in this process unless shared (``Statistics(directory)``).
        self.statistics = statistics if statistics is not None else Statistics()
        #: lastUseTime of each model version (the ``model_versions`` extension).
        self.usage = VersionUsage()
        self._counts: dict[int, tuple[ModelBackend, TensorCounts]] = {}
        #: Extensions of this deployment's configuration, on every transport (``s3_tensors`` when it is on).
        self.extensions = tuple(extensions)

    def live(self) -> bool:
        """The process is up and answering."""
        return True

    async def ready(self) -> bool:
        """Every local model's default version can serve, and Triton answers if models are routed to it."""
        return await self.router.ready()

    def serves_only_locally(self) -> bool:
        """Whether no model is forwarded to Triton."""
        return self.router.client is None

    def local_ready(self) -> bool | None:
        """``ready`` told without an event loop, from any thread: for a server whose models are all local and
        loaded, whose backends tell readiness without waiting. None when telling it would wait."""
        ready = _at_once(self.router.ready())
        return None if ready is None else bool(ready)

    def loaded_metadata(self, name: str, version: str | None = None) -> ModelMetadata | None:
        """``model_metadata`` told without an event loop, from any thread, for a local model version whose backend
        has loaded; None for any other (forwarded, unknown, not yet loaded, broken): telling it would create, load
        or wait, or it is an error, which the event loop answers."""
        if self.router.route(name) is not None:
            return None
        backend = self.repository.existing_backend(name, version)
        try:
            if backend is None or backend.error is not None or not _at_once(backend.ready()):
                return None
            metadata = _at_once(backend.metadata())
        except V2Error:
            return None
        if metadata is None:
            return None
        return replace(metadata, name=name, versions=self.repository.entry(name).versions)

    def server_metadata(self, transport: Transport) -> dict[str, object]:
        """``$metadata_server_response``, listing the extensions that ``transport`` serves."""
        extensions = [*EXTENSIONS[transport], *self.extensions]
        return {"name": self.server_name, "version": self.server_version, "extensions": extensions}

    def model_names(self) -> list[str]:
        """Every model this server answers for by name."""
        return self.router.names()

    def serves_locally(self, name: str) -> bool:
        """Whether a model of this repository answers for ``name`` (else Triton does)."""
        return self.router.route(name) is None

    def check_model(self, name: str, version: str | None = None) -> None:
        """ModelNotFound for an unknown model or version (ModelNotReady for a broken one), before any work."""
        self.router.backend(name, version)

    async def model_metadata(self, name: str, version: str | None = None) -> ModelMetadata:
        """Metadata of one model version, listing every version that may be requested."""
        return await self.router.metadata(name, version)

    def model_parameters(self, name: str, version: str | None = None) -> Mapping[str, str]:
        """config.pbtxt's ``parameters`` of a local model version, as strings; empty for a model served by Triton
        (ModelNotFound for an unknown local version)."""
        if self.router.route(name) is not None:
            return {}
        return self.router.local_parameters(name, version)

    async def model_ready(self, name: str, version: str | None = None) -> bool:
        """Whether a model version can serve; ModelNotFound for unknown names/versions."""
        try:
            backend = self.router.backend(name, version)
        except ModelNotReady:
            return False
        backend.load()
        return await backend.ready()

    def version_catalog(self, repository_uri: str, deployment: Deployment | None = None) -> VersionCatalog:
        """The ``model_versions`` extension's resources of the local models (``repository_uri``: where the
        repository lives, for ``deploymentUri``; ``deployment``: how it scales and logs requests)."""
        return VersionCatalog(self.router, self.usage, repository_uri, self.server_version, deployment)

    def resolve(self, name: str, version: str | None) -> ResolvedModel:
        """The model a request names, looked up once for all of the request's steps (never raises: the lookup's
        error is raised by the first step that needs the backend)."""
        return resolve_model(self.router, name, version)

    def known_counts(self, model: ResolvedModel, cap: int) -> TensorCounts | None:
        """``tensor_counts`` when it is known without waiting (every request after a model version's first);
        None when it is not."""
        if model.remote or not model.known:
            return _capped(cap)
        backend = model.backend
        kept = self._counts.get(id(backend))
        return kept[1] if kept is not None and kept[0] is backend and kept[1].mapped_inputs == cap else None

    async def tensor_counts(self, model: ResolvedModel, cap: int) -> TensorCounts:
        """The most inputs and outputs a request to a model may name before it is decoded: a local model's own
        counts (``TensorCounts.of_model``), ``cap`` for inputs that a request-level content type (the request's,
        or the model's default) may map onto fewer of the model's. ``cap`` alone for a model served by Triton, or
        one that cannot answer now (the call reports why later, in the order it always has)."""
        known = self.known_counts(model, cap)
        if known is not None:
            return known
        try:
            backend = model.backend
            metadata = await backend.metadata()
            mapped = REQUEST_CONTENT_TYPE in model.parameters
        except V2Error:
            return _capped(cap)
        # A content type the model names (``content_type``, or ``content_type.<input>`` for one input) may turn
        # what a request sends into the model's datatype: its inputs are left to the backend's check.
        converted = any(key.startswith(REQUEST_CONTENT_TYPE) for key in model.parameters)
        not_bytes = () if converted else tuple((s.name, s.datatype) for s in metadata.inputs if s.datatype != "BYTES")
        counts = TensorCounts.of_model(model.name, len(metadata.inputs), len(metadata.outputs), cap, mapped, not_bytes)
        if len(self._counts) >= MAX_KEPT_COUNTS:
            self._counts.clear()
        self._counts[id(backend)] = (backend, counts)
        return counts

    async def model_metadata_of(self, model: ResolvedModel) -> ModelMetadata:
        """``model_metadata`` of a resolved model."""
        metadata = await model.backend.metadata()
        if model.remote:
            return metadata
        return replace(metadata, name=model.name, versions=self.repository.entry(model.name).versions)

    async def infer(self, name: str, version: str | None, call: InferCall) -> InferResult:
        """``run`` for a model named by ``name`` and ``version``."""
        return await self.run(self.resolve(name, version), call)

    async def run(self, model: ResolvedModel, call: InferCall) -> InferResult:
        """Run one inference on the model's backend, counted in the statistics, classified if asked."""
        backend = model.backend
        name = model.name
        started = time.perf_counter_ns()
        try:
            result = await backend.infer(call)
        except V2Error:
            self._count(name, backend.version or model.version or "", started, (None,), failed=True)
            raise
        self._count(name, result.model_version, started, (result.execution,))
        return await self._classify(model, call, result) if asks_classes(call.outputs) else result

    async def run_many(self, model: ResolvedModel, calls: Sequence[InferCall]) -> list[InferResult | V2Error]:
        """Several requests to one model version, each answered as ``infer`` answers it alone (its result, or the
        V2Error it raised) and counted as a request of its own; those that merge (``protocol/merging.py``) run
        as one execution and are split again. A merged execution that fails runs its requests one by one, so that
        each error stays with the request that caused it."""
        outcomes: list[InferResult | V2Error | None] = [None] * len(calls)
        groups: dict[Any, list[int]] = {}
        alone: list[int] = []
        for index, call in enumerate(calls):
            key = merge_key(call) if len(calls) > 1 else None
            if key is None:
                alone.append(index)
            else:
                groups.setdefault(key, []).append(index)
        cap = 0
        if any(len(group) > 1 for group in groups.values()):
            try:
                cap = row_cap(await self.model_metadata_of(model))
            except V2Error as exc:
                return [exc] * len(calls)
        for group in groups.values():
            start = 0
            while start < len(group):
                size = within_cap(group[start:], calls, cap) if cap else 1
                part = group[start : start + size]
                start += size
                merged = await self._merged(model, [calls[i] for i in part]) if size > 1 else None
                if merged is not None:
                    for index, result in zip(part, merged, strict=True):
                        outcomes[index] = result
                else:
                    alone += part
        for index in sorted(alone):
            try:
                outcomes[index] = await self.run(model, calls[index])
            except V2Error as exc:
                outcomes[index] = exc
        return [outcome for outcome in outcomes if outcome is not None]

    async def _merged(self, model: ResolvedModel, calls: list[InferCall]) -> list[InferResult] | None:
        """``calls`` run as one execution and split again, each counted; None (nothing counted) when that fails."""
        backend = model.backend
        started = time.perf_counter_ns()
        try:
            result = await backend.infer(merged_call(calls))
        except V2Error:
            return None
        results = split_result(result, calls)
        if results is None:
            return None
        self._count(model.name, result.model_version, started, [one.execution for one in results])
        if asks_classes(calls[0].outputs):
            results = [await self._classify(model, call, one) for call, one in zip(calls, results, strict=True)]
        return results

    async def run_merged(self, model: ResolvedModel, call: InferCall, requests: int) -> InferResult | None:
        """``requests`` requests of equal row counts that their decoder merged into ``call`` (no requested
        outputs), run as ``run_many`` runs requests it merges itself: in executions of at most ``max_batch_size``
        rows, each request counted with its share, one result holding every request's rows in order. None
        (nothing counted) when the model's inputs do not concatenate or an execution fails: ``run_many`` then."""
        if call.outputs:
            return None
        try:
            cap = row_cap(await self.model_metadata_of(model)) if requests > 1 else 1
        except V2Error:
            return None
        if not cap:
            return None
        rows = call.inputs[0].shape[0] // requests
        ran: list[tuple[int, int, InferResult]] = []
        for count, part in merged_parts(call, requests, cap):
            started = time.perf_counter_ns()
            try:
                result = await model.backend.infer(part)
            except V2Error:
                return None
            if requests > 1 and not holds_rows(result, count * rows):
                return None
            ran.append((count, started, result))
        for count, started, result in ran:
            executions = execution_shares(result.execution, count, rows) if requests > 1 else (result.execution,)
            self._count(model.name, result.model_version, started, executions)
        return joined_results([result for _, _, result in ran])

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
            self._count(name, failed, started, (None,), failed=True)
            raise
        self._count(name, forwarded.model_version, started, (None,))
        return forwarded

    def _count(
        self, name: str, version: str, started: int, executions: Sequence[Execution | None], failed: bool = False
    ) -> None:
        """Requests in the statistics, one per entry of ``executions`` (and, when they succeeded, the version's
        last use), ``started`` being ``perf_counter_ns`` when they reached the backend."""
        elapsed = time.perf_counter_ns() - started
        statistics = self.statistics
        if failed:
            for _ in executions:
                statistics.failure(name, version, elapsed)
            return
        statistics.successes(name, version, elapsed, executions)
        self.usage.touch(name, version)

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

    async def _classify(self, model: ResolvedModel, call: InferCall, result: InferResult) -> InferResult:
        counts = {o.name: class_count(o) for o in call.outputs}
        if not any(counts.values()) or model.remote:
            return result  # Triton classifies forwarded outputs itself
        backend = model.backend
        if backend.version != result.model_version:
            backend = self.router.backend(model.name, result.model_version)
        metadata = await backend.metadata()
        entry = self.repository.entry(model.name)
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
