"""The Lambda handler within the invocation's remaining time: ``handler.http.lambda_handler`` called with a context
whose remaining time is shorter than the model's run answers 504 ``{"error"}`` (the run stopped at the deadline,
OIP_DEADLINE_MARGIN_MS before the function's timeout) instead of running on until the platform kills it.

Each case runs in a process of its own: the handler wires its repository once per process (handler/runtime).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import lambda_process, onnx_models, overload_models
from tests.support.lambda_process import http_event


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model "slow" runs until it is stopped (``overload_models.forever``): no machine is too fast for it."""
    root = tmp_path_factory.mktemp("lambda_deadline")
    onnx_models.save(overload_models.forever(), root, "slow", config=overload_models.config("slow", 0))
    return root


def invoke(
    repository: Path,
    tmp_path: Path,
    timeout_ms: int,
    margin_ms: int,
    parameters: dict | None = None,
    path: str = "/v2/models/slow/infer",
    body: dict[str, Any] | None = None,
):
    """The answer to one request, in a process of its own, and the time the invocation had left when answered."""
    if body is None:
        body = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
    if parameters:
        body["parameters"] = parameters
    events = [http_event(body, path)]
    done = lambda_process.invoke(events, repository, tmp_path, timeout_ms, OIP_DEADLINE_MARGIN_MS=str(margin_ms))
    return {"answer": done.answers[0], "left_ms": done.left_ms[0]}


def test_a_run_longer_than_the_invocation_has_left_answers_504_before_the_timeout(repository: Path, tmp_path: Path):
    result = invoke(repository, tmp_path, timeout_ms=3000, margin_ms=1500)
    answer = result["answer"]
    assert answer["statusCode"] == 504, answer
    assert json.loads(answer["body"]) == {
        "error": "the request's deadline (the Lambda invocation's remaining time) passed before its answer was ready"
    }
    assert result["left_ms"] > 0  # answered while the invocation still had time: the platform never killed it


def test_an_invocation_with_no_time_left_past_the_margin_answers_504_at_once(repository: Path, tmp_path: Path):
    answer = invoke(repository, tmp_path, timeout_ms=400, margin_ms=500)["answer"]
    assert answer["statusCode"] == 504 and "Lambda invocation's remaining time" in json.loads(answer["body"])["error"]


def test_the_request_timeout_bounds_the_run_on_lambda_too(repository: Path, tmp_path: Path) -> None:
    answer = invoke(repository, tmp_path, timeout_ms=600_000, margin_ms=500, parameters={"timeout": 200_000})["answer"]
    assert answer["statusCode"] == 503
    assert json.loads(answer["body"]) == {"error": "Request timeout expired"}


def test_every_route_is_bounded_by_the_invocations_time(repository: Path, tmp_path: Path) -> None:
    """KServe V1's predict (as SageMaker's and Vertex's routes) runs within the same deadline as V2's infer."""
    v1 = {"instances": [[1.0]]}
    result = invoke(repository, tmp_path, timeout_ms=3000, margin_ms=1500, path="/v1/models/slow:predict", body=v1)
    assert result["answer"]["statusCode"] == 504, result["answer"]
    assert "Lambda invocation's remaining time" in json.loads(result["answer"]["body"])["error"]
    assert result["left_ms"] > 0
