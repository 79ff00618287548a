"""The simdjson decoder of JSON tensor data against the JSON standard (Python's ``json`` module, then numpy's
conversion to the datatype and shape): same tensors bit for bit; and which texts it takes. Each case is a JSON text
decoded by ``load_infer_json`` (threshold 0, so small bodies take the simdjson path too) then
``decode_infer_document``. That it gives the reference decoder's answers and errors is
``tests/unit/test_request_decoder.py``'s property.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.datatypes import numpy_dtype
from adapters.errors import V2Error
from handler.codecs import json_numeric
from handler.codecs.json_numeric import JsonTensor, load_infer_json
from handler.codecs.request import decode_infer_document, decode_infer_request, load_json_object
from tests.support.json_spellings import infer_body, nest, render

FLOATS = ["FP16", "FP32", "FP64", "BF16"]
INTEGERS = ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"]
DATATYPES = [*FLOATS, *INTEGERS, "BOOL", "BYTES"]
EXTREMES = [0, 1, -1, 2**53 + 1, 2**53 + 2**29 + 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 255, 256, -129, 65536]
LIMIT = 1 << 24
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(decode: Any, text: bytes) -> tuple[Any, ...]:
    """What decoding gives: per tensor (name, dtype, shape, bytes or values), or the error; and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call = decode(text)
        except V2Error as exc:
            result: Any = (type(exc).__name__, str(exc))
        else:
            result = [
                (t.name, t.data.dtype.str, t.data.shape, t.data.tolist() if t.datatype == "BYTES" else t.data.tobytes())
                for t in call.inputs
            ]
    # A ResourceWarning is the garbage collector's about another test's object, never the decoder's
    return result, sorted({str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)})


def _new(text: bytes) -> Any:
    return decode_infer_document(load_infer_json(text, min_bytes=0) or load_json_object(text), None, LIMIT)


def _standard(text: bytes) -> list[tuple[str, str, tuple[int, ...], Any]]:
    """The tensors the JSON standard gives: ``json.loads``, then numpy's conversion of the elements (nested as
    the shape's outer dimensions, or flat) to the datatype's dtype, in the declared shape."""
    tensors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # past FP16's or FP32's range is infinity, as Triton's C cast makes it
        for spec in json.loads(text)["inputs"]:
            datatype, shape = spec["datatype"], tuple(spec["shape"])
            if datatype == "BYTES":  # JSON strings, kept as text (encoded to UTF-8 when a model takes them)
                array = np.array(spec["data"], dtype=object).reshape(shape)
                tensors.append((spec["name"], array.dtype.str, shape, array.tolist()))
            elif datatype in FLOATS:  # a JSON number is a double (RFC 8259, section 6), then cast
                array = np.array(spec["data"], dtype=np.float64).astype(numpy_dtype(datatype)).reshape(shape)
                tensors.append((spec["name"], array.dtype.str, shape, array.tobytes()))
            else:
                array = np.array(spec["data"], dtype=numpy_dtype(datatype)).reshape(shape)
                tensors.append((spec["name"], array.dtype.str, shape, array.tobytes()))
    return tensors


def _values(datatype: str) -> st.SearchStrategy[Any]:
    if datatype == "BYTES":
        return st.text(max_size=6)
    if datatype == "BOOL":
        return st.booleans()
    if datatype in FLOATS:
        finite = st.floats(allow_nan=False, allow_infinity=False)
        width = {"FP16": 16, "FP32": 32}.get(datatype, 64)
        narrow = st.floats(width=width, allow_nan=False, allow_infinity=False)
        return st.one_of(finite, narrow, st.integers(-(2**63), 2**64 - 1), st.sampled_from([*EXTREMES, -0.0, 5e-324]))
    info = np.iinfo(numpy_dtype(datatype))
    return st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from([int(info.min), int(info.max), 0]))


@st.composite
def valid_inputs(draw: st.DrawFn) -> tuple[str, list[int], str]:
    """A well-formed input: its datatype, shape, and data text (flat or nested, any spelling of the numbers)."""
    datatype = draw(st.sampled_from(DATATYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    count = math.prod(shape)
    flat = draw(st.lists(_values(datatype), min_size=count, max_size=count))
    depth = draw(st.integers(0, len(shape)))
    return datatype, shape, render(nest(flat, shape[:depth]) if depth else flat, draw(st.integers(0, 4)))


@given(st.lists(valid_inputs(), min_size=1, max_size=3))
@SETTINGS
def test_valid_data_gives_the_json_standards_tensors(inputs: list[tuple[str, list[int], str]]) -> None:
    text = infer_body(inputs)
    assert _outcome(_new, text)[0] == _standard(text)


@given(valid_inputs())
@SETTINGS
def test_numeric_data_takes_the_new_path(case: tuple[str, list[int], str]) -> None:
    datatype = case[0]
    if datatype in ("BOOL", "BYTES"):
        document = load_infer_json(infer_body([case]), min_bytes=0)
        assert document is not None and not isinstance(document["inputs"][0]["data"], JsonTensor)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FP16/FP32 overflow to inf warns on both paths
        document = load_infer_json(infer_body([case]), min_bytes=0)
    assert document is not None
    assert isinstance(document["inputs"][0]["data"], JsonTensor)


@pytest.mark.parametrize(
    ("datatype", "values"),
    [("INT64", [2**63 - 1, -(2**63), 0, -1]), ("UINT64", [2**64 - 1, 0, 2**63, 2**63 - 1])],
)
def test_64_bit_extremes_are_exact(datatype: str, values: list[int]) -> None:
    text = infer_body([(datatype, [2, 2], orjson.dumps([values[:2], values[2:]]).decode())])
    document = load_infer_json(text, min_bytes=0)
    assert document is not None and isinstance(document["inputs"][0]["data"], JsonTensor)
    tensor = decode_infer_document(document, None, LIMIT).inputs[0].data
    assert tensor.dtype == numpy_dtype(datatype) and tensor.shape == (2, 2)
    assert tensor.ravel().tolist() == values


def test_a_large_image_goes_through_request_py() -> None:
    image = np.random.default_rng(7).random((1, 3, 224, 224), dtype=np.float32)
    image[0, 1, 2, 3] = -0.0
    nested = orjson.dumps(
        {"inputs": [{"name": "i", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": image.tolist()}]}
    )
    assert len(nested) > json_numeric.MIN_FAST_BYTES
    document = load_infer_json(nested)
    assert document is not None and isinstance(document["inputs"][0]["data"], JsonTensor)
    tensor = decode_infer_request(nested, None, LIMIT).inputs[0].data
    assert tensor.dtype == np.float32 and tensor.tobytes() == image.tobytes()


def test_nan_as_null_keeps_the_old_path() -> None:
    values = [0.5] * 20000 + [None]
    text = infer_body([("FP32", [20001], orjson.dumps(values).decode())])
    assert load_infer_json(text) is None
    tensor = decode_infer_request(text, None, LIMIT).inputs[0].data
    assert np.isnan(tensor[-1]) and not np.isnan(tensor[:-1]).any()


def test_binary_extension_header_is_parsed_alone() -> None:
    header = infer_body([("FP32", [9000], orjson.dumps([0.25] * 9000).decode())])
    header = header[:-2] + b',{"name":"b","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}}]}'
    body = header + np.array([7, -7], dtype=np.int32).tobytes()
    document = load_infer_json(memoryview(body)[: len(header)])
    assert document is not None and isinstance(document["inputs"][0]["data"], JsonTensor)
    call = decode_infer_request(body, len(header), LIMIT)
    assert call.inputs[0].data.tolist() == [0.25] * 9000 and call.inputs[1].data.tolist() == [7, -7]


@pytest.mark.parametrize(
    ("datatype", "data", "expected"),
    [
        ("FP16", "[65520, -1e6, 1.5]", [np.inf, -np.inf, 1.5]),
        ("FP32", "[1e39, -3.5e38, 2.0]", [np.inf, -np.inf, 2.0]),
        ("BF16", "[1e39, 1.0]", [np.inf, 1.0]),
    ],
)
def test_a_number_past_the_types_range_is_infinity_without_a_warning(
    datatype: str, data: str, expected: list[float]
) -> None:
    """As Triton's C cast makes it, on both decoders; numpy's overflow warning is neither printed nor raised (this
    suite turns warnings into errors: hypothesis once found FP16 65520 answered 500 this way)."""
    body = infer_body([(datatype, [len(expected)], data)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast = decode_infer_document(load_infer_json(body, min_bytes=0))
        plain = decode_infer_document(load_json_object(body))
    for call in (fast, plain):
        assert call.inputs[0].data.astype(np.float64).tolist() == expected
