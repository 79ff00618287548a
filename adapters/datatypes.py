"""V2 tensor datatypes and their numpy equivalents: one table, its inverse derived from it."""

from __future__ import annotations

from functools import cache
from typing import Final

import numpy as np

from adapters.errors import InvalidInput

#: V2 datatype -> numpy dtype. BF16 is resolved lazily (it needs ml_dtypes); BYTES is ``object``.
_DATATYPE_TO_NUMPY: Final[dict[str, np.dtype]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
}

#: Every datatype of the protocol's table, plus BF16 from the later REST text.
DATATYPES: Final[tuple[str, ...]] = (*_DATATYPE_TO_NUMPY, "BF16")

_NUMPY_TO_DATATYPE: Final[dict[np.dtype, str]] = {dt: name for name, dt in _DATATYPE_TO_NUMPY.items()}

#: Triton model-config ``TYPE_*`` names that differ from the V2 names.
_CONFIG_ALIASES: Final[dict[str, str]] = {"STRING": "BYTES"}


@cache
def _bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput("BF16 tensors need the 'ml_dtypes' package (pip install 'oip-serverless[bf16]')") from exc
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype of a V2 datatype; raises InvalidInput for an unknown name."""
    dtype = _DATATYPE_TO_NUMPY.get(datatype)
    if dtype is not None:
        return dtype
    if datatype == "BF16":
        return _bfloat16()
    raise InvalidInput(f"unknown datatype '{datatype}'; expected one of {', '.join(DATATYPES)}")


def datatype_of(dtype: np.dtype) -> str:
    """The V2 datatype of a numpy dtype (str and bytes arrays are BYTES)."""
    name = _NUMPY_TO_DATATYPE.get(dtype)
    if name is not None:
        return name
    if dtype.kind in "SU":
        return "BYTES"
    if dtype.name == "bfloat16":
        return "BF16"
    raise InvalidInput(f"numpy dtype {dtype} has no V2 datatype")


def element_size(datatype: str) -> int:
    """Bytes per element in the binary encoding; 0 for BYTES, whose elements vary."""
    return 0 if datatype == "BYTES" else numpy_dtype(datatype).itemsize


def from_config_type(config_type: str) -> str:
    """Triton config ``TYPE_FP32`` -> ``FP32``; ``TYPE_STRING`` -> ``BYTES``."""
    name = config_type.removeprefix("TYPE_")
    return _CONFIG_ALIASES.get(name, name)
