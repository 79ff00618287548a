"""A ``ModelInferRequest``'s counts, read from its protobuf wire format before the message is parsed.

Parsing a message costs work per field on the wire, and a field can be two bytes: a 64 MiB message holds 32
million empty map entries (``parameters``), tensors, ``raw_input_contents`` entries, shape dimensions or unknown
fields, and protobuf's C parser spends seconds and gigabytes on them, on the event loop, before any check sees the
message. ``InferRequestBounds.check`` walks the fields' tags and lengths instead, without parsing or copying their
contents, and stops at the first count over its bound, so the walk costs at most a few thousand steps whatever the
message's size:

- the request's ``parameters`` (field 4): ``MAX_PARAMETERS`` entries; an input's (5.4) and an output's (6.2):
  ``MAX_TENSOR_PARAMETERS`` (the bounds of a JSON request's envelope, ``handler/codecs/bounds.py``);
- ``inputs`` (5), ``outputs`` (6) and ``raw_input_contents`` (7): the server's cap (OIP_MAX_REQUEST_TENSORS);
- an input's ``shape`` (5.3), packed or not: ``MAX_DIMS`` dimensions;
- any other field (names, datatypes, contents, unknown fields): ``MAX_OTHER_FIELDS`` per message;
- every field walked, in all: ``MAX_FIELDS``.

A request over a bound is ``InvalidInput`` naming what it exceeds; bytes that are not protobuf's wire format
(a truncated field, a wire type protobuf does not have, field number 0) are ``WireError``, as the parser would
refuse them. Groups (wire types 3 and 4) are refused too: no field of the message is a group. An input's
``contents`` (``InferTensorContents``) is not walked: its fields are the tensor's data, checked against the shape
when it is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from adapters.errors import InvalidInput
from handler.codecs.bounds import MAX_NAME_CHARS, MAX_PARAMETERS, MAX_TENSOR_PARAMETERS
from handler.config.settings import MAX_REQUEST_TENSORS
from handler.protocol.checks import MAX_DIMS

#: The most fields of one message other than those counted by name (names, datatypes, contents, unknown fields).
MAX_OTHER_FIELDS: Final = 64
#: The most fields the walk reads in one request, all messages together.
MAX_FIELDS: Final = 16384

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
#: The bytes that continue a varint; a packed field holds as many varints as bytes outside this set.
_CONTINUATION: Final = bytes(range(0x80, 0x100))
#: A varint is at most ten bytes long.
_MAX_VARINT: Final = 10


class WireError(ValueError):
    """The bytes are not protobuf's wire format."""


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    for index in range(pos, min(pos + _MAX_VARINT, end)):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    raise WireError("a varint is truncated or longer than ten bytes")


def _fields(data: bytes, pos: int, end: int, budget: list[int]) -> Iterator[tuple[int, int, int, int]]:
    """Each field of the message in ``data[pos:end]``: (number, wire type, start, stop), where ``start:stop`` is a
    length-delimited field's contents, or the field's value otherwise. ``budget`` holds the fields the walk may
    still read."""
    while pos < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise InvalidInput(
                f"the request message holds more than {MAX_FIELDS} fields; at most {MAX_FIELDS} are read"
            )
        tag = data[pos]
        if tag < 0x80:  # the common one-byte tag, without a call
            pos += 1
        else:
            tag, pos = _varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == _VARINT:
            start = pos
            _, pos = _varint(data, pos, end)
        elif wire == _LENGTH:
            if pos < end and data[pos] < 0x80:
                size, start = data[pos], pos + 1
            else:
                size, start = _varint(data, pos, end)
            pos = start + size
        elif wire in (_FIXED64, _FIXED32):
            start = pos
            pos += 8 if wire == _FIXED64 else 4
        else:
            raise WireError(f"wire type {wire}")
        if pos > end:
            raise WireError("a field runs past the end of its message")
        yield number, wire, start, pos


@dataclass(frozen=True, slots=True)
class _Counter:
    """Counts fields of one kind in one message and refuses the first past ``limit``."""

    limit: int
    refusal: str

    def over(self, count: int) -> None:
        if count > self.limit:
            raise InvalidInput(self.refusal)


def _more_than(where: str, limit: int, what: str, verb: str = "accepted") -> str:
    return f"{where} has more than {limit} {what}; at most {limit} are {verb}"


def _name(data: bytes, start: int, stop: int, kind: str, index: int) -> str:
    """How a refusal names input or output ``index`` (``kind``), as the decoder would: by its name where it is
    short and UTF-8, else by its position."""
    if start < 0 or stop - start > MAX_NAME_CHARS * 4:
        return f"{kind} {index}" if start >= 0 else f"{kind} ''"
    try:
        name = data[start:stop].decode()
    except UnicodeDecodeError:
        return f"{kind} {index}"
    return f"{kind} '{name}'" if len(name) <= MAX_NAME_CHARS else f"{kind} {index}"


def _tensor(data: bytes, start: int, stop: int, kind: str, index: int, budget: list[int]) -> None:
    """An input's (``kind`` "input", parameters field 4) or an output's (parameters field 2) fields."""
    parameters_field = 4 if kind == "input" else 2
    parameters = dims = others = 0
    name = (-1, -1)
    over: str | None = None
    for number, wire, begin, end in _fields(data, start, stop, budget):
        if number == parameters_field and wire == _LENGTH:
            parameters += 1
            if parameters > MAX_TENSOR_PARAMETERS:
                over = _more_than("{}", MAX_TENSOR_PARAMETERS, "parameters")
                break
        elif kind == "input" and number == 3 and wire in (_VARINT, _LENGTH):
            if wire == _VARINT:
                dims += 1
            elif end - begin > _MAX_VARINT * MAX_DIMS:  # more varints than MAX_DIMS whatever their lengths
                dims = MAX_DIMS + 1
            else:
                dims += len(data[begin:end].translate(None, _CONTINUATION))
            if dims > MAX_DIMS:
                over = _more_than("{}", MAX_DIMS, "dimensions", "supported")
                break
        else:
            if number == 1 and wire == _LENGTH:
                name = (begin, end)
            others += 1
            if others > MAX_OTHER_FIELDS:
                over = _more_than("{}", MAX_OTHER_FIELDS, "fields besides its parameters and shape")
                break
    if over is not None:
        if name[0] < 0:  # the name may follow what is over: look for it among the remaining fields
            name = _find_name(data, end, stop)
        raise InvalidInput(over.format(_name(data, *name, kind, index)))


def _find_name(data: bytes, pos: int, stop: int) -> tuple[int, int]:
    """Where the tensor's name (field 1) is among the fields from ``pos``, within ``MAX_OTHER_FIELDS`` fields."""
    budget = [MAX_OTHER_FIELDS]
    try:
        for number, wire, begin, end in _fields(data, pos, stop, budget):
            if number == 1 and wire == _LENGTH:
                return begin, end
    except (WireError, InvalidInput):
        pass
    return -1, -1


@dataclass(frozen=True, slots=True)
class InferRequestBounds:
    """The bounds of a ``ModelInferRequest`` on the wire, with the server's cap on inputs and outputs."""

    max_tensors: int = MAX_REQUEST_TENSORS

    def check(self, data: bytes) -> None:
        """InvalidInput when the message ``data`` holds more than the bounds above; WireError when it is not
        protobuf's wire format. Nothing is parsed or copied beyond the fields' tags and lengths."""
        budget = [MAX_FIELDS]
        cap = self.max_tensors
        setting = " (OIP_MAX_REQUEST_TENSORS)"
        counters = {
            4: _Counter(MAX_PARAMETERS, _more_than("the request", MAX_PARAMETERS, "parameters")),
            5: _Counter(cap, f"the request names more than {cap} inputs; at most {cap} are accepted{setting}"),
            6: _Counter(cap, f"the request names more than {cap} outputs; at most {cap} are accepted{setting}"),
            7: _Counter(cap, _more_than("raw_input_contents", cap, "entries") + setting),
        }
        others = _Counter(MAX_OTHER_FIELDS, _more_than("the request", MAX_OTHER_FIELDS, "fields of other kinds"))
        counts = dict.fromkeys(counters, 0)
        counts[0] = 0
        tensors: list[tuple[int, int, int]] = []
        for number, wire, start, stop in _fields(data, 0, len(data), budget):
            key = number if number in counters and wire == _LENGTH else 0
            counts[key] += 1
            (counters[key] if key else others).over(counts[key])
            if key in (5, 6):
                tensors.append((key, start, stop))
        positions = {5: 0, 6: 0}
        for key, start, stop in tensors:
            _tensor(data, start, stop, "input" if key == 5 else "output", positions[key], budget)
            positions[key] += 1
