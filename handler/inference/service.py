"""``InferenceService``: the one inference operation, whichever transport a request came by; one per process.

It is built where the process is assembled (the Lambda init, each ``oip serve`` worker, ``oip batch``, the batch
function's init) and handed to every transport. REST (V2, KServe V1 / TF Serving, Vertex AI, SageMaker), gRPC
(unary and streaming) and SQS messages hand each request to ``answer`` as an ``Exchange`` (``exchange.py``: how the
request is read, decoded and encoded; requests passed through to Triton as they are, too); file batches (S3, Step
Functions, ``oip batch``) hand a chunk's lines merged by their decoder to ``infer_merged`` and any others to
``infer_many``. All go through the same per-call steps (admission, ``_prepare``, ``_finish``); ``answer`` keeps a
request's observation, held bytes and admission in one ``Ledger`` (``ledger.py``). The service alone:

- observes each request (``observability/telemetry.py``: metrics, spans, sampled payloads), with the status its
  outcome maps to (a V2Error's own, 500 for anything else), its sizes and bodies as the exchange reports them, and
  the ``decode``, ``run``, ``encode`` (``forward``) spans;
- resolves the request's model once (``DataPlane.resolve``) and hands it to every step;
- admits it (``admission.py``) if its deadline (adapters/deadline.py) has not passed, and holds its bytes to the
  process's budget (``byte_budget.py``);

- applies the content types (``codecs/content_types/bridge.py``): decoded on the way in, each output tagged (and
  converted where its content type says) on the way out;
- holds every decoded tensor to ``OIP_MAX_TENSOR_BYTES``, content types' conversions included;
- reads the inputs a request passes by reference in S3 and writes the outputs it asks to be written there (the
  ``s3_tensors`` extension, ``inference/s3_tensors.py``);
- runs the call through the ``DataPlane``, which counts it in the statistics and classifies outputs that ask.

Transports never reach the model router: what they need besides inference is the DataPlane's public methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from adapters import deadline as deadlines
from adapters.errors import V2Error
from adapters.types import InferCall, InferResult
from handler.codecs.content_types.bridge import OutputPlan, decode_content_types, encode_content_types, model_defaults
from handler.config.cores import available_cores
from handler.config.settings import Settings
from handler.inference.admission import (
    Ticket,
    admission,
    admission_target_ms,
    default_inflight,
    largest_dynamic_batch,
)
from handler.inference.byte_budget import ByteBudget, Held, default_inflight_bytes, memory_limit
from handler.inference.call_checks import check_before_reading
from handler.inference.exchange import Decoded, Encoded, Exchange
from handler.inference.ledger import Ledger
from handler.inference.s3_tensors import (
    Destinations,
    extension_off,
    mentions_references,
    prepare_references,
    store_references,
    tensor_store,
)
from handler.inference.shadow import shadow_of
from handler.observability.telemetry import InferObservation, Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.limits import TensorCounts, check_allocation
from handler.protocol.resolved_model import ResolvedModel

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded

Answer = TypeVar("Answer")


class InferenceService:
    """Inference over a ``DataPlane`` within ``settings``' limits, observed by ``telemetry``: one per process."""

    def __init__(self, dataplane: DataPlane, settings: Settings, telemetry: Telemetry | None = None) -> None:
        self.dataplane = dataplane
        self.settings = settings
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        #: OIP_MAX_TENSOR_BYTES: the largest tensor a request may make the server hold.
        self.max_tensor_bytes = settings.max_tensor_bytes
        #: OIP_MAX_REQUEST_TENSORS alone: the counts of a request whose model is not known yet.
        self.cap_counts = TensorCounts.cap(settings.max_request_tensors)
        #: ``observe(name, version)``: the telemetry's observation of one request, from its first byte to its
        #: answer, recorded with the status its outcome gives however the block ends.
        self.observe: Callable[[str, str | None], AbstractContextManager[InferObservation]] = self.telemetry.observe
        #: ``span(step)``: a trace segment around one step (``decode``, ``run``, ``encode``, ``forward``).
        self.span: Callable[[str], AbstractContextManager[Any]] = self.telemetry.span
        #: Whether ``span`` may trace anything (``answer`` enters no span otherwise).
        self.traced = self.telemetry.traces()
        #: The s3_tensors extension's reads and writes (OIP_S3_TENSOR_PREFIXES); None when it is off.
        self.s3_tensors = tensor_store(settings)
        #: OIP_MAX_INFLIGHT_BYTES: the request bytes this process holds at once (``byte_budget.py``).
        self.bytes_in_flight = ByteBudget(
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
        #: ``oip serve`` (OIP_STATS_DIR): each model's ``shadow_version`` gets a sampled copy of the requests its
        #: default answered, after the answer (``shadow.py``); the Lambda HTTP function sets its ``InvocationShadow``
        #: (handler/http.py); None elsewhere.
        self.shadow = shadow_of(dataplane, settings.stats_dir) if settings.stats_dir else None

    def known_counts(self, model: ResolvedModel) -> TensorCounts | None:
        """``counts`` when it is known without waiting; None when it is not."""
        return self.dataplane.known_counts(model, self.settings.max_request_tensors)

    async def counts(self, model: ResolvedModel) -> TensorCounts:
        """The most inputs and outputs a request to this model may name, checked before it is decoded."""
        return await self.dataplane.tensor_counts(model, self.settings.max_request_tensors)

    async def metadata(self, model: ResolvedModel) -> Any:
        """The model's metadata (``ModelMetadata``), for decoders that read the model's inputs."""
        return await self.dataplane.model_metadata_of(model)

    async def answer(self, name: str, version: str | None, exchange: Exchange[Answer]) -> Answer:
        """Answer one request to model ``name`` (``version``: None for its default) as ``exchange`` reads, decodes
        and encodes it; its V2Error otherwise. Observed from its first byte to its answer."""
        # One ledger holds the observation, the bytes held and the admission (``ledger.py``); the steps' spans are
        # entered only when the telemetry traces them: this runs on every request.
        span = self.span if self.traced else None
        with Ledger(self.telemetry, self.bytes_in_flight, name, version) as ledger:
            observation = ledger.observation
            model = self.dataplane.resolve(name, version)
            ledger.admit(self.admission, name)  # a refused request's body is neither read nor decoded
            answered = False
            try:
                observation.bytes_in = await exchange.receive(model, ledger)
                if model.passes_through:
                    passing = exchange.pass_through(model)
                    if passing is not None:
                        forwarded = await self._forward(model, *passing, observation)
                        answered = True
                        return _answered(exchange.encode_forwarded(model, forwarded), observation)
                if span is None:
                    call = await exchange.decode(model, self)
                else:
                    with span("decode"):
                        call = await exchange.decode(model, self)
                prepared = await self._prepare(model, call, ledger)
                if span is None:
                    ran = await self.dataplane.run(model, prepared.call)
                else:
                    with span("run"):
                        ran = await self.dataplane.run(model, prepared.call)
                result = await self._finish(prepared, ran, observation)
                if self.shadow is not None:
                    self.shadow.offer(model, prepared.call, ran)
                answered = True
            finally:
                ledger.leave(answered)
            if span is None:
                encoded = exchange.encode(result, call)
            else:
                with span("encode"):
                    encoded = exchange.encode(result, call)
            observation.bytes_out = encoded.size
            observation.request_body, observation.response_body = encoded.request_body, encoded.response_body
            return encoded.answer

    def refused(self, name: str, version: str | None, error: V2Error, requests: int = 1) -> None:
        """Record ``requests`` requests to model ``name`` that their transport refused before reading them (the event
        loop's shedding: ``loop_shedding.py``) as ``answer`` records the requests it refuses."""
        self.telemetry.rejected(name, version, error, requests)

    async def infer(self, name: str, version: str | None, call: InferCall) -> InferResult:
        """Answer one decoded request with its result, as ``answer`` does."""
        return await self.answer(name, version, Decoded(call))

    async def infer_many(
        self, name: str, version: str | None, calls: Sequence[InferCall]
    ) -> list[InferResult | V2Error]:
        """Answer several decoded requests to one model version, each as ``infer`` answers it alone (its result,
        or the V2Error it raised) and observed as a request of its own; those that can run as one execution do
        (``DataPlane.run_many``), admitted together as one request."""
        model = self.dataplane.resolve(name, version)
        observing = [self.observe(name, version) for _ in calls]
        observations = [context.__enter__() for context in observing]
        outcomes: list[InferResult | BaseException] = [_UNANSWERED] * len(calls)
        try:
            with self.bytes_in_flight.hold() as held:  # the calls' S3 objects, until every call is answered
                await self._infer_many(model, calls, held, observations, outcomes)
        except BaseException as exc:  # the group's own (admission, deadline, cancellation): each call's outcome
            outcomes = [exc if outcome is _UNANSWERED else outcome for outcome in outcomes]
            if not isinstance(exc, V2Error):
                raise
        finally:
            for context, outcome in zip(observing, outcomes, strict=True):
                failed = outcome if isinstance(outcome, BaseException) else None
                context.__exit__(type(failed) if failed is not None else None, failed, None)
        return outcomes  # type: ignore[return-value]  # results and V2Errors only, past the raise above

    async def _infer_many(
        self,
        model: ResolvedModel,
        calls: Sequence[InferCall],
        held: Held,
        observations: list[InferObservation],
        outcomes: list[InferResult | BaseException],
    ) -> None:
        ticket = self._admit(model.name)
        answered = False
        try:
            prepared: list[Prepared | V2Error] = []
            for call in calls:
                try:
                    prepared.append(await self._prepare(model, call, held))
                except V2Error as exc:
                    prepared.append(exc)
            with self.span("run"):
                ran = [item.call for item in prepared if not isinstance(item, V2Error)]
                results = iter(await self.dataplane.run_many(model, ran))
            for index, (item, observation) in enumerate(zip(prepared, observations, strict=True)):
                if isinstance(item, V2Error):
                    outcomes[index] = item
                    continue
                result = next(results)
                try:
                    if isinstance(result, V2Error):
                        raise result
                    outcomes[index] = await self._finish(item, result, observation)
                except V2Error as exc:
                    outcomes[index] = exc
            answered = True
        finally:
            ticket.leave(answered)

    async def infer_merged(self, name: str, version: str | None, call: InferCall, requests: int) -> InferResult | None:
        """``requests`` decoded requests of equal row counts that their decoder merged into ``call`` (a batch
        chunk's lines: inputs without content types or S3 references, no requested outputs), answered as
        ``infer_many`` answers them when they run as one: admitted together, each request within
        OIP_MAX_TENSOR_BYTES, counted and observed as requests of their own (in one update for all, as Triton
        counts a batch's requests: ``Telemetry.observe_many``, ``Statistics.successes``); one result holding every
        request's rows in order. None (nothing observed or counted) when they cannot be answered together (a
        content type to apply, a request over the tensor limit, a refusal, a failed execution): ``infer_many``
        then answers each as it answers it alone."""
        model = self.dataplane.resolve(name, version)
        try:
            defaults = model_defaults(model)  # an unknown model's error: each request's own, from infer_many
        except V2Error:
            return None
        if defaults or any(t.data.nbytes // requests > self.max_tensor_bytes for t in call.inputs):
            return None
        observing = self.telemetry.observe_many(name, version, requests)
        try:
            ticket = self._admit(name)
        except V2Error:
            return None
        answered = False
        try:
            with self.span("run"):
                ran = await self.dataplane.run_merged(model, call, requests)
            if ran is None:
                return None
            with observing as observation:
                result = await self._finish(Prepared(call, None, None), ran, observation)
            answered = True
        finally:
            ticket.leave(answered)
        return result

    def _admit(self, name: str) -> Ticket:
        """The request's admission (``Ticket``), if its deadline has not passed and the process admits it; else
        its error, at once."""
        deadline = deadlines.current()
        if deadline is not None:
            deadline.check()
        return self.admission.enter(name, deadline)

    async def _prepare(self, model: ResolvedModel, call: InferCall, held: Held) -> Prepared:
        """One call as its model takes it: its inputs by reference read from S3 (held of the budget), its content
        types decoded, every tensor within OIP_MAX_TENSOR_BYTES."""
        destinations: Destinations | None = None
        if mentions_references(call):
            call, destinations = await self._read_references(model, call, held)
        call, plan = await decode_content_types(self.dataplane, model, call)
        check_sizes(call, self.max_tensor_bytes)
        return Prepared(call, plan, destinations)

    async def _finish(self, prepared: Prepared, result: InferResult, observation: InferObservation) -> InferResult:
        """One call's result as its request asked: outputs tagged with their content types, and written to S3
        where it asked."""
        observation.version = result.model_version
        result = encode_content_types(result, prepared.plan)
        if prepared.destinations:
            result = await store_references(self.s3_tensors, result, prepared.destinations)
        return result

    async def _read_references(
        self, model: ResolvedModel, call: InferCall, held: Held
    ) -> tuple[InferCall, Destinations]:
        """The call with its inputs read from S3, once it has been checked against the model (``call_checks.py``)
        and its objects' sizes against the byte budgets: an unknown input, a wrong datatype or shape is refused
        before any S3 request is made."""
        if self.s3_tensors is None:
            raise extension_off(call)
        metadata = await self.dataplane.model_metadata_of(model)
        check_before_reading(call, metadata, model_defaults(model), not model.remote)
        return await prepare_references(self.s3_tensors, call, held)

    async def _forward(
        self, model: ResolvedModel, body: bytes, headers: dict[str, str], observation: InferObservation
    ) -> Forwarded:
        """Pass a request body through to the Triton model it routes to, as it came (admitted by ``answer``)."""
        with self.span("forward"):
            forwarded = await self.dataplane.forward(model.name, model.version, body, headers)
        observation.version = forwarded.model_version
        return forwarded


@dataclass(slots=True)
class Prepared:
    """A call ready to run (``InferenceService._prepare``), and what its result needs on the way back."""

    call: InferCall
    plan: OutputPlan | None
    destinations: Destinations | None


#: An outcome of ``infer_many`` not reached yet.
_UNANSWERED: Any = object()


def _answered(encoded: Encoded[Answer], observation: InferObservation) -> Answer:
    """The answer, its size and bodies recorded in the observation."""
    observation.bytes_out = encoded.size
    observation.request_body, observation.response_body = encoded.request_body, encoded.response_body
    return encoded.answer


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
