"""What Triton's example clients (triton-inference-server/client, ``src/python/examples``) check of a server, checked
here with the same calls over both transports, sync and asyncio.

Run unchanged against ``oip serve`` over this repository, the stateless examples pass: simple_{http,grpc}_infer_client,
their async and aio variants, simple_{http,grpc}_string_infer_client, grpc_explicit_{int,int8,byte}_content_client,
simple_grpc_custom_args_client, simple_grpc_keepalive_client, image_client.py and grpc_image_client.py (on
models/tiny_image), and simple_{http,grpc}_health_metadata with ``OIP_SERVER_NAME=triton`` (they require the name
"triton"). Those that need server state (model control, shared memory, sequences) or decoupled models do not
(docs/protocol.md, "Triton's own clients and examples").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.grpc.aio as triton_grpc_aio
import tritonclient.http as triton_http
import tritonclient.http.aio as triton_http_aio
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.support.servers import OipServer

#: simple_http_infer_client.py: ``if not (ex.message().startswith("Request for unknown model"))``.
UNKNOWN_MODEL = "Request for unknown model"


def _simple_inputs(module: Any) -> list[Any]:
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    for item in inputs:
        item.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    return inputs


def _raised(call: Callable[[], Any]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


def test_an_unknown_model_is_named_as_triton_names_it(server: OipServer) -> None:
    """The examples send "wrong_model_name" to infer and to model metadata and look for Triton's phrase."""
    rest, over_grpc = triton_http.InferenceServerClient(server.address), triton_grpc.InferenceServerClient(server.grpc)
    errors = [
        _raised(lambda: rest.infer("wrong_model_name", _simple_inputs(triton_http))),
        _raised(lambda: over_grpc.infer("wrong_model_name", _simple_inputs(triton_grpc))),
        _raised(lambda: rest.get_model_metadata("wrong_model_name")),
        _raised(lambda: over_grpc.get_model_metadata("wrong_model_name")),
    ]
    assert all(error.message().startswith(UNKNOWN_MODEL + ": 'wrong_model_name' is not found") for error in errors)
    assert [error.status() for error in errors] == ["404", "StatusCode.NOT_FOUND"] * 2
    version = _raised(lambda: rest.get_model_metadata("simple", model_version="7"))
    assert version.message().startswith(UNKNOWN_MODEL + ": 'simple' version 7 is not found; available versions: 1")


def test_an_unknown_model_is_named_as_triton_names_it_to_the_asyncio_clients(server: OipServer) -> None:
    """simple_http_aio_infer_client.py and simple_grpc_aio_infer_client.py make the same check."""

    async def messages() -> list[str]:
        rest = triton_http_aio.InferenceServerClient(server.address)
        over_grpc = triton_grpc_aio.InferenceServerClient(server.grpc)
        found = []
        try:
            for client, module in ((rest, triton_http_aio), (over_grpc, triton_grpc_aio)):
                try:
                    await client.infer("wrong_model_name", _simple_inputs(module))
                except InferenceServerException as error:
                    found.append(error.message())
        finally:
            await rest.close()
            await over_grpc.close()
        return found

    found = anyio.run(messages)
    assert len(found) == 2 and all(message.startswith(UNKNOWN_MODEL) for message in found)


# simple_http_string_infer_client.py: strings holding a NUL ("he\x00llo") and 4-byte blobs b"\x00\x01\x02\x03"
# (dtype np.bytes_) through ``simple_identity``, as binary data and as JSON.
IDENTITY_CASES = {
    "nul": np.array([b"he\x00llo"] * 16, dtype=np.object_).reshape(1, 16),
    "blobs": np.array([b"\x00\x01\x02\x03"] * 16, dtype=np.bytes_).reshape(1, 16),
}


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("case", IDENTITY_CASES)
def test_bytes_with_nul_characters_come_back_unchanged(server: OipServer, case: str, binary: bool) -> None:
    """The example's check: the same bytes back; over JSON, tritonclient hands BYTES back as ``str``."""
    array = IDENTITY_CASES[case]
    sent = array.astype(np.object_)
    expected = sent if binary else np.vectorize(bytes.decode, otypes=[np.object_])(sent)
    rest, over_grpc = triton_http.InferenceServerClient(server.address), triton_grpc.InferenceServerClient(server.grpc)
    rest_input = triton_http.InferInput("INPUT0", list(array.shape), "BYTES")
    rest_input.set_data_from_numpy(array, binary_data=binary)
    rest_output = triton_http.InferRequestedOutput("OUTPUT0", binary_data=binary)
    over_rest = rest.infer("simple_identity", [rest_input], outputs=[rest_output]).as_numpy("OUTPUT0")
    grpc_input = triton_grpc.InferInput("INPUT0", list(array.shape), "BYTES")
    grpc_input.set_data_from_numpy(array)
    over_grpc_result = over_grpc.infer("simple_identity", [grpc_input]).as_numpy("OUTPUT0")
    assert np.array_equal(over_rest, expected) and np.array_equal(over_grpc_result, sent)


def test_int8_sent_as_explicit_int_contents(server: OipServer) -> None:
    """grpc_explicit_int8_content_client.py fills INT8 inputs through ``contents.int_contents`` with the raw stub
    and reads both outputs from ``raw_output_contents`` as int8."""
    request = service_pb2.ModelInferRequest(model_name="simple_int8", model_version="")
    for name, values in (("INPUT0", list(range(16))), ("INPUT1", [1] * 16)):
        tensor = request.inputs.add(name=name, datatype="INT8", shape=[1, 16])
        tensor.contents.int_contents[:] = values
    request.outputs.add(name="OUTPUT0")
    request.outputs.add(name="OUTPUT1")
    with grpc.insecure_channel(server.grpc) as channel:
        response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    sums, differences = (np.frombuffer(raw, dtype=np.int8) for raw in response.raw_output_contents)
    assert sums.tolist() == [i + 1 for i in range(16)] and differences.tolist() == [i - 1 for i in range(16)]
    assert [list(output.shape) for output in response.outputs] == [[1, 16], [1, 16]]
