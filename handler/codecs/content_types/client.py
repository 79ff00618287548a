"""Client helpers: Python values -> V2 requests, V2 responses -> Python values, through the codecs.

``httpx.post(url, json=encode_request(df))`` sends a DataFrame; ``decode_response(answer)`` gives it back (a
DataFrame when the response's content type is ``pd``, else a dict of output name -> decoded value).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

import numpy as np
import orjson

from handler.codecs.binary_data import BINARY_DATA_OUTPUT, BINARY_DATA_SIZE, decode_binary_data, encode_binary_data
from handler.codecs.content_types import registry
from handler.codecs.content_types.base import CONTENT_TYPE, InputCodec
from handler.codecs.content_types.dataframe import PandasCodec
from handler.codecs.content_types.ndarray import NumpyCodec
from handler.codecs.content_types.single import DEFAULT_INPUT
from handler.codecs.content_types.wire import array_from_wire

INFERENCE_HEADER_CONTENT_LENGTH = "Inference-Header-Content-Length"


def _input_codec_for(name: str, value: Any) -> type[InputCodec]:
    for codec in registry.input_codecs():
        if codec.can_encode(value):
            return codec
    if isinstance(value, list | tuple) and all(isinstance(v, int | float | bool) for v in value):
        return NumpyCodec
    raise TypeError(
        f"input '{name}': no codec encodes a {type(value).__name__}; register one with register_input_codec"
    )


def _encode_inputs(data: Mapping[str, Any], codec: type[InputCodec] | None) -> list[dict[str, Any]]:
    inputs = []
    for name, value in data.items():
        chosen = codec or _input_codec_for(name, value)
        inputs.append(chosen.encode_input(name, np.asarray(value) if chosen is NumpyCodec else value))
    return inputs


def _encode(data: Any, content_type: str | None) -> dict[str, Any]:
    if content_type is None:
        if PandasCodec.can_encode(data):
            return PandasCodec.encode_request(data)
        if isinstance(data, Mapping):
            return {"inputs": _encode_inputs(data, None)}
        for request_codec in registry.request_codecs():
            if request_codec.can_encode(data):
                return request_codec.encode_request(data)
        return {"inputs": _encode_inputs({DEFAULT_INPUT: data}, None)}
    request_codec = registry.find_request_codec(content_type)
    input_codec = registry.find_input_codec(content_type)
    if request_codec is None and input_codec is None:
        choices = sorted({*registry.request_content_types(), *registry.input_content_types()})
        raise ValueError(f"unknown content type {content_type!r}; the choices are {', '.join(choices)}")
    if isinstance(data, Mapping):
        inputs = _encode_inputs(data, input_codec if request_codec is None or input_codec else None)
        return {"parameters": {CONTENT_TYPE: content_type}, "inputs": inputs} if request_codec else {"inputs": inputs}
    if request_codec is not None:
        return request_codec.encode_request(data)
    assert input_codec is not None
    return {"inputs": [input_codec.encode_input(DEFAULT_INPUT, data)]}


@overload
def encode_request(data: Any, content_type: str | None = None, *, binary: Literal[False] = False) -> dict[str, Any]: ...
@overload
def encode_request(
    data: Any, content_type: str | None = None, *, binary: Literal[True]
) -> tuple[bytes, dict[str, str]]: ...
def encode_request(
    data: Any, content_type: str | None = None, *, binary: bool = False
) -> dict[str, Any] | tuple[bytes, dict[str, str]]:
    """A V2 inference request carrying ``data``: a numpy array, a DataFrame, a list of str, bytes or datetimes,
    or a dict of input name -> one of those. ``content_type`` picks the codec (default: by the value's type).

    Returns a JSON-ready dict; with ``binary=True`` the binary-extension ``(body, headers)`` instead (every
    tensor binary, outputs asked for in binary).
    """
    request = _encode(data, content_type)
    return to_binary(request) if binary else request


def to_binary(request: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """A JSON-ready request as Triton's binary extension: ``(body, headers)``."""
    inputs, chunks = [], []
    for entry in request["inputs"]:
        chunk = encode_binary_data(entry["datatype"], array_from_wire(entry))
        header = {k: v for k, v in entry.items() if k != "data"}
        header["parameters"] = {**entry.get("parameters", {}), BINARY_DATA_SIZE: len(chunk)}
        inputs.append(header)
        chunks.append(chunk)
    document = {**request, "inputs": inputs, "parameters": {**request.get("parameters", {}), BINARY_DATA_OUTPUT: True}}
    header_bytes = orjson.dumps(document)
    headers = {"Content-Type": "application/octet-stream", INFERENCE_HEADER_CONTENT_LENGTH: str(len(header_bytes))}
    return b"".join([header_bytes, *chunks]), headers


def response_document(response: Any, header_length: int | None = None) -> dict[str, Any]:
    """An inference answer's JSON document (from a dict, body bytes, or an httpx or requests response), its binary
    outputs decoded into ``data``."""
    if hasattr(response, "content") and hasattr(response, "headers"):
        length = response.headers.get(INFERENCE_HEADER_CONTENT_LENGTH)
        return response_document(bytes(response.content), int(length) if length is not None else None)
    if isinstance(response, Mapping):
        return dict(response)
    body = memoryview(response)
    document: dict[str, Any] = orjson.loads(body if header_length is None else body[:header_length])
    offset = header_length or 0
    outputs = []
    for entry in document.get("outputs", []):
        size = (entry.get("parameters") or {}).get(BINARY_DATA_SIZE)
        if size is not None:
            shape = tuple(entry["shape"])
            data = decode_binary_data(entry["name"], entry["datatype"], shape, body[offset : offset + size])
            entry = {**entry, "data": data}
            offset += size
        outputs.append(entry)
    document["outputs"] = outputs
    return document


def decode_response(response: Any, header_length: int | None = None) -> Any:
    """A V2 inference response -> a DataFrame (content type ``pd``) or a dict of output name -> value.

    ``response`` is the parsed JSON dict, the body bytes (with ``header_length`` from
    ``Inference-Header-Content-Length`` for a binary answer), or an httpx/requests response object.
    """
    document = response_document(response, header_length)
    content_type = (document.get("parameters") or {}).get(CONTENT_TYPE)
    if content_type == PandasCodec.ContentType:
        return PandasCodec.decode_response(document)
    decoded = {}
    for entry in document["outputs"]:
        own = (entry.get("parameters") or {}).get(CONTENT_TYPE)
        codec = (registry.find_input_codec(own) if own else None) or NumpyCodec
        decoded[entry["name"]] = codec.decode_output(entry)
    return decoded
