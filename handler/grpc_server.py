"""The V2 gRPC service (``GRPCInferenceService``) over the same DataPlane as the REST app.

It uses the generated modules that ship with tritonclient (``tritonclient.grpc.service_pb2`` and
``service_pb2_grpc``: the ``inference`` package of the V2 proto, of which Triton's is a superset), so
``tritonclient.grpc`` clients work unchanged. grpcio is an optional dependency (``oip-serverless[grpc]``),
imported only when the gRPC server is started.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adapters.datatypes import numpy_dtype
from adapters.errors import InvalidInput, V2Error
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.dataplane import DataPlane
from handler.errors import GRPC_STATUS
from handler.settings import Settings
from handler.tensor_codec import (
    check_allocation,
    check_count,
    decode_binary_data,
    decode_json_data,
    encode_binary_data,
)

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


def decode_infer_request(request: Any, max_tensor_bytes: int) -> InferCall:
    """A ``ModelInferRequest`` -> InferCall (raw contents are zero-copy views)."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise InvalidInput(f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs")
    tensors = []
    for index, item in enumerate(request.inputs):
        shape = tuple(int(d) for d in item.shape)
        if any(d < 0 for d in shape):
            raise InvalidInput(f"input '{item.name}': shape dimensions must not be negative")
        numpy_dtype(item.datatype)
        check_allocation(item.name, item.datatype, shape, max_tensor_bytes)
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


def encode_infer_response(result: InferResult, service_pb2: Any) -> Any:
    """InferResult -> ``ModelInferResponse`` with ``raw_output_contents``, as Triton answers."""
    response = service_pb2.ModelInferResponse(
        model_name=result.model_name, model_version=result.model_version, id=result.id or ""
    )
    for tensor in result.outputs:
        output = response.outputs.add()
        output.name, output.datatype = tensor.name, tensor.datatype
        output.shape.extend(tensor.shape)
        response.raw_output_contents.append(encode_binary_data(tensor.datatype, tensor.data))
    return response


def build_server(dataplane: DataPlane, settings: Settings, address: str) -> Any:
    """A ``grpc.aio`` server bound to ``address`` (host:port) serving the V2 gRPC API; call ``start()``."""
    import grpc
    from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, service_pb2, service_pb2_grpc

    async def guard(context: Any, work: Any) -> Any:
        try:
            return await work
        except V2Error as exc:
            await context.abort(getattr(grpc.StatusCode, GRPC_STATUS[exc.code]), exc.message)

    class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
        async def ServerLive(self, request: Any, context: Any) -> Any:
            return service_pb2.ServerLiveResponse(live=dataplane.live())

        async def ServerReady(self, request: Any, context: Any) -> Any:
            return service_pb2.ServerReadyResponse(ready=await dataplane.ready())

        async def ModelReady(self, request: Any, context: Any) -> Any:
            ready = await guard(context, dataplane.model_ready(request.name, request.version or None))
            return service_pb2.ModelReadyResponse(ready=ready)

        async def ServerMetadata(self, request: Any, context: Any) -> Any:
            document = dataplane.server_metadata()
            return service_pb2.ServerMetadataResponse(
                name=document["name"], version=document["version"], extensions=document["extensions"]
            )

        async def ModelMetadata(self, request: Any, context: Any) -> Any:
            metadata = await guard(context, dataplane.model_metadata(request.name, request.version or None))
            tensor = service_pb2.ModelMetadataResponse.TensorMetadata
            return service_pb2.ModelMetadataResponse(
                name=metadata.name,
                versions=list(metadata.versions),
                platform=metadata.platform,
                inputs=[tensor(name=t.name, datatype=t.datatype, shape=list(t.shape)) for t in metadata.inputs],
                outputs=[tensor(name=t.name, datatype=t.datatype, shape=list(t.shape)) for t in metadata.outputs],
            )

        async def ModelInfer(self, request: Any, context: Any) -> Any:
            async def infer() -> Any:
                call = decode_infer_request(request, settings.max_tensor_bytes)
                result = await dataplane.infer(request.model_name, request.model_version or None, call)
                return encode_infer_response(result, service_pb2)

            return await guard(context, infer())

    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
            ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
        ]
    )
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    server.add_insecure_port(address)
    return server
