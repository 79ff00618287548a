"""Tensor data <-> numpy, over every datatype.

Spec: "Tensor elements may be presented in their nature multi-dimensional representation,
or as a flattened one-dimensional representation."
"""

# covers: handler/codecs/binary_data.py
# covers: handler/codecs/json_data.py

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from adapters.errors import InvalidInput, PayloadTooLarge
from handler.codecs.binary_data import decode_binary_data, encode_binary_data
from handler.codecs.json_data import decode_json_data, encode_json_data
from handler.protocol.limits import check_allocation
from tests.support.samples import SAMPLES, as_bytes_array


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(a == b))


@pytest.mark.parametrize("datatype", SAMPLES)
def test_json_flat_data_decodes(datatype: str) -> None:
    data, expected = SAMPLES[datatype]
    decoded = decode_json_data("t", datatype, (2, 3), data)
    assert decoded.shape == (2, 3)
    if datatype == "BYTES":
        assert decoded.tolist() == expected.tolist()
    else:
        assert _equal(decoded, expected)


@pytest.mark.parametrize("datatype", SAMPLES)
def test_json_nested_data_decodes_like_flat(datatype: str) -> None:
    data, _ = SAMPLES[datatype]
    nested = [data[:3], data[3:]]
    assert (
        decode_json_data("t", datatype, (2, 3), nested).tolist()
        == decode_json_data("t", datatype, (2, 3), data).tolist()
    )


@pytest.mark.parametrize("datatype", SAMPLES)
def test_binary_round_trip(datatype: str) -> None:
    _, expected = SAMPLES[datatype]
    raw = encode_binary_data(datatype, expected)
    decoded = decode_binary_data("t", datatype, (2, 3), memoryview(raw))
    if datatype == "BYTES":
        assert decoded.tolist() == as_bytes_array(expected).tolist()
    else:
        assert _equal(decoded, expected)
        assert len(raw) == expected.size * expected.dtype.itemsize


@pytest.mark.parametrize("datatype", SAMPLES)
def test_json_encode_then_decode_is_identity(datatype: str) -> None:
    _, expected = SAMPLES[datatype]
    encoded = encode_json_data("t", datatype, expected)
    as_list = encoded.tolist() if isinstance(encoded, np.ndarray) else encoded
    decoded = decode_json_data("t", datatype, (2, 3), as_list)
    assert decoded.tolist() == expected.tolist()


@pytest.mark.parametrize("datatype", SAMPLES)
def test_empty_tensors(datatype: str) -> None:
    assert decode_json_data("t", datatype, (0, 3), []).shape == (0, 3)
    assert decode_binary_data("t", datatype, (0,), memoryview(b"")).shape == (0,)


def test_bytes_binary_uses_four_byte_little_endian_lengths() -> None:
    # "For BYTES type an element is represented by a 4-byte unsigned integer giving the length
    # followed by the actual bytes."
    raw = encode_binary_data("BYTES", np.array(["ab", "é"], dtype=object))
    assert raw == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 2) + "é".encode()


def test_bool_binary_is_one_byte_per_element() -> None:
    # "For BOOL type element true is a single byte with value 1 and false is a single byte with value 0."
    assert encode_binary_data("BOOL", np.array([True, False])) == b"\x01\x00"
    with pytest.raises(InvalidInput, match="0 or 1"):
        decode_binary_data("t", "BOOL", (2,), memoryview(b"\x01\x02"))


def test_fp16_json_numbers_are_converted() -> None:
    decoded = decode_json_data("t", "FP16", (2,), [1.5, -2.25])
    assert decoded.dtype == np.float16 and decoded.tolist() == [1.5, -2.25]


def test_null_is_nan_for_floats() -> None:
    assert math.isnan(decode_json_data("t", "FP32", (1,), [None])[0])
    assert encode_json_data("t", "FP32", np.array([np.nan], np.float32)).tolist()[0] != 0


@pytest.mark.parametrize(
    ("datatype", "data", "message"),
    [
        ("INT32", [1.5, 2], "must be JSON integers"),
        ("INT8", [128], "out of range"),
        ("UINT8", [-1], "out of range"),
        ("UINT64", [2**64], "out of range"),
        ("BOOL", [1, 0], "true/false"),
        ("FP32", [[1, 2], [3]], "well-formed"),
        ("FP32", ["abc"], "well-formed"),
        ("FP32", [{"a": 1}], "well-formed"),
        ("BYTES", [1, 2], "JSON strings"),
        ("FP32", {"a": 1}, "must be a JSON array"),
        ("FP32", None, "must be a JSON array"),
    ],
)
def test_bad_json_data_is_invalid_input(datatype: str, data: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        decode_json_data("t", datatype, (2,), data)


@pytest.mark.parametrize(("shape", "count"), [((2, 2), 3), ((3,), 4), ((0,), 1)])
def test_shape_data_mismatch(shape: tuple[int, ...], count: int) -> None:
    with pytest.raises(InvalidInput, match=f"needs {math.prod(shape)} elements but the data holds {count}"):
        decode_json_data("t", "FP32", shape, list(range(count)))


def test_binary_size_mismatch() -> None:
    with pytest.raises(InvalidInput, match="needs 16 bytes but binary_data_size is 12"):
        decode_binary_data("t", "FP32", (4,), memoryview(bytes(12)))


@pytest.mark.parametrize(
    "raw",
    [b"\x05\x00\x00\x00abc", b"\x01\x00", struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"],
)
def test_malformed_bytes_binary(raw: bytes) -> None:
    with pytest.raises(InvalidInput):
        decode_binary_data("t", "BYTES", (1,), memoryview(raw))


def test_huge_shape_is_refused_before_allocation() -> None:
    with pytest.raises(PayloadTooLarge, match="would need 4000000000000 bytes"):
        check_allocation("t", "FP32", (1_000_000, 1_000_000), 64 * 1024 * 1024)
    check_allocation("t", "FP32", (1024,), 64 * 1024 * 1024)


def test_binary_decode_is_a_view_not_a_copy() -> None:
    raw = bytearray(encode_binary_data("FP32", np.arange(4, dtype=np.float32)))
    decoded = decode_binary_data("t", "FP32", (4,), memoryview(raw))
    raw[0:4] = struct.pack("<f", 9.0)
    assert decoded[0] == 9.0


def test_non_utf8_bytes_output_needs_binary() -> None:
    with pytest.raises(InvalidInput, match="binary_data"):
        encode_json_data("out", "BYTES", np.array([b"\xff\xfe"], dtype=object))
