"""Inference request bodies -> domain calls, by one decoder (``RequestDecoder``) with one interface.

Every transport that reads a JSON or binary-extension inference request (the REST routes, SageMaker, batch lines
and messages) calls the process's decoder, ``DECODER``: ``decode`` for a body (a JSON text, or a Triton
binary-extension body: JSON header then raw tensor bytes, split at ``Inference-Header-Content-Length``), or
``parse`` then ``decode_document`` for a caller that reads the parsed document first. ``decode_raw_request`` reads
Triton's raw binary request (``Inference-Header-Content-Length: 0``), which has no JSON to decode.

The reference is pydantic's ``InferenceRequest`` (``schemas.py``): with no strategy (``RequestDecoder(())``) the
text is parsed by orjson, the envelope validated by pydantic, the data converted by numpy (``request_document.py``).
The strategies (``Strategy``) do parts of that work another way, chosen inside the decoder, never by its callers;
each gives the reference's answer and error (``tests/unit/test_request_decoder.py`` holds every one to it over the
corpus and generated bodies), and each is kept because a benchmark shows it pays (docs/performance.md, Decoding).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Final

from adapters.datatypes import element_size
from adapters.errors import InvalidInput
from adapters.types import InferCall, Tensor, TensorSpec
from handler.codecs.binary_data import BINARY_DATA_OUTPUT, decode_binary_data
from handler.codecs.envelope import envelope, validated_envelope
from handler.codecs.header_plans import HeaderPlans
from handler.codecs.json_keys import check_unique_keys
from handler.codecs.json_numeric import MIN_FAST_BYTES, load_infer_json
from handler.codecs.request_document import decode_document, json_object, load_json_object
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts, check_allocation, element_count

__all__ = [
    "DECODER",
    "RequestDecoder",
    "Strategy",
    "decode_infer_document",
    "decode_infer_request",
    "decode_raw_request",
    "load_json_object",
]


class Strategy(StrEnum):
    """The request decoder's strategies beside the reference (orjson, pydantic, numpy)."""

    #: A binary-extension header seen before is not parsed again: its checks are kept (``header_plans.py``).
    HEADER_PLANS = "header_plans"
    #: A large JSON text is parsed by simdjson, numeric ``data`` straight into numpy (``json_numeric.py``).
    JSON_SIMD = "json_simd"
    #: A well-formed envelope is read by hand, pydantic only judging the others (``envelope.py``); a common one is
    #: checked and read in one walk (``plain_request.py``).
    PLAIN_ENVELOPE = "plain_envelope"


#: The strategies a process's decoder uses.
STRATEGIES: Final = frozenset(Strategy)


class RequestDecoder:
    """JSON and binary-extension inference request bodies -> ``InferCall``, with ``strategies`` beside the
    reference; ``simd_min_bytes`` is the shortest JSON text ``JSON_SIMD`` parses."""

    def __init__(self, strategies: Iterable[Strategy] = STRATEGIES, simd_min_bytes: int = MIN_FAST_BYTES) -> None:
        self.strategies = frozenset(strategies)
        self._plain = Strategy.PLAIN_ENVELOPE in self.strategies
        self._read = envelope if self._plain else validated_envelope
        self.plans = HeaderPlans(self._read) if Strategy.HEADER_PLANS in self.strategies else None
        self._simd_min_bytes = simd_min_bytes if Strategy.JSON_SIMD in self.strategies else None

    def parse(
        self, text: bytes | memoryview, counts: TensorCounts = DEFAULT_COUNTS, what: str = "request body"
    ) -> dict[str, Any]:
        """A JSON object (``what`` names it in errors), numeric ``data`` perhaps already converted; a text that
        names more inputs or outputs than ``counts`` allow may be refused before anything is converted."""
        document, unchecked = self._parse(text, counts, what)
        if unchecked:
            check_unique_keys(text, document, what)
        return document

    def _parse(self, text: bytes | memoryview, counts: TensorCounts, what: str) -> tuple[dict[str, Any], bool]:
        """``parse``'s document, and whether its keys are still to be checked (``check_unique_keys``)."""
        if self._simd_min_bytes is not None and len(text) >= self._simd_min_bytes:
            document = load_infer_json(text, self._simd_min_bytes, counts, what)
            if document is not None:
                return document, False
        return json_object(text, what), True

    def decode_document(
        self,
        document: dict[str, Any],
        binary: memoryview | None = None,
        max_tensor_bytes: int = 1 << 26,
        counts: TensorCounts = DEFAULT_COUNTS,
    ) -> InferCall:
        """A parsed ``$inference_request`` (``parse``'s, or any JSON value's) plus its binary tensor bytes, if any;
        its inputs and outputs counted against ``counts`` before any tensor is converted."""
        binary = binary if binary is not None else memoryview(b"")
        return decode_document(document, binary, max_tensor_bytes, counts, self._read)

    def decode(
        self,
        body: bytes | memoryview,
        json_length: int | None,
        max_tensor_bytes: int,
        counts: TensorCounts = DEFAULT_COUNTS,
    ) -> InferCall:
        """A JSON body (``json_length`` None) or a binary-extension body whose JSON header is ``json_length`` bytes
        long."""
        view = memoryview(body)
        if json_length is None:
            header, binary = view, view[0:0]
        else:
            if json_length > len(body):
                raise InvalidInput(
                    f"Inference-Header-Content-Length {json_length} is larger than the body ({len(body)} bytes)"
                )
            header, binary = view[:json_length], view[json_length:]
            if self.plans is not None:
                call = self.plans.decode(header, binary, max_tensor_bytes, counts)
                if call is not None:
                    return call
        document, unchecked = self._parse(header, counts, "request body")
        if unchecked and not self._plain:
            check_unique_keys(header, document)
        # With ``plain_envelope``, the keys of a text parsed here are checked with the rest of its envelope.
        text = header if unchecked and self._plain else None
        return decode_document(document, binary, max_tensor_bytes, counts, self._read, text)


#: The process's request decoder.
DECODER: Final = RequestDecoder()


def decode_infer_request(
    body: bytes, json_length: int | None, max_tensor_bytes: int, counts: TensorCounts = DEFAULT_COUNTS
) -> InferCall:
    """``DECODER.decode``."""
    return DECODER.decode(body, json_length, max_tensor_bytes, counts)


def decode_infer_document(
    document: dict[str, Any],
    binary: memoryview | None = None,
    max_tensor_bytes: int = 1 << 26,
    counts: TensorCounts = DEFAULT_COUNTS,
) -> InferCall:
    """``DECODER.decode_document``."""
    return DECODER.decode_document(document, binary, max_tensor_bytes, counts)


def decode_raw_request(
    body: bytes | memoryview, spec: TensorSpec, max_tensor_bytes: int, max_batch_size: int = 0
) -> InferCall:
    """Triton's raw binary request (``Inference-Header-Content-Length: 0``): the body is the one input.

    "if the model supports batching, the request will be treated as batch-1 request". The rest of the shape
    comes from the model metadata, with at most one variable (-1) dimension deduced from the byte count;
    "If the data type is BYTE, the shape must be [1]" and the body is that one element.
    Every output is returned in binary, as Triton does for raw requests.
    """
    batch = (1,) if max_batch_size > 0 else ()
    dims = spec.shape[len(batch) :]
    if spec.datatype == "BYTES":
        if tuple(dims) != (1,):  # Triton 2.51's answer, word for word (a variable dimension is no [1] either)
            raise InvalidInput(
                f"[request id: <id_unknown>] For BYTE datatype raw input '{spec.name}', the model must have input "
                "shape [1]"
            )
        shape = (*batch, 1)
        data = decode_binary_data(spec.name, "BYTES", shape, memoryview(len(body).to_bytes(4, "little") + body))
    else:
        itemsize = element_size(spec.datatype)
        variable = [i for i, dim in enumerate(dims) if dim < 0]
        if len(variable) > 1:
            raise InvalidInput(
                f"a raw binary request cannot deduce the shape {list(spec.shape)} of input '{spec.name}' "
                "(more than one variable dimension); send a JSON header with Inference-Header-Content-Length"
            )
        fixed = element_count([dim for dim in dims if dim >= 0])
        count, remainder = divmod(len(body), itemsize * max(fixed, 1))
        if remainder or (not variable and count != 1):
            raise InvalidInput(
                f"a raw binary body of {len(body)} bytes does not fit input '{spec.name}' "
                f"of shape {[*batch, *dims]} and datatype {spec.datatype}"
            )
        shape = (*batch, *(count if dim < 0 else dim for dim in dims))
        check_allocation(spec.name, spec.datatype, shape, max_tensor_bytes)
        data = decode_binary_data(spec.name, spec.datatype, shape, memoryview(body))
    tensor = Tensor(spec.name, spec.datatype, shape, data)
    return InferCall((tensor,), (), None, {BINARY_DATA_OUTPUT: True})
