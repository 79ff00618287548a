"""Triton's answer to a request passed through to it, in the bytes our own forwarding path writes.

Triton and this server write the same JSON document with two differences, undone here on the JSON part only
(binary output data is never touched): Triton names its own model and omits ``id`` when the request had none
(we name the local model and answer a UUID), and it prints FP32/FP16 values through double precision
(``0.9999765157699585``) where we print the shortest text that reads back as the same float (``0.9999765``).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import orjson
import simdjson

from adapters.datatypes import numpy_dtype
from adapters.errors import UpstreamError
from handler.codecs.ids import answer_id
from handler.codecs.json_data import encode_json_data

#: Datatypes whose JSON text Triton prints through double precision.
_NARROW_FLOATS: Final = frozenset({"FP16", "FP32"})


def is_json_object(text: bytes) -> bool:
    """Whether ``text`` is one well-formed JSON object, checked by simdjson without building Python objects."""
    try:
        return isinstance(simdjson.Parser().parse(text), simdjson.Object)
    except (ValueError, RuntimeError):  # malformed, too deep, or an integer simdjson cannot hold
        return False


def rewrite_forwarded_response(body: bytes, header_length: int | None, model_name: str) -> tuple[bytes, int | None]:
    """Triton's inference answer (``header_length`` None: all JSON) under ``model_name``, as ``(body,
    json_length)`` the way ``encode_infer_response`` returns them."""
    header = body if header_length is None else body[:header_length]
    try:
        document: dict[str, Any] = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise UpstreamError(f"Triton answered an inference response that is not JSON: {exc}") from None
    outputs = document.pop("outputs", [])
    for output in outputs:
        datatype = output.get("datatype")
        if datatype in _NARROW_FLOATS and isinstance(output.get("data"), list):
            array = np.asarray(output["data"], dtype=numpy_dtype(datatype))
            output["data"] = encode_json_data(output.get("name", ""), datatype, array)
    document.pop("model_name", None)
    given_id = document.pop("id", None)
    rewritten = {
        "id": given_id if given_id is not None else answer_id(),
        "model_name": model_name,
        "model_version": document.pop("model_version", ""),
        "outputs": outputs,
        **document,  # what else Triton answered (e.g. response parameters), as it answered it
    }
    text = orjson.dumps(rewritten, option=orjson.OPT_SERIALIZE_NUMPY)
    if header_length is None:
        return text, None
    return text + body[header_length:], len(text)
