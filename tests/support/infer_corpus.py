"""A corpus of inference requests (JSON and binary, every datatype, compressed, raw, and every kind of error)
and the answers the server gave to them, kept in tests/data/infer_answers.json so that work on the request path
proves it changes no byte of any answer.

    python -m tests.support.infer_corpus     # re-record, after a change to the answers that is meant
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

_GENERATED_ID = re.compile(rb'^\{"id":"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"')
ANSWERS = Path(__file__).resolve().parents[1] / "data" / "infer_answers.json"
#: The limits of the ``app`` fixture (tests/conftest.py), so that the 413 answers match.
LIMITS = {"max_body_bytes": 1024 * 1024, "max_tensor_bytes": 1024 * 1024}
#: Answers uncompressed unless a request asks otherwise (HTTP clients ask for gzip by default).
IDENTITY = {"accept-encoding": "identity"}
#: The response headers an answer is compared on (the date and server headers change by themselves).
HEADERS = ("content-type", "content-length", "inference-header-content-length", "content-encoding", "retry-after")

_VALUES: dict[str, list[Any]] = {
    "BOOL": [True, False, True, True],
    "UINT8": [0, 1, 254, 255],
    "UINT16": [0, 1, 65534, 65535],
    "UINT32": [0, 1, 2**32 - 2, 2**32 - 1],
    "UINT64": [0, 1, 2**64 - 2, 2**64 - 1],
    "INT8": [-128, -1, 0, 127],
    "INT16": [-32768, -1, 0, 32767],
    "INT32": [-(2**31), -1, 0, 2**31 - 1],
    "INT64": [-(2**63), -1, 0, 2**63 - 1],
    "FP16": [-1.5, 0.0, 0.25, 65504.0],
    "FP32": [-1.5, 0.0, 0.1, 3.4e38],
    "FP64": [-1.5, 0.0, 0.1, 1e300],
    "BYTES": ["a", "", "héllo", "☃"],
}
_DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


def _binary(datatype: str, values: list[Any]) -> bytes:
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(v.encode())) + v.encode() for v in values)
    return np.asarray(values, dtype=_DTYPES[datatype]).tobytes()


def _json_request(path: str, document: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return {"path": path, "headers": {**IDENTITY, "content-type": "application/json", **(headers or {})}, "body": body}


def _binary_request(path: str, header: dict[str, Any], data: bytes, **headers: str) -> dict[str, Any]:
    head = json.dumps(header).encode()
    return {
        "path": path,
        "headers": {
            **IDENTITY,
            "content-type": "application/octet-stream",
            "inference-header-content-length": str(len(head)),
            **headers,
        },
        "body": head + data,
    }


def _one(name: str, shape: list[int], datatype: str, data: list[Any]) -> dict[str, Any]:
    return {"id": "error", "inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}


def requests() -> list[dict[str, Any]]:
    """Every request of the corpus: path, headers and body bytes."""
    corpus = []
    for datatype, values in _VALUES.items():
        model = f"/v2/models/identity_{datatype.lower()}/infer"
        tensor = {"name": "INPUT0", "shape": [2, 2], "datatype": datatype}
        corpus.append(_json_request(model, {"id": f"json-{datatype}", "inputs": [{**tensor, "data": values}]}))
        corpus.append(
            _binary_request(
                model,
                {
                    "id": f"bin-{datatype}",
                    "inputs": [{**tensor, "parameters": {"binary_data_size": len(_binary(datatype, values))}}],
                    "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
                },
                _binary(datatype, values),
            )
        )
        corpus.append(
            _json_request(
                model,
                {
                    "id": f"bin-out-{datatype}",
                    "inputs": [{**tensor, "data": values}],
                    "parameters": {"binary_data_output": True},
                },
            )
        )
    simple = {
        "id": "simple",
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
        ],
    }
    corpus.append(_json_request("/v2/models/simple/infer", simple))
    corpus.append(_json_request("/v2/models/simple/versions/1/infer", simple))
    corpus.append(
        _json_request(
            "/v2/models/versioned/versions/3/infer",
            {"id": "v3", "inputs": [{"name": "INPUT0", "shape": [3], "datatype": "FP32", "data": [1, 2, 3]}]},
        )
    )
    corpus.append(
        {
            **_json_request("/v2/models/simple/infer", gzip.compress(json.dumps(simple).encode(), mtime=0)),
            "headers": {**IDENTITY, "content-type": "application/json", "content-encoding": "gzip"},
        }
    )
    corpus.append(_json_request("/v2/models/simple/infer", simple, {"accept-encoding": "gzip"}))
    corpus.append(
        {
            "path": "/v2/models/raw_bytes/infer",
            "headers": {**IDENTITY, "inference-header-content-length": "0"},
            "body": b"raw!",
        }
    )
    fp32 = "/v2/models/identity_fp32/infer"
    errors: list[tuple[str, bytes | dict[str, Any], dict[str, str]]] = [
        ("/v2/models/nope/infer", _one("INPUT0", [1], "FP32", [1]), {}),
        ("/v2/models/simple/versions/9/infer", simple, {}),
        ("/v2/models/simple/infer", b"{not json", {}),
        ("/v2/models/simple/infer", b"[1, 2]", {}),
        ("/v2/models/simple/infer", {"inputs": []}, {}),
        ("/v2/models/simple/infer", _one("INPUT0", [1, 16], "INT32", [1]), {}),
        ("/v2/models/simple/infer", _one("INPUT0", [1, 16], "NOPE", [1] * 16), {}),
        ("/v2/models/identity_int8/infer", _one("INPUT0", [1, 1], "INT8", [300]), {}),
        (fp32, _one("INPUT0", [1, 1], "FP32", ["x"]), {}),
        (fp32, _one("WRONG", [1, 1], "FP32", [1.0]), {}),
        (fp32, _one("INPUT0", [1, 1], "FP64", [1.0]), {}),
        (fp32, _one("INPUT0", [1] * 33, "FP32", [1.0]), {}),
        (fp32, {**_one("INPUT0", [1, 1], "FP32", [1.0]), "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT0"}]}, {}),
        (fp32, _one("INPUT0", [1, 1], "FP32", [1.0]), {"content-type": "text/plain"}),
        (fp32, _one("INPUT0", [1, 1], "FP32", [1.0]), {"content-encoding": "br"}),
        (fp32, _one("INPUT0", [1, 1], "FP32", [1.0]), {"inference-header-content-length": "x"}),
        (fp32, _one("INPUT0", [1, 1], "FP32", [1.0]), {"inference-header-content-length": "100000"}),
        (fp32, _one("INPUT0", [100000, 100000], "FP32", [1.0]), {}),
    ]
    corpus += [_json_request(path, document, headers) for path, document, headers in errors]
    return corpus


def answer(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """What is compared of one answer (a generated request id is masked: it is new every time)."""
    body = _GENERATED_ID.sub(b'{"id":"<generated>"', body)
    kept = {name: headers[name] for name in HEADERS if name in headers}
    return {"status": status, "headers": kept, "body": base64.b64encode(body).decode()}


def record() -> None:
    """Answer the corpus with the app over the test repository and write tests/data/infer_answers.json."""
    import tempfile

    from fastapi.testclient import TestClient

    from handler.server import build_app
    from tests.conftest import build_test_repository, make_settings

    with (
        tempfile.TemporaryDirectory() as scratch,
        TestClient(build_app(make_settings(build_test_repository(Path(scratch)), **LIMITS))) as client,
    ):
        answers = []
        for request in requests():
            response = client.post(request["path"], content=request["body"], headers=request["headers"])
            answers.append(answer(response.status_code, dict(response.headers), response.content))
    ANSWERS.write_text(json.dumps(answers, indent=1) + "\n")
    print(f"{len(answers)} answers -> {ANSWERS}")


if __name__ == "__main__":
    record()
