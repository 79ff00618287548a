"""Request checks that do not depend on the wire: made here once, called by the REST and gRPC decoders alike.

The same mistake gets the same message and the same code on both transports (see ``status``). Checks
against a model's metadata (names, datatypes, shapes) live in ``adapters.validation``, run by the backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput
from handler.protocol.limits import check_allocation, element_count

#: The most dimensions a tensor may have (numpy 1.x's limit; Triton's tools never need more).
MAX_DIMS: Final = 32
#: Element counts must fit a signed 64-bit integer, as Triton's ``int64_t`` counts do.
MAX_ELEMENTS: Final = 2**63 - 1


def check_tensor_header(name: str, datatype: str, shape: Sequence[int], max_tensor_bytes: int) -> None:
    """Datatype known, shape sane (≤ 32 dims, no negative dim, count fits int64), size under the limit."""
    numpy_dtype(datatype)
    if len(shape) > MAX_DIMS:
        raise InvalidInput(f"input '{name}' has {len(shape)} dimensions; at most {MAX_DIMS} are supported")
    if shape and min(shape) < 0:
        raise InvalidInput(f"input '{name}': shape {list(shape)} has a negative dimension")
    count = element_count(shape)
    if count > MAX_ELEMENTS:
        raise InvalidInput(f"input '{name}': shape {list(shape)} has more elements than a 64-bit count can hold")
    check_allocation(name, datatype, shape, max_tensor_bytes, count)


def check_has_inputs(count: int) -> None:
    """A request names at least one input."""
    if count == 0:
        raise InvalidInput("invalid inference request: 'inputs' must list at least one tensor")


def _first_repeated(names: Sequence[str]) -> str | None:
    if len(names) < 2:
        return None
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def check_unique_inputs(names: Sequence[str]) -> None:
    """No input is given twice."""
    repeated = _first_repeated(names)
    if repeated is not None:
        raise InvalidInput(f"input '{repeated}' is given twice")


def check_unique_outputs(names: Sequence[str]) -> None:
    """No output is requested twice."""
    repeated = _first_repeated(names)
    if repeated is not None:
        raise InvalidInput(f"output '{repeated}' is requested twice")


def check_one_data_form(name: str, inline: bool, binary: bool) -> None:
    """An input carries its data inline (JSON ``data``, gRPC ``contents``) or as binary, never both."""
    if inline and binary:
        raise InvalidInput(
            f"input '{name}' has its data twice: inline ('data' / 'contents') and binary "
            "('binary_data_size' / 'raw_input_contents'); send one"
        )
