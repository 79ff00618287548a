"""A ``grpc-timeout`` header grpc cannot parse (``1Z``: no such unit; ``-1S``; no digits) against
``oip serve --grpc-port``, sent over a raw HTTP/2 connection (no gRPC client sends one). grpc's core rejects it
while it reads the call's headers, before any code of the server's runs (an interceptor sees the call, but never
the header, valid or not), and answers ``INTERNAL`` with its own message; docs/protocol.md says so. The server
goes on serving: later calls on the same connection, on new connections, and REST."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.support import servers
from tests.support.iris_requests import iris_answers
from tests.support.raw_grpc import RawChannel

READY = "/inference.GRPCInferenceService/ServerReady"
INFER = "/inference.GRPCInferenceService/ModelInfer"
GRPC_ANSWER = ("13", "Error parsing 'grpc-timeout' metadata")  # INTERNAL


@pytest.fixture(scope="module")
def server() -> Iterator[servers.OipServer]:
    with servers.oip_serve("--log-level", "warning", grpc=True, workers=1) as served:
        yield served


def _iris() -> bytes:
    request = service_pb2.ModelInferRequest(model_name="iris")
    request.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(bytes(16))
    return request.SerializeToString()


def _ready(answer_data: bytes) -> bool:
    assert answer_data[:1] == b"\x00" and int.from_bytes(answer_data[1:5], "big") == len(answer_data) - 5
    return service_pb2.ServerReadyResponse.FromString(answer_data[5:]).ready


def test_a_valid_grpc_timeout_is_served_over_the_raw_connection(server: servers.OipServer) -> None:
    """The raw client's own check: with a timeout grpc parses, the same call is answered."""
    assert server.grpc is not None
    with RawChannel(server.grpc) as channel:
        answer = channel.call(READY, b"", (("grpc-timeout", "5S"),))
        assert (answer.header("grpc-status"), answer.reset) == ("0", None)
        assert _ready(answer.data)
        answer = channel.call(INFER, _iris(), (("grpc-timeout", "100000000H"),))  # past a day: clamped, served
        assert answer.header("grpc-status") == "0", answer.headers
        response = service_pb2.ModelInferResponse.FromString(answer.data[5:])
        assert sorted(output.name for output in response.outputs) == ["label", "probabilities"]


@pytest.mark.parametrize("value", ["1Z", "-1S", "S", "1.5S"])
def test_an_unparsable_grpc_timeout_is_grpcs_internal_and_the_server_goes_on(
    server: servers.OipServer, value: str
) -> None:
    assert server.grpc is not None
    with RawChannel(server.grpc) as channel:
        for path, message in ((READY, b""), (INFER, _iris())):
            answer = channel.call(path, message, (("grpc-timeout", value),))
            assert (answer.header("grpc-status"), answer.header("grpc-message")) == GRPC_ANSWER, answer.headers
            assert answer.data == b""  # no handler ran
        answer = channel.call(READY, b"")  # the same connection goes on
        assert (answer.header("grpc-status"), _ready(answer.data)) == ("0", True)
    with grpc.insecure_channel(server.grpc) as connection:  # and so do new ones
        stub = service_pb2_grpc.GRPCInferenceServiceStub(connection)
        assert stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=30).ready
        request = service_pb2.ModelInferRequest.FromString(_iris())
        assert len(stub.ModelInfer(request, timeout=30).outputs) == 2
    iris_answers(server.url)
    assert server.child.running()
    assert "Traceback" not in server.child.text()
