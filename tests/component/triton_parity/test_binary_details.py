"""The details of Triton's binary tensor data extension that real clients hit, answered as tritonserver 2.51 answers
them (each sent to a real tritonserver and its answer copied): a raw binary request to a BYTES input whose shape is
not [1], and a raw binary request sent in chunks (``Transfer-Encoding: chunked``) to a batching model.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import orjson
import pytest

from tests.support.servers import OipServer

RAW = {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}


def _post(server: OipServer, model: str, content: bytes | Iterator[bytes]) -> httpx.Response:
    return httpx.post(f"{server.url}/v2/models/{model}/infer", content=content, headers=RAW, timeout=30)


@pytest.mark.parametrize("model", ["raw_strings", "simple_identity"])
def test_raw_bytes_to_an_input_not_of_shape_one_is_tritons_400(server: OipServer, model: str) -> None:
    """``raw_strings`` has dims [2], ``simple_identity`` [-1]: Triton refuses both, in these words."""
    answer = _post(server, model, b"hello")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "[request id: <id_unknown>] For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"
    }


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("model", ["image_classifier", "raw_string"])
def test_a_chunked_raw_request_to_a_batching_model_is_answered_as_its_unchunked_twin(server: OipServer, model: str):
    if model == "image_classifier":
        body = np.random.default_rng(3).random((3, 8, 8), dtype=np.float32).tobytes()
    else:
        body = "héllo, chunked".encode()
    whole = _post(server, model, body)
    chunked = _post(server, model, _chunks(body, 100))
    assert whole.status_code == chunked.status_code == 200, chunked.text
    assert chunked.headers["inference-header-content-length"] == whole.headers["inference-header-content-length"]
    length = int(whole.headers["inference-header-content-length"])
    header, twin = orjson.loads(chunked.content[:length]), orjson.loads(whole.content[:length])
    assert header["outputs"][0]["shape"][0] == 1  # batch 1, as Triton treats a raw request to a batching model
    assert {**header, "id": ""} == {**twin, "id": ""}  # answers to requests without an id get ids of their own
    assert chunked.content[length:] == whole.content[length:]
