"""Random garbage through the whole app never yields a 500: every bad request is a 4xx with an error message."""

from __future__ import annotations

import orjson
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_codec_properties import json_values, request_inputs

MODELS = ["simple", "identity_fp32", "identity_bytes", "batched", "versioned/versions/1"]
settings_ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert isinstance(response.json()["error"], str)


@given(st.sampled_from(MODELS), st.binary(max_size=200), st.sampled_from([None, "0", "5", "-1", "x", "100000"]))
@settings_
def test_random_bodies(client: TestClient, model: str, body: bytes, header: str | None) -> None:
    headers = {"Inference-Header-Content-Length": header} if header is not None else {}
    _check(client.post(f"/v2/models/{model}/infer", content=body, headers=headers))


@given(
    st.sampled_from(MODELS),
    st.fixed_dictionaries({"inputs": st.lists(request_inputs, max_size=2)}, optional={"outputs": json_values}),
)
@settings_
def test_random_requests(client: TestClient, model: str, document: dict) -> None:
    _check(client.post(f"/v2/models/{model}/infer", content=orjson.dumps(document)))
