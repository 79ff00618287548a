"""JSON tensor ``data`` arrays <-> numpy, with one ``np.asarray`` call (no per-element Python work except
for BYTES and the exact path for 64-bit integers numpy would round through float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput
from handler.protocol.limits import check_count


def _strings_from_json(name: str, data: list[Any]) -> np.ndarray:
    flat = np.array(data, dtype=object).ravel()
    for item in flat:
        if not isinstance(item, str):
            raise InvalidInput(
                f"tensor '{name}': BYTES data must be JSON strings, found {type(item).__name__} {item!r:.40}"
            )
    return flat


def _exact_integers(name: str, data: list[Any], dtype: np.dtype, datatype: str) -> np.ndarray:
    """Slow path for 64-bit values numpy would round through float64 (e.g. ``[0, 2**64 - 1]``)."""
    flat = np.array(data, dtype=object).ravel()
    info = np.iinfo(dtype)
    for item in flat:
        if type(item) is not int:
            raise InvalidInput(f"tensor '{name}': {datatype} data must be JSON integers, found {item!r:.40}")
        if not info.min <= item <= info.max:
            raise InvalidInput(f"tensor '{name}': {item} is out of range for {datatype} [{info.min}, {info.max}]")
    return np.array(flat.tolist(), dtype=dtype)


def _integers_from_json(name: str, data: list[Any], dtype: np.dtype, datatype: str) -> np.ndarray:
    array = np.asarray(data)
    if array.size == 0:
        return array.astype(dtype)
    if array.dtype.kind in "fO" and dtype.itemsize == 8:
        return _exact_integers(name, data, dtype, datatype)
    if array.dtype.kind not in "iu":
        raise InvalidInput(f"tensor '{name}': {datatype} data must be JSON integers, found {array.dtype.name} values")
    info = np.iinfo(dtype)
    if array.min() < info.min or array.max() > info.max:
        raise InvalidInput(f"tensor '{name}': a value is out of range for {datatype} [{info.min}, {info.max}]")
    return array.astype(dtype, copy=False)


def _json_to_array(name: str, data: list[Any], datatype: str) -> np.ndarray:
    dtype = numpy_dtype(datatype)
    if datatype == "BYTES":
        return _strings_from_json(name, data)
    if datatype == "BOOL":
        array = np.asarray(data)
        if array.size and array.dtype != np.bool_:
            raise InvalidInput(f"tensor '{name}': BOOL data must be JSON true/false, found {array.dtype.name} values")
        return array.astype(np.bool_, copy=False)
    if datatype == "FP64":
        # null stands for NaN (JSON has no NaN); numpy converts None to nan for float dtypes.
        return np.asarray(data, dtype=dtype)
    if dtype.kind == "f" or datatype == "BF16":
        return narrow_floats(data, datatype, dtype)
    return _integers_from_json(name, data, dtype, datatype)


@np.errstate(over="ignore")
def narrow_floats(values: Any, datatype: str, dtype: np.dtype) -> np.ndarray:
    """Numbers (JSON values, or a float64 array) as a float type narrower than FP64 (FP16, FP32, BF16), in a new
    array. A number past the type's range becomes inf, as the C cast in Triton makes it, without numpy's overflow
    warning (which a server must not print per request, nor a test turn into an error)."""
    if datatype == "BF16":
        return np.asarray(values, dtype=np.float32).astype(dtype)
    return np.array(values, dtype=dtype)


def decode_json_data(name: str, datatype: str, shape: Sequence[int], data: Any) -> np.ndarray:
    """A JSON ``data`` array (flat or nested) -> numpy array of ``shape``."""
    if not isinstance(data, list):
        raise InvalidInput(f"tensor '{name}': 'data' must be a JSON array, got {type(data).__name__}")
    try:
        array = _json_to_array(name, data, datatype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"tensor '{name}': 'data' is not a well-formed {datatype} array ({exc})") from None
    check_count(name, shape, array.size)
    return array.reshape(shape)


def utf8_text(item: Any, error: str) -> str:
    """A BYTES element as text: a str as it is, bytes decoded as UTF-8; InvalidInput(``error``) if they are not."""
    if isinstance(item, str):
        return item
    try:
        return bytes(item).decode()
    except UnicodeDecodeError:
        raise InvalidInput(error) from None


def _as_text(name: str, item: bytes | str) -> str:
    return utf8_text(
        item, f"output '{name}' holds bytes that are not UTF-8 text; request it with the 'binary_data' parameter"
    )


def encode_json_data(name: str, datatype: str, array: np.ndarray) -> Any:
    """numpy array -> a flat value orjson can serialise (numpy arrays pass through natively)."""
    if datatype == "BYTES":
        return [_as_text(name, item) for item in array.ravel()]
    if datatype == "BF16":
        return np.ascontiguousarray(array, dtype=np.float32).ravel()
    return np.ascontiguousarray(array).ravel()
