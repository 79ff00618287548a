"""``InferenceService``: the one inference operation, whichever transport a request came by.

REST (V2, KServe V1 / TF Serving, Vertex AI, SageMaker), gRPC (unary and streaming) and batch (SQS, S3, Step
Functions, ``oip batch``) each decode their wire format into an ``InferCall`` (within ``counts`` and
``max_tensor_bytes``, which they take from here) and call ``infer`` (batch: ``infer_many``) inside ``observe``;
requests passed through to Triton as they are call ``forward``. The service alone:

- applies the content types (``codecs/content_types/bridge.py``): decoded on the way in, each output tagged (and
  converted where its content type says) on the way out;
- holds every decoded tensor to ``OIP_MAX_TENSOR_BYTES``, content types' conversions included;
- reads the inputs a request passes by reference in S3 and writes the outputs it asks to be written there (the
  ``s3_tensors`` extension, ``inference/s3_tensors.py``);
- runs the call through the ``DataPlane``, which counts it in the statistics and classifies outputs that ask;
- observes it (``observability/telemetry.py``: EMF metrics and X-Ray subsegments on Lambda, sampled payloads),
  with the status its outcome maps to (a V2Error's own, 500 for anything else).

Transports never reach the model router: what they need besides inference is the DataPlane's public methods.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from adapters import deadline as deadlines
from adapters.errors import V2Error
from adapters.types import InferCall, InferResult
from handler.codecs.content_types.bridge import (
    OutputPlan,
    decode_content_types,
    encode_content_types,
    mentions_content_type,
    model_defaults,
)
from handler.inference.admission import admission, admission_target_ms, default_inflight, largest_dynamic_batch
from handler.inference.byte_budget import Held, byte_budget, default_inflight_bytes, memory_limit
from handler.inference.call_checks import check_before_reading
from handler.inference.s3_tensors import (
    Destinations,
    extension_off,
    mentions_references,
    prepare_references,
    store_references,
    tensor_store,
)
from handler.observability.telemetry import InferObservation, Telemetry
from handler.protocol.cores import available_cores
from handler.protocol.dataplane import DataPlane
from handler.protocol.limits import TensorCounts, check_allocation
from handler.protocol.settings import Settings

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded


class InferenceService:
    """Inference over a ``DataPlane`` within ``settings``' limits, observed by ``telemetry``."""

    def __init__(self, dataplane: DataPlane, settings: Settings, telemetry: Telemetry | None = None) -> None:
        self.dataplane = dataplane
        self.settings = settings
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        #: OIP_MAX_TENSOR_BYTES: the largest tensor a request may make the server hold.
        self.max_tensor_bytes = settings.max_tensor_bytes
        #: OIP_MAX_REQUEST_TENSORS alone: the counts of a request whose model is not known yet.
        self.cap_counts = TensorCounts.cap(settings.max_request_tensors)
        #: ``observe(name, version)``: observe one inference request, from its first byte to its answer; recorded
        #: with the status its outcome gives however the block ends (the telemetry's own method: one call less
        #: on every request).
        self.observe: Callable[[str, str | None], AbstractContextManager[InferObservation]] = self.telemetry.observe
        #: ``span(step)``: a trace segment around one of a transport's steps (``decode``, ``encode``); the service's
        #: own are ``run`` and, for a body passed through to Triton, ``forward``.
        self.span: Callable[[str], AbstractContextManager[Any]] = self.telemetry.span
        #: ``passes_through(name)``: whether ``name`` is a Triton model whose request bodies may go to Triton as they
        #: are (``forward``).
        self.passes_through: Callable[[str], bool] = dataplane.passes_through
        #: ``known_counts(name, version)``: ``counts`` when it is known without waiting; None when it is not.
        self.known_counts: Callable[[str, str | None], TensorCounts | None] = functools.partial(
            dataplane.known_counts, cap=settings.max_request_tensors
        )
        #: The s3_tensors extension's reads and writes (OIP_S3_TENSOR_PREFIXES); None when it is off.
        self.s3_tensors = tensor_store(settings)
        #: OIP_MAX_INFLIGHT_BYTES: the request bytes this process holds at once (``byte_budget.py``).
        self.bytes_in_flight = byte_budget(
            settings.max_inflight_bytes or default_inflight_bytes(memory_limit(), settings.workers or 1)
        )

        #: OIP_MAX_INFLIGHT: the inference requests this process works on at once, and each model's adaptive gate
        #: (OIP_ADMISSION_TARGET_MS) (``admission.py``).
        self.admission = admission(
            settings.max_inflight or _default_inflight(dataplane, settings),
            admission_target_ms(settings),
            dataplane,
            settings.dynamic_batching,
        )

    async def counts(self, name: str, version: str | None) -> TensorCounts:
        """The most inputs and outputs a request to this model may name, checked before it is decoded."""
        return await self.dataplane.tensor_counts(name, version, self.settings.max_request_tensors)

    async def infer(
        self, name: str, version: str | None, call: InferCall, observation: InferObservation
    ) -> InferResult:
        """Answer one decoded request (``observation``: its ``observe`` block's) if the process admits it and its
        deadline has not passed (adapters/deadline.py); else its error, at once."""
        deadline = deadlines.current()
        if deadline is not None:
            deadline.check()
        ticket = self.admission.enter(name, deadline)
        answered = False
        try:
            result = await self._infer(name, version, call, observation)
            answered = True
            return result
        finally:
            ticket.leave(answered)

    async def _infer(
        self, name: str, version: str | None, call: InferCall, observation: InferObservation
    ) -> InferResult:
        if mentions_references(call):  # tensors by reference in S3: held of the bytes in flight while it runs
            with self.bytes_in_flight.hold() as held:
                call, destinations = await self._read_references(name, version, call, held)
                result = await self._run(name, version, call, observation)
                return await store_references(self.s3_tensors, result, destinations)
        return await self._run(name, version, call, observation)

    async def _read_references(
        self, name: str, version: str | None, call: InferCall, held: Held
    ) -> tuple[InferCall, Destinations]:
        """The call with its inputs read from S3, once it has been checked against the model (``call_checks.py``)
        and its objects' sizes against the byte budgets: an unknown input, a wrong datatype or shape is refused
        before any S3 request is made."""
        if self.s3_tensors is None:
            raise extension_off(call)
        metadata = await self.dataplane.model_metadata(name, version)
        defaults = model_defaults(self.dataplane, name, version)
        check_before_reading(call, metadata, defaults, self.dataplane.serves_locally(name))
        return await prepare_references(self.s3_tensors, call, held)

    async def _run(self, name: str, version: str | None, call: InferCall, observation: InferObservation) -> InferResult:
        """Content types applied, sizes checked, the call run through the data plane and its outputs tagged."""
        call, plan = await decode_content_types(self.dataplane, name, version, call)
        limit = self.max_tensor_bytes
        for tensor in call.inputs:  # check_sizes, inline: this runs on every request
            if tensor.data.nbytes > limit:
                check_sizes(call, limit)
        with self.telemetry.span("run"):
            result = await self.dataplane.infer(name, version, call)
        observation.version = result.model_version
        return encode_content_types(result, plan)

    async def infer_many(
        self, name: str, version: str | None, calls: Sequence[InferCall]
    ) -> list[InferResult | V2Error]:
        """Answer several decoded requests to one model version, each as ``infer`` answers it alone (its result,
        or the V2Error it raised) and observed as a request of its own; those that can run as one execution do
        (``DataPlane.infer_many``)."""
        try:
            plain = not model_defaults(self.dataplane, name, version)
        except V2Error:  # an unknown model: each call says so below
            plain = False
        with self.bytes_in_flight.hold() as held:  # what the calls' S3 objects hold, until every call is answered
            return await self._infer_many(name, version, calls, plain, held)

    async def _infer_many(
        self, name: str, version: str | None, calls: Sequence[InferCall], plain: bool, held: Held
    ) -> list[InferResult | V2Error]:
        observations = [InferObservation(name, version) for _ in calls]
        prepared: list[tuple[InferCall, OutputPlan | None] | V2Error] = []
        destinations: dict[int, Destinations] = {}  # by call, for tensors by reference in S3
        for index, call in enumerate(calls):
            try:
                if mentions_references(call):
                    call, destinations[index] = await self._read_references(name, version, call, held)
                if plain and not mentions_content_type(call):  # what decode_content_types would find
                    decoded, plan = call, None
                else:
                    decoded, plan = await decode_content_types(self.dataplane, name, version, call)
                check_sizes(decoded, self.max_tensor_bytes)
                prepared.append((decoded, plan))
            except V2Error as exc:
                prepared.append(exc)
        with self.telemetry.span("run"):
            ran = [item[0] for item in prepared if not isinstance(item, V2Error)]
            results = iter(await self.dataplane.infer_many(name, version, ran))
        outcomes: list[InferResult | V2Error] = []
        for index, (item, observation) in enumerate(zip(prepared, observations, strict=True)):
            outcome = item if isinstance(item, V2Error) else _answer(next(results), item[1], observation)
            if destinations.get(index) and not isinstance(outcome, V2Error):
                try:
                    outcome = await store_references(self.s3_tensors, outcome, destinations[index])
                except V2Error as exc:
                    outcome = exc
            self.telemetry.finish(observation, outcome if isinstance(outcome, V2Error) else None)
            outcomes.append(outcome)
        return outcomes

    async def forward(
        self, name: str, version: str | None, body: bytes, headers: dict[str, str], observation: InferObservation
    ) -> Forwarded:
        """Pass a request body through to the Triton model ``name`` routes to, as it came (``passes_through``), if
        admitted, as ``infer``."""
        ticket = self.admission.enter(name, deadlines.current())
        try:
            with self.telemetry.span("forward"):
                forwarded = await self.dataplane.forward(name, version, body, headers)
        finally:
            ticket.leave()
        observation.version = forwarded.model_version
        return forwarded


def _answer(
    outcome: InferResult | V2Error, plan: OutputPlan | None, observation: InferObservation
) -> InferResult | V2Error:
    """One of ``infer_many``'s outcomes with its outputs' content types applied."""
    if isinstance(outcome, V2Error):
        return outcome
    observation.version = outcome.model_version
    try:
        return encode_content_types(outcome, plan)
    except V2Error as exc:
        return exc


def _default_inflight(dataplane: DataPlane, settings: Settings) -> int:
    """``default_inflight`` for this process: its cores, and its repository's largest dynamic batch when it batches."""
    repository = dataplane.repository
    configs = [repository.entry(name).config for name in repository.names()] if settings.dynamic_batching else []
    return default_inflight(available_cores(), largest_dynamic_batch(configs))


def check_sizes(call: InferCall, limit: int) -> None:
    """PayloadTooLarge (413) for a tensor over ``limit`` bytes (OIP_MAX_TENSOR_BYTES), the wire's or what its
    content type made of it."""
    for tensor in call.inputs:
        if tensor.data.nbytes > limit:  # never less than the size counted below: most tensors end here
            check_allocation(tensor.name, tensor.datatype, tensor.shape, limit, tensor.data.size)
