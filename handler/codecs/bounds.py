"""What one request's envelope may hold, counted before any of it is converted or validated.

A JSON body within the body limit can still ask for seconds of work: a ``shape`` of a million elements, a
parameters object of 300,000 entries, a name of megabytes that every error message would repeat. ``check_bounds``
counts them on the parsed document (Python's dicts and lists, or simdjson's proxies, whose lengths cost nothing)
before the envelope is read, so pydantic never sees more than ``MAX_DIMS`` dimensions, ``MAX_PARAMETERS``
parameters (``MAX_TENSOR_PARAMETERS`` for a tensor's), objects of more than ``MAX_MEMBERS`` members or names over
``MAX_NAME_CHARS``: a request over them is refused with what it exceeds.
Only lengths are read here; whether the values are of the right types is the envelope's check.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Final

import simdjson

from adapters.errors import InvalidInput
from handler.config.settings import MAX_REQUEST_TENSORS
from handler.protocol.checks import MAX_DIMS

#: The most entries of the request's ``parameters`` object, and of an input's or an output's.
MAX_PARAMETERS: Final = 256
MAX_TENSOR_PARAMETERS: Final = 64
#: The most members of the request object, of an input's and of an output's (the protocol names five at most).
MAX_MEMBERS: Final = 256
#: The longest request id, tensor name, datatype or parameter name, in characters.
MAX_NAME_CHARS: Final = 4096

_OBJECTS: Final = (dict, simdjson.Object)
_ARRAYS: Final = (list, simdjson.Array)


def _width(value: Any, where: str) -> None:
    if len(value) > MAX_MEMBERS:
        raise InvalidInput(f"{where} has {len(value)} members; at most {MAX_MEMBERS} are accepted")


def _members(value: Any, key: str) -> list[Any]:
    """The value given for ``key``, as a list of none or one. A simdjson object that gives an envelope's key twice is
    refused as the duplicate-key check (``json_keys.py``) would refuse it, before either value is walked."""
    if isinstance(value, dict):
        return [value[key]] if key in value else []
    given = sum(name == key for name in value)
    if given > 1:
        raise InvalidInput(
            f"request body gives the key {key!r} twice in one JSON object; names within an object must be unique"
        )
    return [value[key]] if given else []


def _name(value: Any, what: str) -> None:
    if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} is {len(value)} characters long; at most {MAX_NAME_CHARS} are accepted")


def _parameters(holder: Any, where: str, limit: int) -> None:
    for parameters in _members(holder, "parameters"):
        if not isinstance(parameters, _OBJECTS):
            continue
        if len(parameters) > limit:
            raise InvalidInput(f"{where} has {len(parameters)} parameters; at most {limit} are accepted")
        if parameters and max(map(len, parameters)) > MAX_NAME_CHARS:
            for key in parameters:
                _name(key, f"a parameter name of {where}")


def _tensor(item: Any, kind: str, index: int) -> None:
    """An input's (``kind`` "input") or a requested output's name, datatype, shape and parameters."""
    _width(item, f"{kind} {index}")
    names = _members(item, "name")
    for name in names:
        _name(name, f"the name of {kind} {index}")
    first = names[0] if names else None
    where = f"{kind} '{first}'" if isinstance(first, str) else f"{kind} {index}"
    for datatype in _members(item, "datatype"):
        _name(datatype, f"the datatype of {where}")
    for shape in _members(item, "shape"):
        if isinstance(shape, _ARRAYS) and len(shape) > MAX_DIMS:
            raise InvalidInput(f"{where} has {len(shape)} dimensions; at most {MAX_DIMS} are supported")
    _parameters(item, where, MAX_TENSOR_PARAMETERS)


def check_bounds(document: Any) -> None:
    """InvalidInput when a request's envelope holds more than the bounds above (``document``: the parsed body, a
    dict or a simdjson object; anything else is left to the envelope's check). It walks at most
    ``MAX_REQUEST_TENSORS`` inputs and outputs: how many a request may name is ``TensorCounts``' check."""
    if not isinstance(document, _OBJECTS):
        return
    _width(document, "the request")
    for request_id in _members(document, "id"):
        _name(request_id, "the request's id")
    _parameters(document, "the request", MAX_PARAMETERS)
    for key, kind in (("inputs", "input"), ("outputs", "output")):
        for tensors in _members(document, key):
            if not isinstance(tensors, _ARRAYS):
                continue
            for index, item in enumerate(islice(tensors, MAX_REQUEST_TENSORS)):  # their count: ``TensorCounts``
                if isinstance(item, _OBJECTS):
                    _tensor(item, kind, index)
