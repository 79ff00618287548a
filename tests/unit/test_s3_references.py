"""The ``s3_tensors`` extension's pieces without S3: what a location may be, which prefixes the settings take, how
the decoders and encoders carry references, and botocore's errors as ours (handler/inference/s3_tensors.py)."""

from __future__ import annotations

import numpy as np
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from tritonclient.grpc import service_pb2

from adapters.errors import Forbidden, InvalidInput, UpstreamError, V2Error
from adapters.types import InferCall, InferResult, RequestedOutput, Tensor
from handler.codecs.request import decode_infer_document
from handler.codecs.response import encode_infer_response
from handler.codecs.s3_references import PENDING, STORED, Location, allowed, location, parse_uri
from handler.config.setting_lists import parse_s3_prefixes
from handler.config.settings import Settings, SettingsError
from handler.grpc import codec as grpc_codec
from handler.inference.s3_tensors import Access, StoreUnavailable, extension_off, mentions_references, translated
from handler.protocol.status import GRPC_STATUS, status_of

TRICKS = [
    "s3://bucket/tensors/../secret",
    "s3://bucket/tensors/./x",
    "s3://bucket/tensors//x",
    "s3://bucket/tensors/",
    "s3://bucket/",
    "s3:///tensors/x",
    "S3://bucket/tensors/x",
    "https://bucket.s3.amazonaws.com/tensors/x",
    "s3://bucket/tensors/a\\..\\b",
    "s3://bucket/tensors/x\r\n",
    "s3://bucket/tensors/x\x00",
]


@pytest.mark.parametrize("uri", TRICKS)
def test_a_location_must_name_one_object_plainly(uri: str) -> None:
    with pytest.raises(InvalidInput, match="input 'x'"):
        parse_uri("input 'x'", uri)


def test_a_location_is_allowed_only_under_a_prefix_with_its_slash() -> None:
    prefixes = parse_s3_prefixes("s3://bucket/tensors")
    assert prefixes == ("s3://bucket/tensors/",)
    assert allowed(Location("bucket", "tensors/a/b"), prefixes)
    assert not allowed(Location("bucket", "tensors-other/a"), prefixes)
    assert not allowed(Location("bucket2", "tensors/a"), prefixes)
    assert not allowed(Location("other", "bucket/tensors/a"), prefixes)
    assert allowed(Location("whole", "any/key"), parse_s3_prefixes("s3://whole/"))


@pytest.mark.parametrize(
    "text", ["bucket/tensors/", "s3://", "s3://Bucket/x/", "s3://b/x/", "s3://bucket/a/../b/", "s3://bucket/a//b/"]
)
def test_the_settings_refuse_prefixes_that_are_no_plain_location(text: str) -> None:
    with pytest.raises(SettingsError, match="OIP_S3_TENSOR_PREFIXES"):
        Settings.from_env({"OIP_S3_TENSOR_PREFIXES": text})


def test_tritonclients_shared_memory_names_carry_an_s3_region() -> None:
    parameters = {"shared_memory_region": "s3://b/p/x", "shared_memory_byte_size": 64, "shared_memory_offset": 8}
    assert location("input 'x'", parameters) == Location("b", "p/x", 8, 64)
    with pytest.raises(InvalidInput, match="'s3_offset' must be a non-negative integer"):
        location("input 'x'", {"s3_uri": "s3://b/p/x", "s3_offset": -1})
    with pytest.raises(InvalidInput, match="'s3_byte_size' must be a non-negative integer"):
        location("input 'x'", {"s3_uri": "s3://b/p/x", "s3_byte_size": True})


def test_the_rest_decoder_leaves_a_reference_pending() -> None:
    document = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "parameters": {"s3_uri": "s3://b/p/x", "k": 1}}],
        "outputs": [{"name": "y", "parameters": {"s3_uri": "s3://b/p/y"}}],
    }
    call = decode_infer_document(document)
    assert call.inputs[0].data is PENDING and call.inputs[0].parameters == {"s3_uri": "s3://b/p/x", "k": 1}
    assert mentions_references(call)
    assert str(extension_off(call)).startswith("input 'x' names an S3 location ('s3_uri'), but this server's")
    plain = decode_infer_document({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1.0]}]})
    assert not mentions_references(plain)


def _grpc_request(raw: list[bytes], reference: bool = True) -> object:
    request = service_pb2.ModelInferRequest(model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="INT32", shape=[1, 2])
        if reference and name == "INPUT0":
            tensor.parameters["shared_memory_region"].string_param = "s3://b/p/a"
            tensor.parameters["shared_memory_byte_size"].int64_param = 8
    request.raw_input_contents.extend(raw)
    return request


def test_grpc_inputs_in_s3_take_no_raw_contents_as_in_shared_memory() -> None:
    call = grpc_codec.decode_infer_request(_grpc_request([np.array([3, 4], np.int32).tobytes()]), 1 << 20)
    assert call.inputs[0].data is PENDING and call.inputs[1].data.tolist() == [[3, 4]]
    padded = grpc_codec.decode_infer_request(_grpc_request([b"", np.array([3, 4], np.int32).tobytes()]), 1 << 20)
    assert padded.inputs[0].data is PENDING
    with pytest.raises(InvalidInput, match="has its data twice"):
        grpc_codec.decode_infer_request(_grpc_request([b"\0" * 8, b"\0" * 8]), 1 << 20)
    with pytest.raises(InvalidInput, match="raw_input_contents has 1 entries for 2 inputs"):
        grpc_codec.decode_infer_request(_grpc_request([b"\0" * 8], reference=False), 1 << 20)


def _stored_result() -> InferResult:
    parameters = {"s3_uri": "s3://b/p/y", "s3_byte_size": 8}
    outputs = (
        Tensor("y", "FP32", (2,), STORED, parameters),
        Tensor("z", "FP32", (1,), np.array([1.5], np.float32)),
    )
    return InferResult("m", "1", outputs, "id")


def test_encoders_answer_a_stored_output_by_its_location() -> None:
    call = InferCall((), (RequestedOutput("y", True), RequestedOutput("z", True)))
    body, length = encode_infer_response(_stored_result(), call)
    assert length is not None and len(body) == length + 4  # z's four bytes only
    header = body[:length].decode()
    assert '"name":"y","datatype":"FP32","shape":[2],"parameters":{"s3_uri":"s3://b/p/y","s3_byte_size":8}}' in header
    response = grpc_codec.encode_infer_response(_stored_result(), service_pb2)
    assert list(response.raw_output_contents) == [b"", np.array([1.5], np.float32).tobytes()]
    assert response.outputs[0].parameters["s3_uri"].string_param == "s3://b/p/y"


def _client_error(code: str, headers: dict[str, str] | None = None) -> ClientError:
    metadata = {"HTTPStatusCode": 400, "HTTPHeaders": headers or {}}
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": metadata}, "HeadObject")


ACCESS = Access("input 'x'", "read", Location("bucket", "tensors/x"))
TABLE = [
    (_client_error("NoSuchKey"), InvalidInput, "input 'x': there is no object at s3://bucket/tensors/x"),
    (_client_error("404"), InvalidInput, "input 'x': there is no object at s3://bucket/tensors/x"),
    (_client_error("NoSuchBucket"), InvalidInput, "input 'x': there is no bucket 'bucket'"),
    (_client_error("403"), Forbidden, "input 'x': S3 denied this server access to read s3://bucket/tensors/x"),
    (
        _client_error("PermanentRedirect", {"x-amz-bucket-region": "eu-west-1"}),
        InvalidInput,
        "input 'x': bucket 'bucket' is in eu-west-1, which this server cannot reach through its S3 endpoint",
    ),
    (_client_error("AuthorizationHeaderMalformed"), InvalidInput, "bucket 'bucket' is in another region"),
    (_client_error("PreconditionFailed"), InvalidInput, "changed while it was read"),
    (_client_error("SlowDown"), StoreUnavailable, "input 'x': S3 could not read s3://bucket/tensors/x now (SlowDown)"),
    (_client_error("Teapot"), UpstreamError, "input 'x': S3 refused to read s3://bucket/tensors/x (Teapot)"),
    (EndpointConnectionError(endpoint_url="http://s3"), StoreUnavailable, "S3 could not be reached to read"),
    (NoCredentialsError(), StoreUnavailable, "has no AWS credentials"),
]


@pytest.mark.parametrize(("raised", "kind", "words"), TABLE, ids=[str(row[0])[:40] for row in TABLE])
def test_botocore_errors_become_ours_by_type(raised: Exception, kind: type[V2Error], words: str) -> None:
    with pytest.raises(kind) as caught, translated(ACCESS):
        raise raised
    assert words in caught.value.message
    assert "botocore" not in caught.value.message and "ClientError" not in caught.value.message


def test_s3_unavailable_is_retryable_and_denied_is_403() -> None:
    with pytest.raises(StoreUnavailable) as caught, translated(ACCESS):
        raise _client_error("503")
    assert (status_of(caught.value), caught.value.retry_after, caught.value.retryable) == (503, 1.0, True)
    assert (status_of(Forbidden("no")), GRPC_STATUS[Forbidden.code]) == (403, "PERMISSION_DENIED")
    with pytest.raises(KeyError), translated(ACCESS):
        raise KeyError("not botocore's: a bug, left as it is")
