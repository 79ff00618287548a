"""Triton's binary tensor data extension: raw little-endian tensor bytes <-> numpy.

Fixed-size types are zero-copy ``np.frombuffer`` views; BYTES elements are Triton's 4-byte little-endian
length followed by the bytes. The parameter names of the extension live here too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput
from handler.protocol.limits import check_count, element_count

BINARY_DATA_SIZE: Final = "binary_data_size"
BINARY_DATA: Final = "binary_data"
BINARY_DATA_OUTPUT: Final = "binary_data_output"

_LENGTH = struct.Struct("<I")


def _strings_from_binary(name: str, buffer: memoryview, count: int) -> np.ndarray:
    """The ``count`` BYTES elements of ``buffer``; InvalidInput as soon as it is clear they are not exactly
    ``count``: the walk stops at element ``count + 1``, so a short shape never costs a walk of a long buffer."""
    if count * _LENGTH.size > len(buffer):
        raise InvalidInput(f"tensor '{name}': {len(buffer)} bytes cannot hold {count} BYTES elements")
    items: list[bytes] = []
    offset, end = 0, len(buffer)
    while offset < end:
        if len(items) == count:
            raise InvalidInput(
                f"tensor '{name}': the data holds more than the {count} BYTES elements its shape has "
                f"({end - offset} bytes are left after element {count})"
            )
        if offset + _LENGTH.size > end:
            raise InvalidInput(f"tensor '{name}': truncated BYTES length prefix at byte {offset}")
        (length,) = _LENGTH.unpack_from(buffer, offset)
        offset += _LENGTH.size
        if offset + length > end:
            raise InvalidInput(f"tensor '{name}': BYTES element of {length} bytes runs past the data at byte {offset}")
        items.append(bytes(buffer[offset : offset + length]))
        offset += length
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def decode_binary_data(name: str, datatype: str, shape: Sequence[int], buffer: memoryview) -> np.ndarray:
    """Binary tensor bytes -> numpy array of ``shape`` (a zero-copy view for fixed-size types)."""
    count = element_count(shape)
    if datatype == "BYTES":
        array = _strings_from_binary(name, buffer, count)
        check_count(name, shape, array.size)
        return array.reshape(shape)
    dtype = numpy_dtype(datatype)
    expected = count * dtype.itemsize
    if len(buffer) != expected:
        raise InvalidInput(
            f"tensor '{name}': shape {list(shape)} of {datatype} needs {expected} bytes "
            f"but binary_data_size is {len(buffer)}"
        )
    array = np.frombuffer(buffer, dtype=dtype)
    if datatype == "BOOL" and array.size and array.view(np.uint8).max() > 1:
        raise InvalidInput(f"tensor '{name}': BOOL bytes must be 0 or 1")
    if not array.flags.aligned:
        array = array.copy()
    return array.reshape(shape)


def _as_bytes(item: bytes | str) -> bytes:
    return item.encode() if isinstance(item, str) else bytes(item)


def encode_binary_data(datatype: str, array: np.ndarray) -> bytes:
    """numpy array -> Triton binary tensor bytes."""
    if datatype == "BYTES":
        parts: list[bytes] = []
        for item in array.ravel():
            encoded = _as_bytes(item)
            parts.append(_LENGTH.pack(len(encoded)))
            parts.append(encoded)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=numpy_dtype(datatype)).tobytes()
