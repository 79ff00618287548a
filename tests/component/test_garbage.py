"""Random garbage through the whole app never yields a 500: every bad request is the 4xx its input calls for, with
an error message: 400, or 413 for a document that declares a tensor over the tensor limit; 200 only for what is a
request after all (raw binary, ``Inference-Header-Content-Length: 0``, to a model of one input; a matching document).
"""

from __future__ import annotations

import math

import orjson
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_codec_properties import json_values, request_inputs

MODELS = ["simple", "identity_fp32", "identity_bytes", "batched", "versioned/versions/1"]
settings_ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: The tensor limit of the app these tests drive (the ``client`` fixture of tests/conftest.py: 1 MiB).
TENSOR_LIMIT = 1024 * 1024


def _check(response, allowed: set[int]) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code in allowed, (allowed, response.status_code, response.text)
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


def _declares_over_limit(document: dict) -> bool:
    """Whether an input's shape alone, at 8 bytes an element (the widest), would be over ``TENSOR_LIMIT``."""
    shapes = [item["shape"] for item in document["inputs"]]
    return any(all(d >= 0 for d in shape) and math.prod(shape) * 8 > TENSOR_LIMIT for shape in shapes)


@given(st.sampled_from(MODELS), st.binary(max_size=200), st.sampled_from([None, "0", "5", "-1", "x", "100000"]))
@settings_
def test_random_bodies(client: TestClient, model: str, body: bytes, header: str | None) -> None:
    headers = {"Inference-Header-Content-Length": header} if header is not None else {}
    _check(
        client.post(f"/v2/models/{model}/infer", content=body, headers=headers), {200, 400} if header == "0" else {400}
    )


@given(
    st.sampled_from(MODELS),
    st.fixed_dictionaries({"inputs": st.lists(request_inputs, max_size=2)}, optional={"outputs": json_values}),
)
@settings_
def test_random_requests(client: TestClient, model: str, document: dict) -> None:
    allowed = {200, 400, 413} if _declares_over_limit(document) else {200, 400}
    _check(client.post(f"/v2/models/{model}/infer", content=orjson.dumps(document)), allowed)
