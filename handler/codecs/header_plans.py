"""Binary-extension headers kept as plans (``HeaderPlans``): the ``header_plans`` strategy of the request decoder.

A client sending tensors of the same names, shapes and datatypes sends the same JSON header every time but for its
id, and parsing and checking it is most of the decoding of a small binary request. The second time a header comes,
its checks are made once and kept as a plan; from then on only the tensors are cut from each body. A header that
fails a check keeps nothing, and every failure is left to the whole decoder, so errors are its errors.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from adapters.errors import V2Error
from adapters.types import InferCall, RequestedOutput, Tensor
from handler.codecs.binary_data import decode_binary_data
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.request_document import (
    EnvelopeReader,
    checked_envelope,
    checked_size,
    load_json_object,
    requested_outputs,
    tensor_parameters,
)
from handler.codecs.s3_references import is_reference
from handler.protocol.limits import TensorCounts

#: The longest JSON header whose plan is kept, and how many plans (and four times as many headers seen once) a
#: process keeps: past that, the kept ones are dropped and planning starts over.
MAX_PLANNED_HEADER: Final = 4096
MAX_PLANS: Final = 256

_ID_LEAD: Final = b'{"id":"'
_ID_KEY: Final = b'"id"'
_NOT_KEPT: Final = object()


class _BinaryInput(NamedTuple):
    name: str
    datatype: str
    shape: tuple[int, ...]
    size: int
    parameters: dict[str, Any]


class _Plan(NamedTuple):
    """What a binary-extension header says, every check on it made: all that is left is to cut the tensors."""

    inputs: tuple[_BinaryInput, ...]
    outputs: tuple[RequestedOutput, ...]
    id: str | None
    parameters: dict[str, Any]
    size: int
    #: The counts it was made against: a request to the same model (the same counts, kept per model version by
    #: the data plane) needs no recheck.
    counts: TensorCounts


#: A plan's key: the header, or what follows its leading id (and which of the two it is); the tensor limit.
_Key = tuple[bytes, bool, int]


def leading_id(text: bytes) -> tuple[str | None, bytes]:
    """A header that begins ``{"id":"...",``, as tritonclient, perf_analyzer and PyTriton write theirs: its id and
    the rest, by which the plan is kept (PyTriton numbers its requests; perf_analyzer sends ``"id":""``). ``(None,
    text)`` whenever the rest could hold another id or the id is not plain text (an escape, a control character,
    bytes that are not UTF-8): JSON's own decoding then decides, on the whole decoder's path."""
    if not text.startswith(_ID_LEAD):
        return None, text
    end = text.find(b'"', len(_ID_LEAD))
    rest = text[end + 1 :]
    if end < 0 or _ID_KEY in rest or b"\\" in rest:
        return None, text
    try:
        value = text[len(_ID_LEAD) : end].decode()
    except UnicodeDecodeError:
        return None, text
    if "\\" in value or not value.isprintable():
        return None, text
    return value, rest


class HeaderPlans:
    """Plans of binary-extension headers, at most ``MAX_PLANS`` (and ``4 * MAX_PLANS`` headers seen once), their
    envelopes read by ``read``."""

    def __init__(self, read: EnvelopeReader) -> None:
        self.read = read
        #: Plans by key; None for a header with JSON ``data`` (or an S3 reference).
        self.plans: dict[_Key, _Plan | None] = {}
        #: Keys seen once: a plan is made the second time, so headers that never come back (a new shape each time)
        #: cost a look-up, not a plan.
        self.seen: set[_Key] = set()

    def decode(
        self, header: memoryview, binary: memoryview, max_tensor_bytes: int, counts: TensorCounts
    ) -> InferCall | None:
        """The call of a planned header whose sizes add up to ``len(binary)``; None to leave the body to the whole
        decoder (a header too long, seen once, with JSON data, with any mistake, or with other sizes)."""
        if len(header) > MAX_PLANNED_HEADER:
            return None
        text = bytes(header)
        leading, rest = leading_id(text)
        try:
            plan = self._plan((rest, leading is None, max_tensor_bytes), text, max_tensor_bytes, counts)
        except V2Error:
            return None  # the whole decoder finds the first mistake in the order it always has
        if plan is None or plan.size != len(binary):
            return None
        return _cut(plan, binary, plan.id if leading is None else leading)

    def _plan(self, key: _Key, text: bytes, max_tensor_bytes: int, counts: TensorCounts) -> _Plan | None:
        found = self.plans.get(key, _NOT_KEPT)
        if found is not _NOT_KEPT:
            if found is not None and found.counts is not counts:
                _recheck(found, counts)  # a plan is kept by its header, whichever model it was first sent to
            return found  # type: ignore[return-value]
        if key not in self.seen:
            if len(self.seen) >= 4 * MAX_PLANS:
                self.seen.clear()
            self.seen.add(key)
            return None
        plan = _made(text, self.read, max_tensor_bytes, counts)
        if len(self.plans) >= MAX_PLANS:
            self.plans.clear()
        self.plans[key] = plan
        return plan


def _recheck(plan: _Plan, counts: TensorCounts) -> None:
    """The counts of the model this request is sent to, held against a kept plan."""
    if len(plan.inputs) > counts.inputs or len(plan.outputs) > counts.outputs:
        counts.check(len(plan.inputs), len(plan.outputs), CONTENT_TYPE in plan.parameters)
    if counts.not_bytes and CONTENT_TYPE not in plan.parameters:
        for item in plan.inputs:
            if CONTENT_TYPE not in item.parameters:
                counts.check_bytes(item.name, item.datatype)


def _made(header: bytes, read: EnvelopeReader, max_tensor_bytes: int, counts: TensorCounts) -> _Plan | None:
    """The plan of a header whose inputs all come as binary data; None when one has JSON ``data`` or an S3
    reference. Raises what the whole decoder raises for a header that is wrong."""
    request = checked_envelope(load_json_object(header), read, counts)
    inputs = []
    for item in request.inputs:
        size = checked_size(item, max_tensor_bytes)
        if size is None or item.data is not None or is_reference(item.parameters):
            return None
        inputs.append(_BinaryInput(item.name, item.datatype, tuple(item.shape), size, tensor_parameters(item)))
    outputs = requested_outputs(request)
    total = sum(item.size for item in inputs)
    return _Plan(tuple(inputs), outputs, request.id, dict(request.parameters or {}), total, counts)


def _cut(plan: _Plan, binary: memoryview, request_id: str | None) -> InferCall:
    """The call of a planned header: its tensors cut from ``binary`` (in order, so the first tensor that does not
    decode is the one reported, as by the whole decoder), every mapping a fresh copy."""
    tensors = []
    offset = 0
    for item in plan.inputs:
        data = decode_binary_data(item.name, item.datatype, item.shape, binary[offset : offset + item.size])
        tensors.append(Tensor(item.name, item.datatype, item.shape, data, dict(item.parameters)))
        offset += item.size
    outputs = tuple(RequestedOutput(o.name, o.binary, dict(o.parameters)) for o in plan.outputs)
    return InferCall(tuple(tensors), outputs, request_id, dict(plan.parameters))
