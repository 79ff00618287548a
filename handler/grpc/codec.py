"""V2 gRPC messages (``ModelInferRequest`` / ``ModelInferResponse``) <-> domain calls and results.

The messages are tritonclient's generated ``service_pb2`` classes, passed in: nothing here imports grpc.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adapters.errors import InvalidInput
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.codecs.binary_data import decode_binary_data, encode_binary_data
from handler.codecs.bounds import MAX_NAME_CHARS, MAX_PARAMETERS, MAX_TENSOR_PARAMETERS
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.json_data import decode_json_data
from handler.codecs.s3_references import PENDING, S3_URI, SHM_REGION, STORED
from handler.protocol.checks import (
    MAX_DIMS,
    check_has_inputs,
    check_one_data_form,
    check_tensor_header,
    check_unique_inputs,
    check_unique_outputs,
)
from handler.protocol.limits import DEFAULT_COUNTS, TensorCounts, check_count

#: V2 datatype -> the ``InferTensorContents`` field that carries it ("FP16 ... must be represented as raw").
CONTENTS_FIELD: dict[str, str] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


def parameter_value(parameter: Any) -> Any:
    """An ``InferParameter`` as a Python value."""
    kind = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, kind) if kind else None


def _contents(name: str, datatype: str, shape: tuple[int, ...], contents: Any) -> np.ndarray:
    field = CONTENTS_FIELD.get(datatype)
    if field is None:
        raise InvalidInput(f"input '{name}': {datatype} must be sent in raw_input_contents")
    values = list(getattr(contents, field))
    if datatype != "BYTES":
        # Typed contents are a flat list of numbers or booleans: the JSON codec's conversion and checks apply.
        return decode_json_data(name, datatype, shape, values)
    check_count(name, shape, len(values))
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array.reshape(shape)


def decode_infer_request(request: Any, max_tensor_bytes: int, counts: TensorCounts = DEFAULT_COUNTS) -> InferCall:
    """A ``ModelInferRequest`` -> InferCall (raw contents are zero-copy views); its inputs and outputs are
    counted against ``counts`` first."""
    counts.check(len(request.inputs), len(request.outputs), CONTENT_TYPE in request.parameters)
    check_bounds(request)
    raw = list(request.raw_input_contents)
    check_has_inputs(len(request.inputs))
    check_unique_inputs([item.name for item in request.inputs])
    check_unique_outputs([item.name for item in request.outputs])
    if raw and len(raw) != len(request.inputs):
        raw = _raw_beside_references(request, raw)
    tensors = []
    for index, item in enumerate(request.inputs):
        shape = tuple(int(d) for d in item.shape)
        check_tensor_header(item.name, item.datatype, shape, max_tensor_bytes)
        check_one_data_form(item.name, item.HasField("contents") and item.contents.ByteSize() > 0, bool(raw))
        if item.parameters and _reference(item, raw, index):
            parameters = {key: parameter_value(value) for key, value in item.parameters.items()}
            tensors.append(Tensor(item.name, item.datatype, shape, PENDING, parameters))
            continue
        if raw:
            data = decode_binary_data(item.name, item.datatype, shape, memoryview(raw[index]))
        else:
            data = _contents(item.name, item.datatype, shape, item.contents)
        parameters = {key: parameter_value(value) for key, value in item.parameters.items()}
        tensors.append(Tensor(item.name, item.datatype, shape, data, parameters))
    outputs = tuple(
        RequestedOutput(o.name, None, {k: parameter_value(v) for k, v in o.parameters.items()}) for o in request.outputs
    )
    parameters = {key: parameter_value(value) for key, value in request.parameters.items()}
    return InferCall(tuple(tensors), outputs, request.id or None, parameters)


def _name(value: str, what: str) -> None:
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} is {len(value)} characters long; at most {MAX_NAME_CHARS} are accepted")


def _parameters(parameters: Any, where: str, limit: int = MAX_TENSOR_PARAMETERS) -> None:
    if len(parameters) > limit:
        raise InvalidInput(f"{where} has {len(parameters)} parameters; at most {limit} are accepted")
    for key in parameters:
        _name(key, f"a parameter name of {where}")


def check_bounds(request: Any) -> None:
    """A ``ModelInferRequest`` within the bounds of a JSON request's envelope (handler/codecs/bounds.py), with its
    messages, before any of it is converted: names, shapes' dimensions, parameters per map. Its inputs and outputs
    are counted before (``TensorCounts``)."""
    _name(request.id, "the request's id")
    _parameters(request.parameters, "the request", MAX_PARAMETERS)
    for kind, items in (("input", request.inputs), ("output", request.outputs)):
        for index, item in enumerate(items):
            _name(item.name, f"the name of {kind} {index}")
            where = f"{kind} '{item.name}'"
            if kind == "input":
                _name(item.datatype, f"the datatype of {where}")
                if len(item.shape) > MAX_DIMS:
                    raise InvalidInput(f"{where} has {len(item.shape)} dimensions; at most {MAX_DIMS} are supported")
            _parameters(item.parameters, where)


def _is_reference(item: Any) -> bool:
    region = item.parameters.get(SHM_REGION)
    return S3_URI in item.parameters or (region is not None and region.string_param.startswith("s3://"))


def _raw_beside_references(request: Any, raw: list[bytes]) -> list[bytes]:
    """``raw_input_contents`` with an empty entry in the place of each input in S3 (the ``s3_tensors``
    extension), which takes none, as Triton's inputs in shared memory take none; InvalidInput when the count still
    differs."""
    if len(raw) + sum(_is_reference(item) for item in request.inputs) == len(request.inputs):
        entries = iter(raw)
        return [b"" if _is_reference(item) else next(entries) for item in request.inputs]
    raise InvalidInput(f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs")


def _reference(item: Any, raw: list[bytes], index: int) -> bool:
    """Whether an input's data is in S3; InvalidInput when it has data here too."""
    if not _is_reference(item):
        return False
    if (raw and raw[index]) or (item.HasField("contents") and item.contents.ByteSize() > 0):
        raise InvalidInput(f"input '{item.name}' has its data twice: here, and in S3 ('{S3_URI}'); send one")
    return True


def set_parameter(parameter: Any, value: Any) -> None:
    """A Python value (bool, int, float or str) into an ``InferParameter``."""
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    elif isinstance(value, float):
        parameter.double_param = value
    else:
        parameter.string_param = str(value)


def encode_infer_response(result: InferResult, service_pb2: Any) -> Any:
    """InferResult -> ``ModelInferResponse`` with ``raw_output_contents``, as Triton answers; the parameters of
    the response and of each output (content types) as ``InferParameter`` values."""
    response = service_pb2.ModelInferResponse(
        model_name=result.model_name, model_version=result.model_version, id=result.id or ""
    )
    for key, value in result.parameters.items():
        set_parameter(response.parameters[key], value)
    for tensor in result.outputs:
        output = response.outputs.add()
        output.name, output.datatype = tensor.name, tensor.datatype
        output.shape.extend(tensor.shape)
        for key, value in tensor.parameters.items():
            set_parameter(output.parameters[key], value)
        stored = tensor.data is STORED  # written to S3: its place kept empty, as Triton keeps a shared-memory one's
        response.raw_output_contents.append(b"" if stored else encode_binary_data(tensor.datatype, tensor.data))
    return response
