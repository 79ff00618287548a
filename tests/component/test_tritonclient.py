"""``tritonclient`` working unchanged against a real uvicorn server on 127.0.0.1: JSON and binary, every datatype."""

# covers: handler/protocol/stateful_refusals.py

from __future__ import annotations

import anyio
import numpy as np
import pytest
import tritonclient.http as triton_http
import tritonclient.http.aio as triton_aio
from tritonclient.utils import InferenceServerException

from tests.conftest import LiveServer
from tests.support.samples import SAMPLES, STATEFUL_CALLS, TABLE_DATATYPES, as_bytes_array

CASES = [
    pytest.param(datatype, binary, id=f"{datatype}-{'binary' if binary else 'json'}")
    for datatype in TABLE_DATATYPES
    for binary in (True, False)
    if binary or datatype != "FP16"  # tritonclient itself refuses FP16 in JSON
]


@pytest.fixture(scope="module")
def triton(live_server: LiveServer) -> triton_http.InferenceServerClient:
    return triton_http.InferenceServerClient(live_server.url)


@pytest.mark.parametrize(("datatype", "binary"), CASES)
def test_every_datatype_round_trips(triton: triton_http.InferenceServerClient, datatype: str, binary: bool) -> None:
    _, array = SAMPLES[datatype]
    if datatype == "BYTES":
        array = as_bytes_array(array)
    item = triton_http.InferInput("INPUT0", list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=binary)
    output = triton_http.InferRequestedOutput("OUTPUT0", binary_data=binary)
    result = triton.infer(f"identity_{datatype.lower()}", [item], outputs=[output], request_id="rt")
    got = result.as_numpy("OUTPUT0")
    assert result.get_response()["id"] == "rt"
    if datatype == "BYTES":
        assert [v if isinstance(v, bytes) else v.encode() for v in got.ravel()] == list(array.ravel())
    else:
        assert got.dtype == array.dtype and np.array_equal(got, array)


@pytest.mark.parametrize("id_length", range(8))
def test_a_large_binary_tensor_round_trips_whatever_its_headers_length(
    triton: triton_http.InferenceServerClient, id_length: int
) -> None:
    """A body of 512 KiB reaches the app in several messages; the request id's length moves where the tensor bytes
    start (any offset, for FP64's 8 bytes an item) and they come back exact."""
    array = np.random.default_rng(id_length).random((256, 256))
    item = triton_http.InferInput("INPUT0", [256, 256], "FP64")
    item.set_data_from_numpy(array, binary_data=True)
    result = triton.infer("identity_fp64", [item], request_id="r" * id_length)
    assert np.array_equal(result.as_numpy("OUTPUT0"), array)


def test_default_outputs_come_back_binary(triton: triton_http.InferenceServerClient) -> None:
    # tritonclient sends binary_data_output=true when no outputs are named.
    inputs = []
    for name, value in (("INPUT0", np.arange(16, dtype=np.int32)), ("INPUT1", np.full(16, 2, np.int32))):
        item = triton_http.InferInput(name, [1, 16], "INT32")
        item.set_data_from_numpy(value.reshape(1, 16))
        inputs.append(item)
    result = triton.infer("simple", inputs)
    assert np.array_equal(result.as_numpy("OUTPUT0").ravel(), np.arange(16) + 2)
    assert np.array_equal(result.as_numpy("OUTPUT1").ravel(), np.arange(16) - 2)
    assert result.get_output("OUTPUT0")["parameters"]["binary_data_size"] == 64


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compression_both_ways(triton: triton_http.InferenceServerClient, algorithm: str) -> None:
    array = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    item = triton_http.InferInput("INPUT0", [4, 3], "FP32")
    item.set_data_from_numpy(array)
    result = triton.infer(
        "batched", [item], request_compression_algorithm=algorithm, response_compression_algorithm=algorithm
    )
    assert np.array_equal(result.as_numpy("OUTPUT0"), array)


def test_metadata_and_health(triton: triton_http.InferenceServerClient) -> None:
    assert triton.is_server_live()
    assert triton.is_model_ready("simple")
    assert triton.is_model_ready("versioned", "1")
    assert not triton.is_model_ready("corrupt")
    assert triton.get_model_metadata("versioned", "3")["versions"] == ["1", "3"]
    assert "binary_tensor_data" in triton.get_server_metadata()["extensions"]
    assert triton.get_model_config("batched")["max_batch_size"] == 4
    assert {"name": "simple", "version": "1", "state": "READY"} in triton.get_model_repository_index()


def test_errors_reach_the_client_with_status_and_message(triton: triton_http.InferenceServerClient) -> None:
    item = triton_http.InferInput("INPUT0", [1, 2], "FP64")
    item.set_data_from_numpy(np.zeros((1, 2)))
    with pytest.raises(InferenceServerException) as info:
        triton.infer("identity_fp32", [item])
    assert info.value.status() == "400"
    assert "has datatype FP64 but the model expects FP32" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        triton.infer("missing", [item])
    assert info.value.status() == "404"


def test_asyncio_client(live_server: LiveServer) -> None:
    async def run() -> np.ndarray:
        client = triton_aio.InferenceServerClient(live_server.url)
        try:
            item = triton_aio.InferInput("INPUT0", [2], "FP32")
            item.set_data_from_numpy(np.array([1.5, 2.5], np.float32))
            result = await client.infer("versioned", [item], model_version="1")
            return result.as_numpy("OUTPUT0")
        finally:
            await client.close()

    assert anyio.run(run).tolist() == [1.5, 2.5]


@pytest.mark.parametrize(("call", "arguments", "phrase"), STATEFUL_CALLS)
def test_triton_stateful_extensions_are_refused_with_a_reason(
    triton: triton_http.InferenceServerClient, call: str, arguments: tuple[object, ...], phrase: str
) -> None:
    """Triton's extensions that keep state between requests (model control, shared memory, trace and log
    settings) are not listed in the server metadata's extensions, and a client written for Triton that calls them
    is told why and what to do instead (501), not "no such endpoint"."""
    with pytest.raises(InferenceServerException) as info:
        getattr(triton, call)(*arguments)
    assert phrase in info.value.message()
    assert info.value.status() == "501"
    extensions = triton.get_server_metadata()["extensions"]
    assert not {"system_shared_memory", "cuda_shared_memory", "trace", "logging", "model_repository"} & set(extensions)
