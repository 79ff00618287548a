"""``InferRequestBounds.check`` (handler/grpc/message_bounds.py) against protobuf's own parser: for generated
``ModelInferRequest`` messages it refuses exactly those whose parsed maps, tensors or shapes are over their bounds,
with the message naming the first it meets; bytes it calls malformed, the parser refuses too."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2

from adapters.errors import InvalidInput
from handler.grpc.message_bounds import MAX_OTHER_FIELDS, InferRequestBounds, WireError

CAP = 8
BOUNDS = InferRequestBounds(CAP)
names = st.text(min_size=0, max_size=6)
counts = st.sampled_from([0, 1, 63, 64, 65, 200])


@st.composite
def requests(draw: st.DrawFn) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=draw(names), id=draw(names))
    for index in range(draw(st.sampled_from([0, 1, 255, 256, 257]))):
        request.parameters[f"p{index}"].int64_param = index
    for _ in range(draw(st.integers(0, CAP + 1))):
        item = request.inputs.add(
            name=draw(names), datatype="FP32", shape=draw(st.lists(st.integers(0, 2**40), max_size=34))
        )
        for key in range(draw(counts)):
            item.parameters[f"q{key}"].bool_param = True
        if draw(st.booleans()):
            item.contents.fp32_contents.extend([1.0] * draw(st.integers(0, 100)))
    for _ in range(draw(st.integers(0, CAP + 1))):
        item = request.outputs.add(name=draw(names))
        for key in range(draw(counts)):
            item.parameters[f"r{key}"].string_param = "x"
    for _ in range(draw(st.integers(0, CAP + 1))):
        request.raw_input_contents.append(b"\0" * draw(st.integers(0, 40)))
    return request


def over(request: service_pb2.ModelInferRequest) -> bool:
    """Whether the parsed message holds more than the bounds."""
    return (
        len(request.parameters) > 256
        or max(len(request.inputs), len(request.outputs), len(request.raw_input_contents)) > CAP
        or any(len(item.parameters) > 64 or len(item.shape) > 32 for item in request.inputs)
        or any(len(item.parameters) > 64 for item in request.outputs)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_refuses_exactly_the_messages_over_a_bound(request: service_pb2.ModelInferRequest) -> None:
    data = request.SerializeToString()
    if over(request):
        with pytest.raises(InvalidInput):
            BOUNDS.check(data)
    else:
        BOUNDS.check(data)


@settings(max_examples=300, deadline=None)
@given(requests(), st.data())
def test_what_it_calls_malformed_the_parser_refuses(
    request: service_pb2.ModelInferRequest, data: st.DataObject
) -> None:
    wire = bytearray(request.SerializeToString())
    cut = data.draw(st.integers(0, len(wire)))
    garbled = bytes(wire[:cut]) + data.draw(st.binary(max_size=8))
    try:
        BOUNDS.check(garbled)
    except WireError:
        with pytest.raises(DecodeError):
            service_pb2.ModelInferRequest.FromString(garbled)
    except InvalidInput:
        pass


def test_names_the_tensor_whose_map_is_over_its_bound() -> None:
    request = service_pb2.ModelInferRequest()
    request.inputs.add(name="a")
    item = request.outputs.add(name="b")
    for key in range(65):
        item.parameters[f"k{key}"].bool_param = True
    with pytest.raises(InvalidInput, match=r"^output 'b' has more than 64 parameters; at most 64 are accepted$"):
        BOUNDS.check(request.SerializeToString())


def test_other_fields_are_bounded() -> None:
    unknown = b"\x78\x00" * (MAX_OTHER_FIELDS + 1)  # field 15, varint 0
    service_pb2.ModelInferRequest.FromString(unknown)
    with pytest.raises(InvalidInput, match="more than 64 fields of other kinds"):
        BOUNDS.check(unknown)
