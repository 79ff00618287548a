"""Size limits and element counts: what a shape may ask the server to hold, checked before any allocation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from adapters.datatypes import element_size
from adapters.errors import InvalidInput, PayloadTooLarge

_LIMIT_HINT: Final = (
    "(OIP_MAX_BODY_BYTES). Lambda accepts at most 6 MB per synchronous call, about 4.5 MB of binary "
    "tensor data once API Gateway base64-encodes it: send smaller batches, or use batch prediction"
)


def too_large(size: int | str, limit: int) -> PayloadTooLarge:
    """The 413 error for a body over the limit."""
    return PayloadTooLarge(f"request body of {size} bytes is over the limit of {limit} bytes {_LIMIT_HINT}")


def element_count(shape: Sequence[int]) -> int:
    """Number of elements of a shape (exact Python integer, no overflow)."""
    return math.prod(shape)


def check_allocation(name: str, datatype: str, shape: Sequence[int], limit: int, count: int | None = None) -> None:
    """Refuse a shape whose fixed-size data would exceed ``limit`` bytes, before anything is allocated (``count``:
    the shape's element count, where the caller has it)."""
    size = (element_count(shape) if count is None else count) * max(element_size(datatype), 1)
    if size > limit:
        raise PayloadTooLarge(
            f"tensor '{name}' with shape {list(shape)} and datatype {datatype} would need {size} bytes, "
            f"over the limit of {limit} bytes"
        )


def check_count(name: str, shape: Sequence[int], found: int) -> None:
    """InvalidInput unless ``found`` elements fill ``shape``."""
    expected = element_count(shape)
    if found != expected:
        raise InvalidInput(f"tensor '{name}': shape {list(shape)} needs {expected} elements but the data holds {found}")
