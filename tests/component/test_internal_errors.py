"""A bug in a backend answers 500 with a generic message: no traceback or internals in the body."""

# covers: handler/protocol/unexpected.py
# covers: handler/rest/errors.py

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient

from adapters.repository.repository import ModelRepository
from handler.protocol.dataplane import DataPlane
from handler.rest.app import create_app
from tests.support import onnx_models
from tests.support.buggy_backend import BuggyBackend


def test_unexpected_exception_is_a_generic_500(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    onnx_models.save(onnx_models.identity("FP32", [1]), tmp_path, "buggy")
    app = create_app(DataPlane(ModelRepository(tmp_path, BuggyBackend)))
    with TestClient(app, raise_server_exceptions=False) as client:
        body = orjson.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]})
        response = client.post("/v2/models/buggy/infer", content=body)
    assert response.status_code == 500
    found = re.fullmatch(
        r"internal server error \(error id ([0-9a-f]{16})\); the server log has the details", response.json()["error"]
    )
    assert found is not None, response.text
    assert "secret" not in response.text
    (record,) = [r for r in caplog.records if found[1] in r.getMessage()]  # the log has the details under that id
    assert record.exc_info is not None and "secret internal detail" in str(record.exc_info[1])
