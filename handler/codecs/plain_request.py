"""A common JSON request read in one walk: the checks made before its envelope is read, and the envelope itself.

A request parsed by orjson is checked in steps, each a walk of its own: no key given twice (``json_keys.py``), its
input and output counts (``TensorCounts``), its envelope's bounds (``bounds.py``), then the envelope read
(``envelope.py``). ``plain_request`` makes all four in one walk of a request in the shapes nearly every client
sends: only the protocol's keys, names, datatypes and shapes of the right types within the bounds, parameters of
plain values. It answers the envelope (or the counts' refusal) for such a request, and None for any other, which the
decoder then takes through the steps, so every error keeps its wording and its order. It is part of the request
decoder's ``plain_envelope`` strategy (``request.py``), held to pydantic's answers and errors with the others.
"""

from __future__ import annotations

from typing import Any, Final

from handler.codecs.bounds import MAX_NAME_CHARS, MAX_PARAMETERS, MAX_TENSOR_PARAMETERS
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.envelope import Envelope, Input, Output, plain_input, plain_output, plain_parameters
from handler.codecs.json_keys import counts_match
from handler.protocol.checks import MAX_DIMS
from handler.protocol.limits import TensorCounts

_REQUEST_KEYS: Final = frozenset({"id", "parameters", "inputs", "outputs"})
_INPUT_KEYS: Final = frozenset({"name", "shape", "datatype", "parameters", "data"})
_OUTPUT_KEYS: Final = frozenset({"name", "parameters"})


def _within(parameters: Any, limit: int) -> bool:
    """A parameters object (or none) of at most ``limit`` entries, under names within the bound."""
    if parameters is None:
        return True
    return (
        type(parameters) is dict and len(parameters) <= limit and all(len(key) <= MAX_NAME_CHARS for key in parameters)
    )


def _name(value: Any) -> bool:
    return type(value) is str and len(value) <= MAX_NAME_CHARS


def _holds(item: dict[str, Any]) -> tuple[int, int]:
    """The objects and keys of the request, an input or an output: itself, and its parameters object if it has one."""
    parameters = item.get("parameters")
    return (1, len(item)) if parameters is None else (2, len(item) + len(parameters))


def _input(item: Any) -> tuple[Input, int, int] | None:
    """An input, and the objects and keys it holds; None for one the steps must judge. Objects inside ``data`` are
    not counted: the text then holds more than the walk counts, and the steps judge it."""
    if type(item) is not dict or not item.keys() <= _INPUT_KEYS:
        return None
    shape = item.get("shape")
    if type(shape) is list and len(shape) > MAX_DIMS:  # before its dimensions are walked
        return None
    read = plain_input(item)
    if read is None or not (_name(read.name) and _name(read.datatype)):
        return None
    if not _within(read.parameters, MAX_TENSOR_PARAMETERS):
        return None
    return read, *_holds(item)


def _outputs(value: list[Any]) -> tuple[list[Output], int, int] | None:
    """The requested outputs, and the objects and keys they hold; None for any the steps must judge."""
    outputs, objects, keys = [], 0, 0
    for item in value:
        wanted = plain_output(item)
        if wanted is None or not item.keys() <= _OUTPUT_KEYS or not _name(wanted.name):
            return None
        if not _within(wanted.parameters, MAX_TENSOR_PARAMETERS):
            return None
        outputs.append(wanted)
        held = _holds(item)
        objects, keys = objects + held[0], keys + held[1]
    return outputs, objects, keys


def plain_request(text: bytes | memoryview, document: dict[str, Any], counts: TensorCounts) -> Envelope | None:
    """The envelope of ``document`` (parsed from ``text`` by orjson, its keys not yet checked) when it is a common
    request that every step before the envelope passes; InvalidInput when only its counts are over ``counts``; None
    for any other request."""
    if not document.keys() <= _REQUEST_KEYS:
        return None
    request_id, parameters = document.get("id"), document.get("parameters")
    inputs, outputs = document.get("inputs"), document.get("outputs")
    if type(inputs) is not list or not (request_id is None or _name(request_id)):
        return None
    wanted = len(outputs) if type(outputs) is list else 0
    mapped = type(parameters) is dict and CONTENT_TYPE in parameters
    if len(inputs) > max(counts.inputs, counts.mapped_inputs) or wanted > counts.outputs:
        return None  # refused by the counts, after the keys are checked
    if not (plain_parameters(parameters) and _within(parameters, MAX_PARAMETERS)):
        return None
    objects, keys = _holds(document)
    read: list[Input] = []
    for item in inputs:
        plain = _input(item)
        if plain is None:
            return None
        read.append(plain[0])
        objects, keys = objects + plain[1], keys + plain[2]
    requested = None
    if outputs is not None:
        if type(outputs) is not list or (walked := _outputs(outputs)) is None:
            return None
        requested, objects, keys = walked[0], objects + walked[1], keys + walked[2]
    if not counts_match(text, objects, keys):
        return None
    counts.check(len(inputs), wanted, mapped)
    return Envelope(request_id, parameters, read, requested)
