"""``Exchange``: one request as its transport reads, decodes and answers it; the inference service does the rest.

A transport (REST V2, KServe V1 / TF Serving, Vertex AI, SageMaker, gRPC, an SQS message) makes an ``Exchange`` for
each request and hands it to ``InferenceService.answer``, which observes the request, holds its bytes to the
budget, resolves its model once, times the decoding and encoding as spans and records the sizes and bodies the
exchange reports (``Encoded``). The exchange knows its wire format and nothing of the bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from adapters.types import InferCall, InferResult

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded
    from handler.inference.byte_budget import Held
    from handler.inference.service import InferenceService
    from handler.protocol.resolved_model import ResolvedModel

#: What a transport answers with: a Starlette response, a protobuf message, a JSON line.
Answer = TypeVar("Answer")


@dataclass(slots=True)
class Encoded(Generic[Answer]):
    """An answer and what the service records of it: its size on the wire, and the bodies the request-log sampler
    may keep (empty where the transport has none to give)."""

    answer: Answer
    size: int
    request_body: bytes | memoryview = b""
    response_body: bytes = b""


class Exchange(Generic[Answer]):
    """How one request is read, decoded and answered on its transport (``InferenceService.answer``)."""

    __slots__ = ()

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        """Read the request, its bytes held of the budget (``held``) before they are read; its size on the wire.
        The default: a request already in memory, of no size worth counting."""
        return 0

    def pass_through(self, model: ResolvedModel) -> tuple[bytes, dict[str, str]] | None:
        """The body and headers to pass the request to Triton with, as it came (asked only when
        ``ResolvedModel.passes_through``); None when it needs decoding here (the default)."""
        return None

    def encode_forwarded(self, model: ResolvedModel, forwarded: Forwarded) -> Encoded[Answer]:
        """Triton's answer to a request passed through, as this transport answers."""
        raise NotImplementedError

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        """The request as a call to ``model``, within the service's counts and tensor limit."""
        raise NotImplementedError

    def encode(self, result: InferResult, call: InferCall) -> Encoded[Answer]:
        """The answer to ``call``."""
        raise NotImplementedError


class Decoded(Exchange[InferResult]):
    """A call already decoded, answered with its result (``InferenceService.infer``)."""

    __slots__ = ("call",)

    def __init__(self, call: InferCall) -> None:
        self.call = call

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        return self.call

    def encode(self, result: InferResult, call: InferCall) -> Encoded[InferResult]:
        return Encoded(result, 0)
