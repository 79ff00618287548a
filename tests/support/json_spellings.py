"""V2 request texts written by hand for the JSON decoders' property tests: numbers spelled several ways, data flat
or nested, inputs whose data text is given as it is."""

from __future__ import annotations

import math
from typing import Any

import orjson


def number_text(value: Any, style: int) -> str:
    """A JSON value; a float in one of several spellings (shortest, 17 digits, exponent, few digits) by ``style``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return orjson.dumps(value).decode()
    if isinstance(value, int):
        return str(value)
    text = [repr(value), f"{value:.17g}", f"{value:.6e}", f"{value:.3E}", f"{value:.1f}"][style % 5]
    return text if math.isfinite(float(text)) else repr(value)  # 1.798E+308 would read as infinity


def render(value: Any, style: int) -> str:
    """``value`` (nested lists of JSON values) as JSON text, each element spelled in the style after its
    predecessor's."""
    if isinstance(value, list):
        return "[" + ",".join(render(item, style + i) for i, item in enumerate(value)) + "]"
    return number_text(value, style)


def nest(flat: list[Any], dims: list[int]) -> Any:
    """``flat`` as nested lists of ``dims`` (the outer ones; the rest stays flat inside the rows)."""
    for dim in reversed(dims[1:]):
        if dim == 0:
            return flat
        flat = [flat[i : i + dim] for i in range(0, len(flat), dim)]
    return flat


def infer_body(inputs: list[tuple[str, list[int], str]], request_id: str = "x") -> bytes:
    """A V2 request of the inputs ``(datatype, shape, data text)``, named ``in0``, ``in1``, ...."""
    parts = [
        f'{{"name":"in{i}","shape":{shape},"datatype":"{datatype}","data":{data}}}'
        for i, (datatype, shape, data) in enumerate(inputs)
    ]
    return (f'{{"id":"{request_id}","inputs":[' + ",".join(parts) + "]}").encode()
