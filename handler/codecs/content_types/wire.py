"""V2 wire dicts <-> numpy arrays for the client helpers, through the same JSON and binary codecs the server
uses (NaN is written as ``null`` and read back as NaN)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from handler.codecs.json_data import decode_json_data, utf8_text


def json_data(datatype: str, array: np.ndarray) -> list[Any]:
    """A flat JSON-ready list: NaN becomes None, bytes must be UTF-8 text (else use base64 or binary)."""
    flat = array.ravel().tolist()
    if datatype == "BYTES":
        return [_text(item) for item in flat]
    if array.dtype.kind == "f" and np.isnan(array).any():
        return [None if math.isnan(item) else item for item in flat]
    return flat


def _text(item: Any) -> str:
    return utf8_text(
        item, "a BYTES element is not UTF-8 text and JSON cannot carry it: use the 'base64' content type or binary=True"
    )


def wire_entry(name: str, datatype: str, array: np.ndarray, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``{"name", "datatype", "shape", "data", "parameters"}`` for one tensor."""
    entry: dict[str, Any] = {
        "name": name,
        "datatype": datatype,
        "shape": [int(dim) for dim in array.shape],
        "data": json_data(datatype, array),
    }
    if parameters:
        entry["parameters"] = dict(parameters)
    return entry


def array_from_wire(entry: Mapping[str, Any]) -> np.ndarray:
    """The numpy array of a wire dict whose ``data`` is JSON (or already an array, as binary decoding leaves it)."""
    data = entry.get("data")
    shape = tuple(int(dim) for dim in entry["shape"])
    if isinstance(data, np.ndarray):
        return data.reshape(shape)
    return decode_json_data(str(entry["name"]), str(entry["datatype"]), shape, data)
