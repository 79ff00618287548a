"""Domain results -> inference response bodies: ``(body, json_length)`` the way tritonclient's
``generate_request_body`` returns them, with ``json_length`` None for an all-JSON body.
"""

from __future__ import annotations

from typing import Any

import orjson

from adapters.types import InferCall, InferResult
from handler.codecs.binary_data import BINARY_DATA_SIZE, encode_binary_data
from handler.codecs.ids import answer_id
from handler.codecs.json_data import encode_json_data
from handler.codecs.s3_references import STORED


def binary_outputs(call: InferCall) -> dict[str, bool]:
    """Which outputs the caller wants in binary: ``binary_data`` per output, else ``binary_data_output``."""
    return {o.name: o.binary for o in call.outputs if o.binary is not None}


def encode_infer_response(result: InferResult, call: InferCall) -> tuple[bytes, int | None]:
    """Encode a result as JSON, or as JSON header + binary tensors when any output is binary."""
    explicit = binary_outputs(call)
    default = call.binary_output_default
    outputs: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for tensor in result.outputs:
        entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
        parameters = dict(tensor.parameters)
        if tensor.data is STORED:  # written to S3: its parameters say where
            pass
        elif explicit.get(tensor.name, default):
            chunk = encode_binary_data(tensor.datatype, tensor.data)
            parameters[BINARY_DATA_SIZE] = len(chunk)
            chunks.append(chunk)
        else:
            entry["data"] = encode_json_data(tensor.name, tensor.datatype, tensor.data)
        if parameters:
            entry["parameters"] = parameters
        outputs.append(entry)
    document: dict[str, Any] = {
        "id": result.id if result.id is not None else answer_id(),
        "model_name": result.model_name,
        "model_version": result.model_version,
        "outputs": outputs,
    }
    if result.parameters:
        document["parameters"] = dict(result.parameters)
    header = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return header, None
    return b"".join([header, *chunks]), len(header)
