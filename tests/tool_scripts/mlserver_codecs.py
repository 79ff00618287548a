"""MLServer's own codecs, run in the ``mlserver`` tool venv, as the other end of every content type.

    <mlserver venv>/bin/python tests/tool_scripts/mlserver_codecs.py < job.json

The job holds ``cases`` (each: ``name``, ``content_type``, ``level`` request or input, ``value`` tagged as below)
and optionally ``requests`` and ``responses`` (case name -> a V2 request or response made elsewhere). The script
prints one JSON object: ``encoded_requests`` and ``encoded_responses`` (each case's value encoded by MLServer's
codec of its content type), and ``decoded_requests`` and ``decoded_responses`` (the given documents decoded by
MLServer's codecs, as tagged values).

Tagged values: ``{"np": {"dtype", "shape", "data"}}`` (flat data, NaN as null, bytes as latin-1 text),
``{"str": [...]}``, ``{"base64": [latin-1 text of the bytes]}``, ``{"datetime": [ISO 8601]}`` and
``{"pd": {column: tagged column}}``.
"""
# tool venv: mlserver

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from mlserver.codecs import (
    Base64Codec,
    DatetimeCodec,
    NumpyCodec,
    NumpyRequestCodec,
    PandasCodec,
    StringCodec,
    StringRequestCodec,
)
from mlserver.types import InferenceRequest, InferenceResponse

INPUT_CODECS: dict[str, Any] = {
    "np": NumpyCodec, "str": StringCodec, "base64": Base64Codec, "datetime": DatetimeCodec,
}  # fmt: skip
REQUEST_CODECS: dict[str, Any] = {"np": NumpyRequestCodec, "str": StringRequestCodec, "pd": PandasCodec}


def value(tagged: dict[str, Any]) -> Any:
    """The Python value a tagged value stands for."""
    ((kind, body),) = tagged.items()
    if kind == "np":
        data = [b.encode("latin-1") if isinstance(b, str) else (math.nan if b is None else b) for b in body["data"]]
        return np.array(data, dtype=body["dtype"]).reshape(body["shape"])
    if kind == "str":
        return list(body)
    if kind == "base64":
        return [item.encode("latin-1") for item in body]
    if kind == "datetime":
        return [datetime.fromisoformat(item) for item in body]
    return pd.DataFrame({name: _column(column) for name, column in body.items()})


def _column(tagged: dict[str, Any]) -> Any:
    found = value(tagged)
    return found.ravel() if isinstance(found, np.ndarray) else found


def tag(found: Any, kind: str) -> dict[str, Any]:
    """A decoded value, tagged as ``kind`` (pd: per column, each tagged by what it holds)."""
    if kind == "pd":
        return {"pd": {str(name): _tag_column(found[name]) for name in found.columns}}
    if kind == "np":
        array = np.asarray(found)
        data = [
            item.decode("latin-1") if isinstance(item, bytes) else None if isinstance(item, float) and item != item
            else item for item in array.ravel().tolist()
        ]  # fmt: skip
        return {"np": {"dtype": array.dtype.str, "shape": list(array.shape), "data": data}}
    items = list(np.asarray(found, dtype=object).ravel()) if not isinstance(found, list) else found
    if kind == "base64":
        return {"base64": [item.decode("latin-1") for item in items]}
    if kind == "datetime":
        return {"datetime": [item.isoformat() for item in items]}
    return {"str": [item.decode() if isinstance(item, bytes) else item for item in items]}


def _tag_column(column: pd.Series) -> dict[str, Any]:
    if pd.api.types.is_numeric_dtype(column):
        return tag(column.to_numpy(), "np")
    return tag(column.tolist(), "str")


def encode_request(case: dict[str, Any]) -> dict[str, Any]:
    payload = value(case["value"])
    if case["level"] == "request":  # pd: bytes columns (with text, use_bytes=False breaks its own JSON on "ë")
        options = {} if case["content_type"] == "pd" else {"use_bytes": False}
        request = REQUEST_CODECS[case["content_type"]].encode_request(payload, **options)
    else:
        codec = INPUT_CODECS[case["content_type"]]
        options = {} if codec is NumpyCodec else {"use_bytes": False}
        request = InferenceRequest(inputs=[codec.encode_input("INPUT0", payload, **options)])
    return json.loads(request.model_dump_json(exclude_none=True))


def encode_response(case: dict[str, Any]) -> dict[str, Any]:
    payload = value(case["value"])
    if case["level"] == "request":
        options = {} if case["content_type"] == "pd" else {"use_bytes": False}
        response = REQUEST_CODECS[case["content_type"]].encode_response("m", payload, **options)
    else:
        codec = INPUT_CODECS[case["content_type"]]
        options = {} if codec is NumpyCodec else {"use_bytes": False}
        response = InferenceResponse(model_name="m", outputs=[codec.encode_output("OUTPUT0", payload, **options)])
    return json.loads(response.model_dump_json(exclude_none=True))


def decode_request(case: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    request = InferenceRequest(**document)  # pydantic: a request MLServer accepts
    if case["level"] == "request":
        return tag(REQUEST_CODECS[case["content_type"]].decode_request(request), case["content_type"])
    (tensor,) = request.inputs
    return tag(INPUT_CODECS[case["content_type"]].decode_input(tensor), case["content_type"])


def decode_response(case: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    response = InferenceResponse(**document)
    if case["level"] == "request":
        return tag(REQUEST_CODECS[case["content_type"]].decode_response(response), case["content_type"])
    (output,) = response.outputs
    return tag(INPUT_CODECS[case["content_type"]].decode_output(output), case["content_type"])


def main() -> None:
    job = json.load(sys.stdin)
    cases = {case["name"]: case for case in job["cases"]}
    requests, responses = job.get("requests", {}), job.get("responses", {})
    print(json.dumps({
        "encoded_requests": {name: encode_request(case) for name, case in cases.items()},
        "encoded_responses": {name: encode_response(case) for name, case in cases.items()},
        "decoded_requests": {name: decode_request(cases[name], doc) for name, doc in requests.items()},
        "decoded_responses": {name: decode_response(cases[name], doc) for name, doc in responses.items()},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
