"""A parsed ``$inference_request`` (plus the binary extension's tensor bytes) -> ``InferCall``: the checks and
conversions every request decoder strategy shares (``request.py`` chooses the strategies).

The envelope is read by a function given by the caller (``envelope.envelope`` or ``envelope.validated_envelope``);
everything after it is the same for every request: counts and bounds before the envelope, then each input's header,
data form and data, then the requested outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from adapters.errors import InvalidInput
from adapters.types import InferCall, RequestedOutput, Tensor
from handler.codecs.binary_data import BINARY_DATA, BINARY_DATA_SIZE, decode_binary_data
from handler.codecs.bounds import check_bounds
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.envelope import Envelope, Input
from handler.codecs.json_keys import check_unique_keys
from handler.codecs.json_numeric import decode_tensor_data
from handler.codecs.plain_request import plain_request
from handler.codecs.s3_references import PENDING, S3_URI, is_reference
from handler.protocol.checks import (
    check_has_inputs,
    check_one_data_form,
    check_tensor_header,
    check_unique_inputs,
    check_unique_outputs,
)
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts

#: Reads a parsed request's envelope, or raises InvalidInput with pydantic's account of what is wrong.
EnvelopeReader = Callable[[dict[str, Any]], Envelope]


def load_json_object(data: bytes | memoryview, what: str = "request body") -> dict[str, Any]:
    """Parse a JSON object with orjson; anything else, or an object that gives a key twice, is InvalidInput."""
    parsed = json_object(data, what)
    check_unique_keys(data, parsed, what)
    return parsed


def json_object(data: bytes | memoryview, what: str = "request body") -> dict[str, Any]:
    """Parse a JSON object with orjson, its keys not yet checked (``check_unique_keys``); anything else is
    InvalidInput."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"malformed JSON in {what}: {exc}") from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{what} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def binary_size(item: Input) -> int | None:
    """An input's ``binary_data_size``; None for JSON data."""
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


def checked_envelope(
    document: dict[str, Any],
    read: EnvelopeReader,
    counts: TensorCounts = DEFAULT_COUNTS,
    text: bytes | memoryview | None = None,
) -> Envelope:
    """The envelope of a request, within ``counts``, with at least one input and none given twice. With ``text``
    (the JSON the document was parsed from, its keys not yet checked), a common request is read in one walk
    (``plain_request``), any other one step by step."""
    request = plain_request(text, document, counts) if text is not None else None
    if request is None:
        if text is not None:
            check_unique_keys(text, document)
        _check_counts(document, counts)
        request = read(document)
    check_has_inputs(len(request.inputs))
    check_unique_inputs([item.name for item in request.inputs])
    if counts.not_bytes and not (request.parameters and CONTENT_TYPE in request.parameters):
        for item in request.inputs:
            if not (item.parameters and CONTENT_TYPE in item.parameters):
                counts.check_bytes(item.name, item.datatype)
    return request


def checked_size(item: Input, limit: int) -> int | None:
    """An input's header checked (datatype, shape, size limit); its ``binary_data_size``, None for JSON data."""
    check_tensor_header(item.name, item.datatype, item.shape, limit)
    return binary_size(item)


def tensor_parameters(item: Input) -> dict[str, Any]:
    """An input's own parameters: the binary extension's size is the decoder's, not the model's."""
    if not item.parameters:
        return {}
    return {k: v for k, v in item.parameters.items() if k != BINARY_DATA_SIZE}


def _decode_input(item: Input, binary: memoryview, offset: int, limit: int) -> tuple[Tensor, int]:
    size = checked_size(item, limit)
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
    return Tensor(item.name, item.datatype, tuple(item.shape), data, tensor_parameters(item)), offset


def _reference_input(item: Input, size: int | None) -> Tensor:
    """An input whose data is in S3 (the ``s3_tensors`` extension): read later, by the inference service."""
    if item.data is not None or size is not None:
        raise InvalidInput(
            f"input '{item.name}' has its data twice: inline or binary, and in S3 ('{S3_URI}'); send one"
        )
    return Tensor(item.name, item.datatype, tuple(item.shape), PENDING, tensor_parameters(item))


def requested_outputs(request: Envelope) -> tuple[RequestedOutput, ...]:
    """The outputs a request names, none twice, ``binary_data`` taken out of their parameters."""
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


def decode_document(
    document: dict[str, Any],
    binary: memoryview,
    max_tensor_bytes: int,
    counts: TensorCounts,
    read: EnvelopeReader,
    text: bytes | memoryview | None = None,
) -> InferCall:
    """Decode a parsed ``$inference_request`` whose binary tensor bytes are ``binary``, its envelope read by
    ``read`` (``text``: as ``checked_envelope`` takes it)."""
    request = checked_envelope(document, read, counts, text)
    tensors: list[Tensor] = []
    offset = 0
    for item in request.inputs:
        tensor, offset = _decode_input(item, binary, offset, max_tensor_bytes)
        tensors.append(tensor)
    if offset != len(binary):
        raise InvalidInput(
            f"the body has {len(binary) - offset} bytes after the tensors that no '{BINARY_DATA_SIZE}' accounts for"
        )
    return InferCall(tuple(tensors), requested_outputs(request), request.id, dict(request.parameters or {}))
