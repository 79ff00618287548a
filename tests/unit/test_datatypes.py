"""The datatype table: "Tensor data types are shown in the following table along with the size of each type"."""

# covers: adapters/errors.py

from __future__ import annotations

import numpy as np
import pytest

from adapters.datatypes import DATATYPES, datatype_of, element_size, from_config_type, numpy_dtype
from adapters.errors import InvalidInput

#: The spec's table: Data Type -> Size (bytes); BYTES is "Variable (max 2^32)".
SPEC_SIZES = {
    "BOOL": 1, "UINT8": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8, "INT8": 1, "INT16": 2, "INT32": 4,
    "INT64": 8, "FP16": 2, "FP32": 4, "FP64": 8, "BF16": 2,
}  # fmt: skip


@pytest.mark.parametrize(("datatype", "size"), SPEC_SIZES.items())
def test_element_size_matches_the_spec_table(datatype: str, size: int) -> None:
    assert element_size(datatype) == size


def test_every_datatype_is_known() -> None:
    assert set(DATATYPES) == {*SPEC_SIZES, "BYTES"}
    assert element_size("BYTES") == 0


@pytest.mark.parametrize("datatype", [d for d in DATATYPES if d != "BYTES"])
def test_numpy_dtype_round_trips(datatype: str) -> None:
    assert datatype_of(numpy_dtype(datatype)) == datatype


def test_strings_map_to_bytes() -> None:
    assert datatype_of(np.dtype("U5")) == "BYTES"
    assert datatype_of(np.dtype(object)) == "BYTES"


@pytest.mark.parametrize("name", ["fp32", "FLOAT", "STRING", "", "INT128"])
def test_unknown_datatype_is_invalid_input(name: str) -> None:
    # "All strings in all contexts are case-sensitive."
    with pytest.raises(InvalidInput, match="unknown datatype"):
        numpy_dtype(name)


def test_config_types() -> None:
    assert from_config_type("TYPE_FP32") == "FP32"
    assert from_config_type("TYPE_STRING") == "BYTES"
