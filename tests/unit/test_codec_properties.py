"""Property tests: encode -> decode is the identity, and garbage is refused as invalid input (400), or as too
large (413) only when it declares a tensor over the limit."""

from __future__ import annotations

import contextlib

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput, PayloadTooLarge
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.codecs.binary_data import decode_binary_data, encode_binary_data
from handler.codecs.json_data import decode_json_data, encode_json_data
from handler.codecs.request import decode_infer_request
from handler.codecs.response import encode_infer_response

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"]
LIMIT = 1 << 24
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


@st.composite
def tensors(draw: st.DrawFn, finite: bool = False) -> tuple[str, np.ndarray]:
    datatype = draw(st.sampled_from([*NUMERIC, "BYTES"]))
    shape = draw(shapes)
    if datatype == "BYTES":
        texts = draw(st.lists(st.text(max_size=8), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        array = np.empty(len(texts), dtype=object)
        array[:] = texts
        return datatype, array.reshape(shape)
    dtype = numpy_dtype(datatype)
    elements = (
        st.floats(width=dtype.itemsize * 8, allow_nan=False, allow_infinity=not finite) if dtype.kind == "f" else None
    )
    return datatype, draw(hnp.arrays(dtype, shape, elements=elements))


@given(tensors())
@settings(max_examples=300, deadline=None)
def test_binary_encode_decode_is_identity(case: tuple[str, np.ndarray]) -> None:
    datatype, array = case
    raw = encode_binary_data(datatype, array)
    decoded = decode_binary_data("t", datatype, array.shape, memoryview(raw))
    expected = [s.encode() for s in array.ravel()] if datatype == "BYTES" else array.ravel().tolist()
    assert decoded.shape == array.shape
    assert decoded.ravel().tolist() == expected


@given(tensors(finite=True))  # JSON has no NaN or infinity: they travel as null (use binary for them)
@settings(max_examples=300, deadline=None)
def test_json_encode_decode_is_identity(case: tuple[str, np.ndarray]) -> None:
    datatype, array = case
    wire = orjson.loads(orjson.dumps(encode_json_data("t", datatype, array), option=orjson.OPT_SERIALIZE_NUMPY))
    decoded = decode_json_data("t", datatype, array.shape, wire)
    assert decoded.shape == array.shape
    assert decoded.ravel().tolist() == array.ravel().tolist()


@given(tensors(finite=True), st.booleans())
@settings(max_examples=200, deadline=None)
def test_response_then_request_round_trip(case: tuple[str, np.ndarray], binary: bool) -> None:
    """Our response body, re-read as a request body, yields the same tensor (same framing both ways)."""
    datatype, array = case
    result = InferResult("m", "1", (Tensor("t", datatype, array.shape, array),), "id")
    body, json_length = encode_infer_response(result, InferCall((), (RequestedOutput("t", binary),)))
    header = orjson.loads(body[:json_length] if json_length else body)
    header["inputs"] = header.pop("outputs")
    new_header = orjson.dumps(header)
    call = decode_infer_request(new_header + body[json_length or len(body) :], len(new_header), LIMIT)
    got = call.inputs[0].data.ravel().tolist()
    expected = array.ravel().tolist()
    if datatype == "BYTES" and binary:
        expected = [s.encode() for s in expected]
    assert got == expected


@given(st.binary(max_size=256), st.one_of(st.none(), st.integers(min_value=0, max_value=300)))
@settings(max_examples=500, deadline=None)
def test_random_bytes_never_escape_as_other_errors(body: bytes, header_length: int | None) -> None:
    with contextlib.suppress(InvalidInput):  # 256 bytes can declare nothing over the limit: only ever a 400
        decode_infer_request(body, header_length, LIMIT)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)
datatypes = st.sampled_from([*NUMERIC, "BYTES", "BF16", "fp32", ""])
request_inputs = st.fixed_dictionaries(
    {"name": st.text(max_size=4), "shape": st.lists(st.integers(-2, 2**64 - 1), max_size=4), "datatype": datatypes},
    optional={"data": json_values, "parameters": json_values},
)


@given(
    st.fixed_dictionaries(
        {"inputs": st.lists(request_inputs, max_size=3)}, optional={"outputs": json_values, "id": json_values}
    )
)
@settings(max_examples=500, deadline=None)
def test_random_requests_never_escape_as_other_errors(document: dict) -> None:
    try:
        decode_infer_request(orjson.dumps(document), None, LIMIT)
    except PayloadTooLarge as error:  # 413 only for a document that declares a tensor over the limit
        assert _declares_over_limit(document), (error, document)
    except InvalidInput:  # everything else wrong with it is a 400
        pass


def _declares_over_limit(document: dict) -> bool:
    """Whether an input's shape alone, at 8 bytes an element (the widest), would be over ``LIMIT``."""
    for item in document["inputs"]:
        shape = item["shape"]
        if all(isinstance(d, int) and d >= 0 for d in shape) and np.prod(shape, dtype=object) * 8 > LIMIT:
            return True
    return False
