"""A ``ModelInferRequest`` whose ``parameters`` maps hold more entries than their bounds is refused from its wire
bytes, before protobuf parses it: against one real ``oip serve --workers 1 --grpc-port``, maps of 300,000 entries
at the request's top level, in an input and in an output (4 MB each), and 32 million empty entries (64 MiB) are
refused INVALID_ARGUMENT with the bound they exceed, and the server process's CPU time (``/proc/<pid>/stat``) grows
by at most ``BUDGET_S`` per refusal (plus a clock tick), while normal requests are answered; the same in a
``ModelStreamInfer`` stream, which goes on. A request of the same size with parameters within the bounds is answered.

The messages are written as bytes and sent with grpc's generic calls (no serializer), so the client never builds
the maps either."""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from tests.support.grpc_receiving import receiving_cpu
from tests.support.iris_requests import IRIS_ROW, normal_requests
from tests.support.servers import OipServer, oip_serve

#: Server CPU one refusal may cost, and ``/proc``'s unit of CPU time (a measured difference may be one off).
BUDGET_S = 0.050
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
ENTRIES = 300_000
METHOD = "/inference.GRPCInferenceService/ModelInfer"
STREAM = "/inference.GRPCInferenceService/ModelStreamInfer"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entries(number: int, count: int) -> bytes:
    """``count`` entries of a ``map<string, InferParameter>`` that is field ``number``: key ``p<i>``, bool true."""
    value = _field(2, b"\x08\x01")  # InferParameter { bool_param: true }
    return b"".join(_field(number, _field(1, b"p%d" % index) + value) for index in range(count))


IRIS_INPUT = _field(1, b"input") + _field(2, b"FP32") + _field(3, b"\x01\x04")  # name, datatype, shape [1, 4]
IRIS_RAW = _field(7, np.array(IRIS_ROW, np.float32).tobytes())


def _iris(top: bytes = b"", input_: bytes = b"", output: bytes | None = None) -> bytes:
    """An iris request as bytes, with ``top`` among its fields, ``input_`` among its input's and, when given, an
    output ``label`` with ``output`` among its fields."""
    message = _field(1, b"iris") + top + _field(5, IRIS_INPUT + input_) + IRIS_RAW
    return message if output is None else message + _field(6, _field(1, b"label") + output)


BOMBS = {
    "top": (_iris(top=_entries(4, ENTRIES)), "the request has more than 256 parameters; at most 256 are accepted"),
    "input": (
        _iris(input_=_entries(4, ENTRIES)),
        "input 'input' has more than 64 parameters; at most 64 are accepted",
    ),
    "output": (
        _iris(output=_entries(2, ENTRIES)),
        "output 'label' has more than 64 parameters; at most 64 are accepted",
    ),
}
MiB = 1 << 20


@pytest.fixture(scope="module")
def server() -> Iterator[OipServer]:
    with oip_serve(grpc=True, workers=1, log_level="warning") as served:
        yield served


@pytest.fixture(scope="module")
def channel(server: OipServer) -> Iterator[grpc.Channel]:
    assert server.grpc is not None
    with grpc.insecure_channel(server.grpc, options=[("grpc.max_send_message_length", -1)]) as opened:
        yield opened


def _unary(channel: grpc.Channel) -> grpc.UnaryUnaryMultiCallable:
    return channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)


@pytest.mark.parametrize("where", list(BOMBS))
def test_a_map_over_its_bound_is_refused_before_it_is_parsed(
    server: OipServer, channel: grpc.Channel, where: str
) -> None:
    message, details = BOMBS[where]
    infer = _unary(channel)
    cpu = server.cpu_seconds()
    with pytest.raises(grpc.RpcError) as refused:
        infer(message, timeout=60)
    spent = server.cpu_seconds() - cpu
    error = refused.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert error.details() == details  # type: ignore[attr-defined]
    assert spent <= BUDGET_S + TICK_S, f"{len(message)} bytes refused with {spent * 1000:.0f} ms of server CPU"
    # normal requests, each answered 200, while the same message is refused again
    with normal_requests(server.url), pytest.raises(grpc.RpcError) as again:
        infer(message, timeout=60)
    assert again.value.details() == details  # type: ignore[attr-defined]


def test_64_mib_of_empty_entries_cost_no_parse(server: OipServer, channel: grpc.Channel) -> None:
    """32 million two-byte map entries, which protobuf's parser takes seconds and gigabytes to build, are refused
    with grpc's cost of receiving 64 MiB and little more: at most twice that of a message of the same size that
    parses at once, measured just before and after."""
    message = _iris(top=b"\x22\x00" * (32 * MiB - 64))
    before = receiving_cpu(server, channel, len(message))
    peak, cpu = server.peak_rss(), server.cpu_seconds()
    with pytest.raises(grpc.RpcError) as refused:
        _unary(channel)(message, timeout=60)
    spent = server.cpu_seconds() - cpu
    receiving = max(before, receiving_cpu(server, channel, len(message)))
    assert refused.value.details() == BOMBS["top"][1]  # type: ignore[attr-defined]
    assert spent <= 2 * receiving + TICK_S, (
        f"refused with {spent * 1000:.0f} ms of server CPU, {receiving * 1000:.0f} to receive"
    )
    assert server.peak_rss() - peak < 512 * MiB


def test_parameters_within_the_bounds_are_answered(channel: grpc.Channel) -> None:
    """256 request parameters, 64 on the input, 64 on the output, the message over the size from which it is
    checked on the wire."""
    long = _field(2, _field(3, b"x" * 256))  # InferParameter { string_param: "xxx..." }
    top = b"".join(_field(4, _field(1, b"note%d" % index) + long) for index in range(256))
    message = _iris(top=top, input_=_entries(4, 64), output=_entries(2, 64))
    assert len(message) > 64 * 1024
    answer = service_pb2.ModelInferResponse.FromString(_unary(channel)(message, timeout=60))
    assert [output.name for output in answer.outputs] == ["label"]


def test_a_map_over_its_bound_in_a_stream_is_answered_and_the_stream_goes_on(
    server: OipServer, channel: grpc.Channel
) -> None:
    stream = channel.stream_stream(STREAM, request_serializer=None, response_deserializer=None)
    message, details = BOMBS["top"]
    cpu = server.cpu_seconds()
    answers = [service_pb2.ModelStreamInferResponse.FromString(a) for a in stream(iter([message, _iris()]))]
    spent = server.cpu_seconds() - cpu
    refused, answered = answers
    assert refused.error_message == details
    assert answered.error_message == ""
    assert answered.infer_response.model_name == "iris"
    assert spent <= 2 * BUDGET_S + TICK_S  # the refusal and one iris request
