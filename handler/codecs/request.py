"""Inference request bodies -> domain calls.

``decode_infer_request`` reads a JSON body or a Triton binary-extension body (JSON header followed by raw
tensor bytes, split at ``Inference-Header-Content-Length``); ``decode_raw_request`` reads Triton's raw binary
request (``Inference-Header-Content-Length: 0``).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import orjson

from adapters.datatypes import element_size
from adapters.errors import InvalidInput, V2Error
from adapters.types import InferCall, RequestedOutput, Tensor, TensorSpec
from handler.codecs.binary_data import (
    BINARY_DATA,
    BINARY_DATA_OUTPUT,
    BINARY_DATA_SIZE,
    decode_binary_data,
)
from handler.codecs.bounds import check_bounds
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.envelope import Envelope, Input, envelope
from handler.codecs.json_keys import check_unique_keys
from handler.codecs.json_numeric import decode_tensor_data, load_infer_json
from handler.codecs.s3_references import PENDING, S3_URI, is_reference
from handler.protocol.checks import (
    check_has_inputs,
    check_one_data_form,
    check_tensor_header,
    check_unique_inputs,
    check_unique_outputs,
)
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts, check_allocation, element_count


def load_json_object(data: bytes | memoryview, what: str = "request body") -> dict[str, Any]:
    """Parse a JSON object with orjson; anything else is InvalidInput."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"malformed JSON in {what}: {exc}") from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{what} must be a JSON object, got {type(parsed).__name__}")
    check_unique_keys(data, parsed, what)
    return parsed


def _binary_size(item: Input) -> int | None:
    size = (item.parameters or {}).get(BINARY_DATA_SIZE)
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidInput(f"input '{item.name}': '{BINARY_DATA_SIZE}' must be a non-negative integer")
    return size


def _check_counts(document: dict[str, Any], counts: TensorCounts) -> None:
    """The request's input and output counts and its envelope's bounds (``bounds.py``), checked before its envelope
    is read (or anything converted)."""
    inputs, outputs, parameters = document.get("inputs"), document.get("outputs"), document.get("parameters")
    counts.check(
        len(inputs) if isinstance(inputs, list) else 0,
        len(outputs) if isinstance(outputs, list) else 0,
        isinstance(parameters, dict) and CONTENT_TYPE in parameters,
    )
    check_bounds(document)


def _checked_envelope(document: dict[str, Any], counts: TensorCounts = DEFAULT_COUNTS) -> Envelope:
    """The envelope of a request, within ``counts``, with at least one input and none given twice."""
    _check_counts(document, counts)
    request = envelope(document)
    check_has_inputs(len(request.inputs))
    check_unique_inputs([item.name for item in request.inputs])
    if counts.not_bytes and not (request.parameters and CONTENT_TYPE in request.parameters):
        for item in request.inputs:
            if not (item.parameters and CONTENT_TYPE in item.parameters):
                counts.check_bytes(item.name, item.datatype)
    return request


def _checked_size(item: Input, limit: int) -> int | None:
    """An input's header checked (datatype, shape, size limit); its ``binary_data_size``, None for JSON data."""
    check_tensor_header(item.name, item.datatype, item.shape, limit)
    return _binary_size(item)


def _tensor_parameters(item: Input) -> dict[str, Any]:
    """An input's own parameters: the binary extension's size is the decoder's, not the model's."""
    if not item.parameters:
        return {}
    return {k: v for k, v in item.parameters.items() if k != BINARY_DATA_SIZE}


def _decode_input(item: Input, binary: memoryview, offset: int, limit: int) -> tuple[Tensor, int]:
    size = _checked_size(item, limit)
    check_one_data_form(item.name, item.data is not None, size is not None)
    if item.parameters and is_reference(item.parameters):
        return _reference_input(item, size), offset
    if size is None:
        data = decode_tensor_data(item.name, item.datatype, item.shape, item.data)
    else:
        if offset + size > len(binary):
            raise InvalidInput(
                f"input '{item.name}': {BINARY_DATA_SIZE} {size} runs past the end of the binary data "
                f"({len(binary) - offset} bytes left)"
            )
        data = decode_binary_data(item.name, item.datatype, item.shape, binary[offset : offset + size])
        offset += size
    return Tensor(item.name, item.datatype, tuple(item.shape), data, _tensor_parameters(item)), offset


def _reference_input(item: Input, size: int | None) -> Tensor:
    """An input whose data is in S3 (the ``s3_tensors`` extension): read later, by the inference service."""
    if item.data is not None or size is not None:
        raise InvalidInput(
            f"input '{item.name}' has its data twice: inline or binary, and in S3 ('{S3_URI}'); send one"
        )
    return Tensor(item.name, item.datatype, tuple(item.shape), PENDING, _tensor_parameters(item))


def _requested_outputs(request: Envelope) -> tuple[RequestedOutput, ...]:
    if not request.outputs:
        return ()
    outputs: list[RequestedOutput] = []
    check_unique_outputs([item.name for item in request.outputs])
    for item in request.outputs:
        parameters = dict(item.parameters or {})
        binary = parameters.pop(BINARY_DATA, None)
        if binary is not None and not isinstance(binary, bool):
            raise InvalidInput(f"output '{item.name}': '{BINARY_DATA}' must be true or false")
        outputs.append(RequestedOutput(item.name, binary, parameters))
    return tuple(outputs)


class _BinaryInput(NamedTuple):
    name: str
    datatype: str
    shape: tuple[int, ...]
    size: int
    parameters: dict[str, Any]


_NOT_KEPT: Final = object()


class _BinaryPlan(NamedTuple):
    """What a binary-extension header says, every check on it made: all that is left is to cut the tensors."""

    inputs: tuple[_BinaryInput, ...]
    outputs: tuple[RequestedOutput, ...]
    id: str | None
    parameters: dict[str, Any]
    size: int


#: The longest JSON header whose plan is kept (well under ``json_numeric.MIN_FAST_BYTES``: such headers are parsed
#: by orjson on either path), and how many plans are kept.
MAX_PLANNED_HEADER: Final = 4096
MAX_PLANS: Final = 256
_ID_LEAD: Final = b'{"id":"'
_ID_KEY: Final = b'"id"'

#: A plan's key: the header, or what follows its leading id (and which of the two it is); the tensor limit.
_Key = tuple[bytes, bool, int]
#: Plans by key; None for a header with JSON ``data``.
_plans: dict[_Key, _BinaryPlan | None] = {}
#: Keys seen once: a plan is made the second time, so headers that never come back (a new shape each time) cost
#: a look-up, not a plan.
_seen: set[_Key] = set()


def _leading_id(text: bytes) -> tuple[str | None, bytes]:
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


def _binary_plan(text: bytes, kept: _Key, max_tensor_bytes: int, counts: TensorCounts) -> _BinaryPlan | None:
    """The plan of a header whose inputs all come as binary data; None when one has JSON ``data`` (or none says
    ``binary_data_size``), and the first time ``kept`` is seen. Kept by ``kept``: a client sending tensors of the
    same names, shapes and datatypes sends the same header every time but for its id, and parsing and checking it
    was most of the decoding. Raises what ``decode_infer_document`` raises for a header that is wrong (and then
    keeps nothing)."""
    found = _plans.get(kept, _NOT_KEPT)
    if found is not _NOT_KEPT:
        if found is not None and (len(found.inputs) > counts.inputs or len(found.outputs) > counts.outputs):
            counts.check(len(found.inputs), len(found.outputs), CONTENT_TYPE in found.parameters)
        if found is not None and counts.not_bytes and CONTENT_TYPE not in found.parameters:
            for item in found.inputs:  # a plan is kept by its header, whichever model it was first sent to
                if CONTENT_TYPE not in item.parameters:
                    counts.check_bytes(item.name, item.datatype)
        return found
    if kept not in _seen:
        if len(_seen) >= 4 * MAX_PLANS:
            _seen.clear()
        _seen.add(kept)
        return None
    plan = _plan(text, max_tensor_bytes, counts)
    if len(_plans) >= MAX_PLANS:
        _plans.clear()
    _plans[kept] = plan
    return plan


def _plan(header: bytes, max_tensor_bytes: int, counts: TensorCounts) -> _BinaryPlan | None:
    request = _checked_envelope(load_json_object(header), counts)
    inputs = []
    for item in request.inputs:
        size = _checked_size(item, max_tensor_bytes)
        if size is None or item.data is not None or is_reference(item.parameters):
            return None
        inputs.append(_BinaryInput(item.name, item.datatype, tuple(item.shape), size, _tensor_parameters(item)))
    outputs = _requested_outputs(request)
    total = sum(item.size for item in inputs)
    return _BinaryPlan(tuple(inputs), outputs, request.id, dict(request.parameters or {}), total)


def _cut(plan: _BinaryPlan, binary: memoryview, request_id: str | None) -> InferCall:
    """The call of a planned header whose sizes add up to ``len(binary)``: its tensors cut from ``binary`` (in
    order, so the first tensor that does not decode is the one reported, as by the whole decoder), every mapping a
    fresh copy."""
    tensors = []
    offset = 0
    for item in plan.inputs:
        data = decode_binary_data(item.name, item.datatype, item.shape, binary[offset : offset + item.size])
        tensors.append(Tensor(item.name, item.datatype, item.shape, data, dict(item.parameters)))
        offset += item.size
    outputs = tuple(RequestedOutput(o.name, o.binary, dict(o.parameters)) for o in plan.outputs)
    return InferCall(tuple(tensors), outputs, request_id, dict(plan.parameters))


def decode_infer_request(
    body: bytes, json_length: int | None, max_tensor_bytes: int, counts: TensorCounts = DEFAULT_COUNTS
) -> InferCall:
    """Decode a JSON or binary-extension inference request body; its inputs and outputs are counted against
    ``counts`` before any tensor is converted."""
    view = memoryview(body)
    if json_length is None:
        header, binary = view, view[0:0]
    else:
        if json_length > len(body):
            raise InvalidInput(
                f"Inference-Header-Content-Length {json_length} is larger than the body ({len(body)} bytes)"
            )
        header, binary = view[:json_length], view[json_length:]
        if json_length <= MAX_PLANNED_HEADER:
            text = bytes(header)
            leading, key = _leading_id(text)
            try:
                plan = _binary_plan(text, (key, leading is None, max_tensor_bytes), max_tensor_bytes, counts)
            except V2Error:
                plan = None  # the whole decoder below finds the first mistake in the order it always has
            if plan is not None and plan.size == len(binary):
                return _cut(plan, binary, plan.id if leading is None else leading)
    # numeric data without Python floats
    document = load_infer_json(header, counts=counts, what="request body") or load_json_object(header)
    return decode_infer_document(document, binary, max_tensor_bytes, counts)


def decode_infer_document(
    document: dict[str, Any],
    binary: memoryview | None = None,
    max_tensor_bytes: int = 1 << 26,
    counts: TensorCounts = DEFAULT_COUNTS,
) -> InferCall:
    """Decode an already-parsed ``$inference_request`` (plus binary tensor bytes, if any)."""
    binary = binary if binary is not None else memoryview(b"")
    request = _checked_envelope(document, counts)
    tensors: list[Tensor] = []
    offset = 0
    for item in request.inputs:
        tensor, offset = _decode_input(item, binary, offset, max_tensor_bytes)
        tensors.append(tensor)
    if offset != len(binary):
        raise InvalidInput(
            f"the body has {len(binary) - offset} bytes after the tensors that no '{BINARY_DATA_SIZE}' accounts for"
        )
    return InferCall(tuple(tensors), _requested_outputs(request), request.id, dict(request.parameters or {}))


def decode_raw_request(body: bytes, spec: TensorSpec, max_tensor_bytes: int, max_batch_size: int = 0) -> InferCall:
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
