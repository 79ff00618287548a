"""Byte counts a client writes in a header (Content-Length, Inference-Header-Content-Length): a number of any
length, or digits that are not ASCII, is refused with its own 400 or 413 ``{"error"}``, never read into an int
that Python refuses ("Exceeds the limit (4300 digits) for integer string conversion", a 500)."""

# covers: handler/rest/body.py handler/rest/inference.py handler/rest/triton_passthrough.py

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from handler.cli.lambda_context import LocalLambdaContext
from handler.rest.triton_passthrough import as_is

EVENT = Path(__file__).resolve().parents[2] / "events" / "http-api" / "infer-json.json"
#: Past what ``int`` reads from a string (4,300 digits), within what a request's head may hold.
LONG = "9" * 4400
BODY = orjson.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}]})


@pytest.mark.parametrize("digits", [19, len(LONG)])
def test_a_json_header_length_of_too_many_digits_is_400(client: TestClient, digits: int) -> None:
    headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": "9" * digits}
    answer = client.post("/v2/models/identity_fp32/infer", content=BODY, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": f"Inference-Header-Content-Length of {digits} digits is larger than any body"}


def test_a_json_header_length_in_other_digits_is_400(client: TestClient) -> None:
    """'²' is a digit to ``str.isdigit`` and not a number to ``int``."""
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": "\u00b2".encode("latin-1"),
    }
    answer = client.post("/v2/models/identity_fp32/infer", content=BODY, headers=headers)
    assert answer.status_code == 400, answer.text
    assert "is not an integer" in answer.json()["error"]


def _lambda(headers: dict[str, str]) -> dict[str, Any]:
    from handler.http import lambda_handler

    event = json.loads(EVENT.read_text())
    event["headers"] |= headers
    return lambda_handler(event, LocalLambdaContext())  # type: ignore[no-any-return]


@pytest.mark.parametrize("digits", [19, len(LONG)])
def test_a_lambda_event_declaring_a_content_length_of_too_many_digits_is_413(digits: int) -> None:
    answer = _lambda({"content-length": "9" * digits})
    assert answer["statusCode"] == 413, answer
    error = json.loads(answer["body"])["error"]
    assert error.startswith(f"request body of a {digits}-digit number of bytes is over the limit") and (
        "OIP_MAX_BODY_BYTES" in error
    )


def test_a_lambda_event_declaring_a_content_length_in_other_digits_is_read_as_undeclared() -> None:
    answer = _lambda({"content-length": "\u00b2"})
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["model_name"] == "iris"


def test_a_lambda_event_with_a_json_header_length_of_too_many_digits_is_400() -> None:
    answer = _lambda({"content-type": "application/octet-stream", "inference-header-content-length": LONG})
    assert answer["statusCode"] == 400, answer
    assert json.loads(answer["body"]) == {
        "error": f"Inference-Header-Content-Length of {len(LONG)} digits is larger than any body"
    }


@pytest.mark.parametrize("declared", [LONG, "\u00b2", "19"])
def test_a_request_to_pass_through_with_a_length_it_cannot_read_takes_the_decoding_path(declared: str) -> None:
    """The decoding path then answers the request's own error (above); "19" is longer than the body."""
    headers = {"content-type": "application/octet-stream", "inference-header-content-length": declared}
    assert as_is(headers, b'{"inputs":[]}') is None
