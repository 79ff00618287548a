"""The CodeDeploy traffic hook (handler/rollout/hook.py) against the real app behind the real Lambda handler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from mangum import Mangum

from handler.cli.lambda_context import LocalLambdaContext
from handler.rollout import hook
from handler.server import build_app
from tests.conftest import make_settings
from tests.support import onnx_models
from tests.support.codedeploy_hook import HOOK_EVENT, expect_report


def real_lambda(event: dict[str, Any]) -> dict[str, Any]:
    from handler.http import lambda_handler  # the demo repository, as the function ships it

    return lambda_handler(event, LocalLambdaContext())


def test_the_demo_checks_pass_on_the_shipped_function() -> None:
    assert hook.run_checks(real_lambda, hook.DEMO_CHECKS) == []


def test_events_are_what_the_http_api_sends() -> None:
    shipped = json.loads((Path(__file__).resolve().parents[2] / "events/http-api/infer-json.json").read_text())
    event = hook.http_event("POST", "/v1/models/iris:predict", {"instances": []})
    assert event["version"] == shipped["version"] == "2.0"
    assert set(event["requestContext"]["http"]) <= set(shipped["requestContext"]["http"])


@pytest.fixture(scope="module")
def wrong_iris(tmp_path_factory: pytest.TempPathFactory) -> Mangum:
    """A version that serves 'iris' but answers wrongly: an identity model under iris's tensor names."""
    root = tmp_path_factory.mktemp("wrong")
    model = onnx_models.identity("FP32", [-1, 4])
    model.graph.input[0].name = model.graph.node[0].input[0] = "input"
    model.graph.output[0].name = model.graph.node[0].output[0] = "label"
    onnx_models.save(model, root, "iris")
    return Mangum(build_app(make_settings(root)), lifespan="off")


def test_a_version_with_wrong_answers_fails_the_checks(wrong_iris: Mangum) -> None:
    failures = hook.run_checks(lambda event: wrong_iris(event, LocalLambdaContext()), hook.DEMO_CHECKS)
    assert len(failures) == 2
    assert failures[0].startswith("iris V2 infer: outputs.0.data is [5.1")
    assert "iris V1 predict" in failures[1]


def test_a_version_missing_the_model_fails_with_the_status(tmp_path: Path) -> None:
    onnx_models.save(onnx_models.identity("FP32"), tmp_path, "other")
    app = Mangum(build_app(make_settings(tmp_path)), lifespan="off")
    failures = hook.run_checks(lambda event: app(event, LocalLambdaContext()), hook.DEMO_CHECKS)
    assert [f.split(":")[0] for f in failures] == ["iris V2 infer", "iris V1 predict"]
    assert "status 404" in failures[0]


def test_an_invoke_that_raises_is_a_failure_not_a_stuck_deployment() -> None:
    def broken(event: dict[str, Any]) -> dict[str, Any]:
        raise TimeoutError("read timed out")

    assert hook.run_checks(broken, [{"name": "x", "path": "/v2"}]) == ["x: TimeoutError: read timed out"]


def test_checks_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = [{"name": "meta", "path": "/v2", "expect": {"name": "oip-serverless"}}]
    monkeypatch.setenv("OIP_ROLLOUT_CHECKS", json.dumps(checks))
    assert hook.run_checks(real_lambda) == []
    monkeypatch.setenv("OIP_ROLLOUT_CHECKS", json.dumps([{**checks[0], "expect": {"name": "triton"}}]))
    assert hook.run_checks(real_lambda) == ["meta: name is 'oip-serverless', expected 'triton'"]
    monkeypatch.setenv("OIP_ROLLOUT_CHECKS", "[]")  # RolloutHooks=false
    assert hook.run_checks(real_lambda) == []


@pytest.fixture
def codedeploy(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber]]:
    """A real boto3 CodeDeploy client whose calls botocore's Stubber checks against the service model."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("codedeploy", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_a_version_that_answers_right_is_reported_succeeded(codedeploy: tuple[Any, Stubber]) -> None:
    client, stubber = codedeploy
    expect_report(stubber, "Succeeded")
    assert hook.check_and_report(HOOK_EVENT, real_lambda, client) == {"status": "Succeeded", "failures": []}


def test_a_version_that_answers_wrong_is_reported_failed(wrong_iris: Mangum, codedeploy: tuple[Any, Stubber]) -> None:
    client, stubber = codedeploy
    expect_report(stubber, "Failed")
    outcome = hook.check_and_report(HOOK_EVENT, lambda event: wrong_iris(event, LocalLambdaContext()), client)
    assert outcome["status"] == "Failed" and len(outcome["failures"]) == 2


def test_checks_that_cannot_run_are_reported_failed(
    monkeypatch: pytest.MonkeyPatch, codedeploy: tuple[Any, Stubber]
) -> None:
    """A malformed OIP_ROLLOUT_CHECKS raises before any check runs: the hook still reports, as Failed."""
    client, stubber = codedeploy
    monkeypatch.setenv("OIP_ROLLOUT_CHECKS", "[{not json")
    expect_report(stubber, "Failed")
    outcome = hook.check_and_report(HOOK_EVENT, real_lambda, client)
    assert outcome["status"] == "Failed"
    assert outcome["failures"][0].startswith("the checks could not run: JSONDecodeError")


def test_an_invoke_refused_by_lambda_is_reported_failed(codedeploy: tuple[Any, Stubber]) -> None:
    """The real Lambda client's error (here the Stubber's, checked against the Invoke API) fails each check."""
    client, stubber = codedeploy
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    target = "arn:aws:lambda:us-east-1:123456789012:function:oip:7"
    with Stubber(lambda_client) as lambda_stub:
        for _ in hook.DEMO_CHECKS:
            lambda_stub.add_client_error("invoke", "ResourceNotFoundException", "Function not found",
                                         expected_params={"FunctionName": target, "Payload": ANY})  # fmt: skip
        expect_report(stubber, "Failed")
        outcome = hook.check_and_report(HOOK_EVENT, hook.lambda_invoker(target, lambda_client), client)
        lambda_stub.assert_no_pending_responses()
    assert outcome["status"] == "Failed" and len(outcome["failures"]) == len(hook.DEMO_CHECKS)
    assert all("ResourceNotFoundException" in failure for failure in outcome["failures"])
