"""The inference corpus (tests/support/infer_corpus.py: JSON and binary, every datatype, compressed, raw, and
every kind of error) against two oracles:

- onnxruntime, run directly on the model file with the inputs read from the request by a decoder of this test's
  own (numpy, the spec's JSON and binary layouts), the answer read by tritonclient's ``InferResult``; a request
  that decoder, onnxruntime or the protocol's rules refuse must be refused with the spec's error object;
- the answers recorded in tests/data/infer_answers.json, byte for byte: the request path may get faster, never
  different without the corpus being re-recorded on purpose.
"""

from __future__ import annotations

import gzip
import json
import re
import struct
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as triton_http
from fastapi.testclient import TestClient

from tests.support.infer_corpus import ANSWERS, LIMITS, answer, requests

CORPUS = requests()
RECORDED = json.loads(ANSWERS.read_text())
NUMPY = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
    "FP32": np.float32, "FP64": np.float64,
}  # fmt: skip
PATH = re.compile(r"^/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?/infer$")
#: RFC 9110 15.5.16: a content type or coding the server does not support is 415; 15.5.14: too large, 413.
MEDIA_TYPES = {"application/json", "application/octet-stream"}
CODINGS = {"gzip", "deflate", "identity"}


class Refused(Exception):
    """The request breaks a rule of the protocol, of this decoder or of the model; ``status`` when HTTP says it."""

    def __init__(self, why: str, status: int | None = None) -> None:
        super().__init__(why)
        self.status = status


def _tensor(spec: dict[str, Any], binary: bytes | None) -> np.ndarray:
    """One input as the spec lays it out: ``data`` in row-major order, or ``binary_data_size`` bytes."""
    datatype, shape = spec["datatype"], spec["shape"]
    if datatype != "BYTES" and datatype not in NUMPY:
        raise Refused(f"datatype {datatype}")
    size = int(np.prod(shape, dtype=np.int64))
    if size * (np.dtype(NUMPY[datatype]).itemsize if datatype in NUMPY else 1) > LIMITS["max_tensor_bytes"]:
        raise Refused("tensor over the server's limit", 413)
    if binary is not None and datatype == "BYTES":
        items, offset = [], 0
        while offset < len(binary):
            (length,) = struct.unpack_from("<I", binary, offset)
            items.append(binary[offset + 4 : offset + 4 + length])
            offset += 4 + length
        array = np.array(items, dtype=object)
    elif binary is not None:
        array = np.frombuffer(binary, dtype=NUMPY[datatype])
    elif datatype == "BYTES":
        array = np.array([item.encode() for item in spec["data"]], dtype=object)
    else:
        try:
            array = np.array(spec["data"], dtype=NUMPY[datatype])
        except (ValueError, OverflowError, TypeError) as exc:
            raise Refused(str(exc)) from None
    if array.size != size:
        raise Refused("element count")
    return array.reshape(shape)


def _decode(request: dict[str, Any]) -> tuple[str, str | None, dict[str, np.ndarray], list[str] | None]:
    """(model, version, feeds, outputs asked for) of one corpus request."""
    headers, body = request["headers"], request["body"]
    if headers.get("content-type", "application/octet-stream") not in MEDIA_TYPES:
        raise Refused("content type", 415)
    if headers.get("content-encoding", "identity") not in CODINGS:
        raise Refused("content coding", 415)
    if headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    found = PATH.match(request["path"])
    assert found, request["path"]
    name, version = found["name"], found["version"]
    length = headers.get("inference-header-content-length")
    if length is not None and (not length.isdigit() or int(length) > len(body)):
        raise Refused("Inference-Header-Content-Length")
    if length == "0":  # Triton's raw binary request: the whole body is the model's one input, one element
        return name, version, {"": np.array([body], dtype=object)}, None
    head, rest = (body[: int(length)], body[int(length) :]) if length else (body, b"")
    try:
        document = json.loads(head)
    except ValueError:
        raise Refused("not JSON") from None
    if not isinstance(document, dict) or not document.get("inputs"):
        raise Refused("no inputs")
    feeds, offset = {}, 0
    for spec in document["inputs"]:
        size = spec.get("parameters", {}).get("binary_data_size")
        feeds[spec["name"]] = _tensor(spec, rest[offset : offset + size] if size is not None else None)
        offset += size or 0
    outputs = [output["name"] for output in document.get("outputs", [])] or None
    if outputs and len(set(outputs)) != len(outputs):
        raise Refused("an output asked for twice")
    return name, version, feeds, outputs


def _decode_head(request: dict[str, Any]) -> Any:
    """The JSON head of a request (after gzip, before its binary part)."""
    body = request["body"]
    if request["headers"].get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    length = request["headers"].get("inference-header-content-length")
    if length == "0":  # a raw binary request has no head
        return None
    return json.loads(body[: int(length)] if length else body)


@cache
def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _expected(repository: Path, request: dict[str, Any]) -> tuple[str, str, dict[str, np.ndarray]]:
    """(model, version, outputs by name) that onnxruntime computes for the request; Refused if it is not one."""
    name, version, feeds, outputs = _decode(request)
    versions = sorted(int(p.name) for p in (repository / name).glob("[0-9]*")) if (repository / name).is_dir() else []
    version = version or (str(versions[-1]) if versions else None)
    if version is None or not (repository / name / version / "model.onnx").is_file():
        raise Refused("no such model version")
    session = _session(repository / name / version / "model.onnx")
    if list(feeds) == [""]:  # raw: Triton takes a BYTES body only for an input of shape [1]
        (only,) = session.get_inputs()
        if only.shape != [1]:
            raise Refused("a raw BYTES body for an input whose shape is not [1]")
        feeds = {only.name: feeds[""]}
    wanted = outputs or [output.name for output in session.get_outputs()]
    runnable = {key: _strings(value) if value.dtype == object else value for key, value in feeds.items()}
    try:
        arrays = session.run(wanted, runnable)
    except Exception as exc:  # onnxruntime's own refusal: wrong name, type or rank
        raise Refused(str(exc)) from None
    return name, version, dict(zip(wanted, arrays, strict=True))


def _strings(array: np.ndarray) -> np.ndarray:
    """BYTES elements as onnxruntime's string tensors take them."""
    return np.array([item.decode() for item in array.ravel()], dtype=object).reshape(array.shape)


def _answered(content: bytes, headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The answer as tritonclient reads it: its JSON head and each output as a numpy array."""
    length = headers.get("inference-header-content-length")
    result = triton_http.InferResult.from_response_body(content, header_length=int(length) if length else None)
    head = result.get_response()
    return head, {output["name"]: result.as_numpy(output["name"]) for output in head["outputs"]}


def _utf8(array: np.ndarray) -> list[bytes]:
    return [item.encode() if isinstance(item, str) else item for item in array.ravel()]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if want.dtype.kind in "OU":  # strings (onnxruntime's, and tritonclient's from JSON) or bytes (binary)
        return got.shape == want.shape and _utf8(got) == _utf8(want)
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=lambda i: f"{i}-{CORPUS[i]['path'].split('/')[3]}")
def test_answer_is_what_onnxruntime_computes_or_the_specs_error(
    client: TestClient, test_repository: Path, index: int
) -> None:
    request: dict[str, Any] = CORPUS[index]
    response = client.post(request["path"], content=request["body"], headers=request["headers"])
    try:
        name, version, want = _expected(test_repository, request)
    except Refused as refused:
        # "A failed inference request must be indicated by an HTTP error status (typically 400). The HTTP body
        # must contain the $inference_error_response object." (open-inference-protocol-rest.md)
        assert 400 <= response.status_code < 500, (refused, response.status_code, response.text)
        assert refused.status in (None, response.status_code), (refused, response.status_code)
        error = response.json()
        assert list(error) == ["error"] and isinstance(error["error"], str) and error["error"], error
        return
    assert response.status_code == 200, response.text
    head, got = _answered(response.content, dict(response.headers))
    assert (head["model_name"], head["model_version"]) == (name, version)
    sent = _decode_head(request)
    if isinstance(sent, dict) and "id" in sent:
        assert head["id"] == sent["id"]
    assert sorted(got) == sorted(want)
    for output, array in want.items():
        assert _same(got[output], array), (output, got[output], array)


def test_the_corpus_and_its_answers_match() -> None:
    assert len(CORPUS) == len(RECORDED), "re-record: python -m tests.support.infer_corpus"


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=lambda i: f"{i}-{CORPUS[i]['path'].split('/')[3]}")
def test_answer_is_byte_identical_to_the_recorded_one(client: TestClient, index: int) -> None:
    request: dict[str, Any] = CORPUS[index]
    response = client.post(request["path"], content=request["body"], headers=request["headers"])
    assert answer(response.status_code, dict(response.headers), response.content) == RECORDED[index]
