"""Numeric JSON tensor ``data`` straight into numpy with simdjson, no Python number per element.

``load_infer_json`` parses an inference request with simdjson. Every numeric ``data`` array is copied by
``Array.as_buffer`` into a float64, int64 or uint64 buffer and becomes a ``JsonTensor`` (a flat numpy array
of the input's datatype); everything else becomes the Python values ``orjson.loads`` gives. It answers None,
and the caller parses the body with orjson instead, whenever this path cannot decide alone: a small body,
a JSON text the two parsers might read differently (byte order mark, a duplicate key or a NUL in a key),
and numeric data that is not a plain rectangle of numbers of the right kind (null/NaN, booleans, strings,
floats in integer data, ragged or mixed nesting, a value out of range). The general decoder
(``json_data.decode_json_data``) then makes the same checks with the same messages.

Nesting is checked without visiting the numbers: every array above the innermost level is walked (a few
hundred proxies for an image) and the innermost rows are counted; arrays hidden inside a row (``[1, [2]]``)
are caught by counting the ``[`` bytes of the text, which must equal the arrays of the envelope plus those of
the rectangles (strings holding ``[`` send the request to the existing path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import simdjson

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput
from handler.codecs.bounds import check_bounds
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.json_data import decode_json_data, narrow_floats
from handler.codecs.json_keys import check_unique_keys
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts, check_count

#: Bodies smaller than this are parsed by orjson, which is faster on them (docs/performance.md, Decoding).
MIN_FAST_BYTES: Final = 32768

#: ``as_buffer`` type code per numeric datatype: 'd' float64, 'i' int64, 'u' uint64 (the only three it takes).
#: Unsigned types narrower than 64 bits read as int64, so a negative value reaches the range check.
_BUFFER_TYPE: Final[dict[str, tuple[str, np.dtype]]] = {
    **{name: ("d", np.dtype(np.float64)) for name in ("FP16", "FP32", "FP64", "BF16")},
    **{name: ("i", np.dtype(np.int64)) for name in ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32")},
    "UINT64": ("u", np.dtype(np.uint64)),
}

_BOM: Final = b"\xef\xbb\xbf"
_OPEN: Final = ord("[")


@dataclass(frozen=True, slots=True, eq=False)
class JsonTensor:
    """A numeric ``data`` array already decoded: flat, of ``datatype``'s numpy dtype."""

    datatype: str
    array: np.ndarray


class _Undecided(Exception):
    """This request goes through orjson and the general decoder."""


def _plain(value: Any) -> Any:
    """A simdjson value as Python objects (lists, dicts, str, int, float, bool, None)."""
    if isinstance(value, simdjson.Array):
        return value.as_list()
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    return value


def _members(obj: simdjson.Object) -> dict[str, Any]:
    """An object's members as proxies; refused where a key lookup could differ from orjson (last key wins)."""
    keys = list(obj)
    if len(set(keys)) != len(keys) or any("\x00" in key for key in keys):
        raise _Undecided
    return {key: obj[key] for key in keys}


def _arrays(value: Any) -> int:
    """Lists in a Python JSON value; a string holding ``[`` makes the byte count meaningless."""
    if isinstance(value, list):
        return 1 + sum(_arrays(item) for item in value)
    if isinstance(value, dict):
        return sum(_arrays(key) + _arrays(item) for key, item in value.items())
    if isinstance(value, str) and "[" in value:
        raise _Undecided
    return 0


def _rectangle(array: simdjson.Array) -> int:
    """Arrays of a rectangular nesting (walked down to the innermost rows, whose lengths are compared)."""
    level = [array]
    count = 1
    while True:
        size = len(level[0])
        if any(len(row) != size for row in level):
            raise _Undecided
        if size == 0 or not isinstance(level[0][0], simdjson.Array):
            return count
        below = [child for row in level for child in row]
        if not all(isinstance(child, simdjson.Array) for child in below):
            raise _Undecided
        count += len(below)
        level = below


def _numbers(datatype: str, array: simdjson.Array) -> np.ndarray:
    """The numbers of ``array`` (nesting flattened) as ``datatype``, exactly as ``decode_json_data`` makes them."""
    code, wide = _BUFFER_TYPE[datatype]
    try:
        flat = np.frombuffer(array.as_buffer(of_type=code), dtype=wide)
    except (TypeError, ValueError) as exc:  # null, bool, string or object; float in integer data; 64-bit range
        raise _Undecided from exc
    dtype = numpy_dtype(datatype)
    if code == "d":
        if datatype == "FP64":
            return flat.astype(dtype)
        return narrow_floats(flat, datatype, dtype)
    if dtype.itemsize == 8:
        return flat
    info = np.iinfo(dtype)
    if flat.size and (flat.min() < info.min or flat.max() > info.max):
        raise _Undecided
    return flat.astype(dtype)


def _document(root: Any, text: bytes) -> dict[str, Any]:
    if not isinstance(root, simdjson.Object):
        raise _Undecided
    document: dict[str, Any] = {}
    pending: list[tuple[dict[str, Any], str, simdjson.Array]] = []
    for key, value in _members(root).items():
        if key != "inputs" or not isinstance(value, simdjson.Array):
            document[key] = _plain(value)
            continue
        inputs: list[Any] = []
        for item in value:
            if not isinstance(item, simdjson.Object):
                inputs.append(_plain(item))
                continue
            entry = _members(item)
            data, datatype = entry.get("data"), entry.get("datatype")
            numeric = isinstance(data, simdjson.Array) and isinstance(datatype, str) and datatype in _BUFFER_TYPE
            for name, member in entry.items():
                if not (numeric and name == "data"):
                    entry[name] = _plain(member)
            if numeric:
                pending.append((entry, str(datatype), data))
            inputs.append(entry)
        document[key] = inputs
    if not pending:
        return document
    arrays = _arrays(document) + sum(_rectangle(data) for _, _, data in pending)
    if arrays != int(np.count_nonzero(np.frombuffer(text, dtype=np.uint8) == _OPEN)):
        raise _Undecided  # an array inside a row of numbers: ragged or mixed nesting
    for entry, datatype, data in pending:
        entry["data"] = JsonTensor(datatype, _numbers(datatype, data))
    return document


def _check_counts(root: Any, counts: TensorCounts) -> None:
    """The request's input and output counts, then the envelope's bounds, checked from the parsed text (in the
    order of the orjson path) before anything is walked or converted (a repeated key leaves the counts to orjson's
    path, which checks them there)."""
    if not isinstance(root, simdjson.Object):
        return
    keys = list(root)
    if len(set(keys)) == len(keys):
        inputs, outputs, parameters = root.get("inputs"), root.get("outputs"), root.get("parameters")
        counts.check(
            len(inputs) if isinstance(inputs, simdjson.Array) else 0,
            len(outputs) if isinstance(outputs, simdjson.Array) else 0,
            isinstance(parameters, simdjson.Object) and CONTENT_TYPE in parameters,
        )
    check_bounds(root)


def load_infer_json(
    text: bytes | memoryview,
    min_bytes: int | None = None,
    counts: TensorCounts = DEFAULT_COUNTS,
    what: str | None = None,
) -> dict[str, Any] | None:
    """Parse a JSON inference request with numeric ``data`` as ``JsonTensor``; None where orjson must decide.
    InvalidInput when it names more inputs or outputs than ``counts`` allow or exceeds the envelope's bounds, found
    before anything is converted; with ``what`` (the text's name in the message), InvalidInput too for a text that
    is not JSON, so that orjson does not build the values before the mistake (a number simdjson cannot read, such
    as an integer past 64 bits, is left to orjson)."""
    if len(text) < (MIN_FAST_BYTES if min_bytes is None else min_bytes) or bytes(text[:3]) == _BOM:
        return None
    whole = isinstance(text, memoryview) and isinstance(text.obj, bytes) and text.nbytes == len(text.obj)
    body = text.obj if whole else bytes(text)  # type: ignore[union-attr]
    try:
        root = simdjson.Parser().parse(body)
    except ValueError as exc:
        reason = str(exc)
        if what is None or reason.startswith("NUMBER_ERROR"):
            return None
        raise InvalidInput(f"malformed JSON in {what}: {reason.split('.', 1)[0]}") from None
    except RuntimeError:
        return None  # simdjson's DEPTH/BIGINT errors
    _check_counts(root, counts)
    try:
        document = _document(root, body)
        check_unique_keys(body, document)  # a duplicate key: orjson's path refuses it, naming it
        return document
    except (_Undecided, ValueError, TypeError, KeyError, RuntimeError, InvalidInput):
        return None  # RecursionError on a deep envelope


def decode_tensor_data(name: str, datatype: str, shape: Sequence[int], data: Any) -> np.ndarray:
    """``decode_json_data`` for data ``load_infer_json`` has decoded already (or for any plain JSON value)."""
    if not isinstance(data, JsonTensor):
        return decode_json_data(name, datatype, shape, data)
    if data.datatype != datatype:
        raise RuntimeError(f"tensor '{name}' was decoded as {data.datatype}, not {datatype}")
    check_count(name, shape, data.array.size)
    return data.array.reshape(shape)
