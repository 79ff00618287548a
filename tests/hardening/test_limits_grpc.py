"""gRPC limits against ``oip serve --grpc-port`` on 127.0.0.1: OIP_MAX_BODY_BYTES bounds a message as it arrives and
once decompressed (RESOURCE_EXHAUSTED, as gRPC's status table says, with the server's memory flat), a request naming
more inputs than allowed is refused before any is decoded, and a failed request's buffers are freed at once. The
server is started with a 6 MiB limit (``--max-body-bytes``; ``oip serve``'s default is 64 MiB), which the messages
below are sized against."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tests.support.iris_requests import iris_answers, normal_requests
from tests.support.servers import OipServer, oip_serve, wait_for

MiB = 1 << 20
#: The largest message the server under test accepts, as it arrives and decompressed.
LIMIT = 6 * MiB


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve("--max-body-bytes", str(LIMIT), grpc=True, workers=1, log_level="warning") as served:
        yield served


def _stub(address: str, compression: grpc.Compression | None = None) -> tuple[grpc.Channel, object]:
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", -1)], compression=compression)
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _iris(raw: bytes = bytes(16), shape: tuple[int, ...] = (1, 4), inputs: int = 1) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name="iris")
    for _ in range(inputs):
        request.inputs.add(name="input", datatype="FP32", shape=list(shape))
    if raw:
        request.raw_input_contents.append(raw)
    return request


def _refusal(
    server: OipServer, request: service_pb2.ModelInferRequest, **channel: object
) -> tuple[grpc.RpcError, float]:
    """The error the server answers, and its CPU seconds meanwhile (its own work, whatever the neighbours do)."""
    assert server.grpc is not None
    connection, stub = _stub(server.grpc, **channel)  # type: ignore[arg-type]
    cpu = server.cpu_seconds()
    with connection, pytest.raises(grpc.RpcError) as refused:
        stub.ModelInfer(request, timeout=60)  # type: ignore[attr-defined]
    return refused.value, server.cpu_seconds() - cpu


def test_a_message_over_the_limit_is_resource_exhausted(server: OipServer) -> None:
    peak = server.peak_rss()
    size = LIMIT + MiB
    error, cpu = _refusal(server, _iris(bytes(size), shape=(size // 16, 4)))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (error.details() or "")
    assert cpu < 1
    assert server.peak_rss() - peak < 16 * MiB  # refused from its length prefix, never buffered


def test_a_gzip_bomb_is_refused_without_the_memory(server: OipServer) -> None:
    """64 MiB of zeros, a few hundred KB compressed: decompression stops at the limit."""
    peak = server.peak_rss()
    with normal_requests(server.url) as answered:
        started = time.monotonic()
        for _ in range(3):
            error, cpu = _refusal(server, _iris(bytes(64 * MiB), shape=(4 * MiB, 4)), compression=grpc.Compression.Gzip)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in (error.details() or "")
            assert cpu < 2  # the client's compressing 64 MiB is most of the time a bomb takes
        refused = time.monotonic()
    assert server.peak_rss() - peak < 32 * MiB  # 1 GB a bomb with the limit at INT32_MAX
    assert answered.between(started, refused), "no normal request was answered while the bombs came in"


def test_80000_inputs_are_refused_before_any_is_decoded(server: OipServer) -> None:
    error, cpu = _refusal(server, _iris(b"", inputs=80_000))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Over 64 KiB, the message's fields are counted on the wire before protobuf parses it, up to the bound alone.
    assert error.details() == (
        "the request names more than 1024 inputs; at most 1024 are accepted (OIP_MAX_REQUEST_TENSORS)"
    )
    assert cpu < 1


def test_counts_refused_with_the_same_message_as_rest(server: OipServer) -> None:
    assert server.grpc is not None
    names = [f"output{n}" for n in range(65)]
    request = _iris()
    for name in names:
        request.outputs.add(name=name)
    error, _ = _refusal(server, request)
    document = {
        "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}],
        "outputs": [{"name": name} for name in names],
    }
    answer = httpx.post(f"{server.url}/v2/models/iris/infer", json=document)
    assert answer.status_code == 400
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == answer.json()["error"] == "the request names 65 outputs; model 'iris' has 2 outputs"


def test_memory_returns_after_five_invalid_large_messages() -> None:
    """The error path keeps no request in a reference cycle: five 40 MiB messages that fail (their data does not
    fit their shape) leave resident memory where it was, without waiting for a garbage collection. glibc is left to
    return freed memory as it does by default (OIP_MALLOC_KEEP_MB=0), so that what stays is what is referenced."""
    with oip_serve(
        "--max-body-bytes", str(48 * MiB), grpc=True, env={"OIP_MALLOC_KEEP_MB": "0"}, workers=1, log_level="warning"
    ) as server:
        assert server.grpc is not None
        iris_answers(server.url)
        before = server.rss()
        invalid = _iris(bytes(40 * MiB))
        for _ in range(5):
            error, _ = _refusal(server, invalid)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "needs 16 bytes" in (error.details() or "")
        # 400 MB more when each failed request stayed in a cycle; freed as each handler returns, maybe just after
        # its answer went out
        wait_for(lambda: server.rss() - before < 100 * MiB, "memory did not return", timeout=10)


def test_a_connection_that_never_finishes_the_handshake_is_closed() -> None:
    """Nothing sent, or HTTP/2's preface alone: closed after OIP_HEADER_TIMEOUT (grpc's own default is 120 s)."""
    with oip_serve("--header-timeout", "1", grpc=True, workers=1, log_level="warning") as server:
        assert server.grpc is not None
        host, port = server.grpc.rsplit(":", 1)
        for sent in (b"", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"):
            with socket.create_connection((host, int(port)), timeout=30) as sock:  # closed by then, or it fails
                sock.sendall(sent)
                started = time.monotonic()
                while sock.recv(65536):
                    pass
                assert time.monotonic() - started > 0.5  # held until the header timeout, not refused at once
        iris_answers(server.url)
