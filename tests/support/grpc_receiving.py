"""What receiving a gRPC message costs the server, as a yardstick for what refusing one may cost: a busy machine
raises both alike, where a fixed number of seconds holds on a quiet one only."""

from __future__ import annotations

import grpc
import pytest
from tritonclient.grpc import service_pb2

from tests.support.servers import OipServer

METHOD = "/inference.GRPCInferenceService/ModelInfer"


def receiving_cpu(server: OipServer, channel: grpc.Channel, size: int) -> float:
    """The server CPU of a ``ModelInfer`` message of about ``size`` bytes that protobuf parses at once (one bytes
    field: raw contents of the wrong size for iris' input) and the server refuses at once."""
    request = service_pb2.ModelInferRequest(model_name="iris")
    request.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(bytes(max(size - request.ByteSize() - 8, 0)))
    send = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
    message = request.SerializeToString()
    cpu = server.cpu_seconds()
    with pytest.raises(grpc.RpcError) as refused:
        send(message, timeout=60)
    assert "needs 16 bytes" in refused.value.details()  # type: ignore[attr-defined]
    return server.cpu_seconds() - cpu
