"""Triton's classification extension: an output requested with ``classification: N`` comes back as its top N.

"the returned tensor will not be the shape and type produced by the model, but will instead be type BYTES
with shape [ batch-size, <count> ]" (without the batch dimension for a model that does not batch; a count over
the classes per item gives every class, as Triton does), each
element ``"<value>:<index>[:<label>]"``. Values print as Triton's ``std::to_string`` prints them: integers
plainly, floats with six decimals. Labels come from the output's ``label_filename`` in config.pbtxt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import numpy as np

from adapters.errors import InvalidInput
from adapters.types import RequestedOutput, Tensor

CLASSIFICATION: Final = "classification"


#: The largest N: Triton reads it as a 32-bit unsigned integer (2**32 + 1 asks it for 1 class, 2**40 for none).
MAX_CLASS_COUNT: Final = 2**32 - 1

#: The most elements a batch item of a classified output may have, as Triton's ``TopkClassifications`` allows;
#: a larger one is refused before it is sorted.
MAX_CLASSIFIED_ELEMENTS: Final = 1_000_000

#: Triton's answer to a larger one (400, gRPC ``INVALID_ARGUMENT``), word for word.
TOO_LARGE: Final = "classification output tensor too large"


def asks_classes(outputs: Iterable[RequestedOutput]) -> bool:
    """Whether any of a request's outputs asks to be classified (``class_count`` then reads how)."""
    return any(CLASSIFICATION in requested.parameters for requested in outputs)


def class_count(requested: RequestedOutput) -> int:
    """The N an output asks for (0: not asked); InvalidInput unless a positive integer Triton can hold."""
    value = requested.parameters.get(CLASSIFICATION)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"output '{requested.name}': '{CLASSIFICATION}' must be a positive integer, got {value!r}")
    if value > MAX_CLASS_COUNT:
        raise InvalidInput(
            f"output '{requested.name}': '{CLASSIFICATION}' {value} is over Triton's limit of {MAX_CLASS_COUNT}"
        )
    return value


def _format(value: np.generic) -> str:
    return f"{float(value):f}" if isinstance(value, np.floating) else str(int(value))


def _top(row: np.ndarray, count: int, labels: Sequence[str] | None) -> list[bytes]:
    order = np.argsort(-row.astype(np.float64), kind="stable")[:count]
    items = []
    for index in order.tolist():
        text = f"{_format(row[index])}:{index}"
        if labels is not None and index < len(labels):
            text += f":{labels[index]}"
        items.append(text.encode())
    return items


def classify(tensor: Tensor, count: int, batched: bool, labels: Sequence[str] | None) -> Tensor:
    """The top ``count`` classes of ``tensor`` per batch item, as Triton's BYTES tensor; InvalidInput, before any
    sorting, for a batch item of more than ``MAX_CLASSIFIED_ELEMENTS``."""
    if tensor.data.dtype.kind not in "iuf":
        raise InvalidInput(f"output '{tensor.name}' is {tensor.datatype}: classification needs a numeric output")
    leading = tensor.shape[0] if batched and tensor.shape else 1
    rows = tensor.data.reshape(leading, tensor.data.size // max(leading, 1))
    if rows.shape[1] > MAX_CLASSIFIED_ELEMENTS:
        raise InvalidInput(TOO_LARGE)
    count = min(count, rows.shape[1])  # as Triton 2.51: N over the classes answers every class
    data = np.empty((rows.shape[0], count), dtype=object)
    for position, row in enumerate(rows):
        data[position, :] = _top(row, count, labels)
    shape = (rows.shape[0], count) if batched else (count,)
    return Tensor(tensor.name, "BYTES", shape, data.reshape(shape))
