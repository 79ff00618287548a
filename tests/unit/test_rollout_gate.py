"""The pre-traffic hook's agreement gate (handler/rollout/gate.py): the Lambda and S3 clients are real boto3
clients whose calls botocore's Stubber checks against the service models, answering with what the real app
(Mangum over build_app) answers for each version of tests/support/shadow_models.py's classifier."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import onnxruntime
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from mangum import Mangum

from handler.cli.lambda_context import LocalLambdaContext
from handler.rollout import gate, hook
from handler.server import build_app
from tests.conftest import make_settings
from tests.support.codedeploy_hook import HOOK_EVENT, expect_report
from tests.support.shadow_models import classifier_repository, rows

FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:oip-inference"
TARGET = f"{FUNCTION}:8"
URI = "s3://oip-logs/requests/sample.jsonl"
ROWS = rows(40)
LINES = [
    {"model": "clf", "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row.tolist()}]}
    for row in ROWS
]


def lambda_version(root: Path, perturbed: bool, default: str) -> Mangum:
    """A function version whose 'clf' answers with its version ``default`` (1 is today's, 2 the new one)."""
    classifier_repository(root, "clf", perturbed, {"default_version": default})
    return Mangum(build_app(make_settings(root)), lifespan="off")


def agreeing_by_onnxruntime(model: Path) -> int:
    """Rows whose label version 2 gives as version 1 does: both sessions run directly."""
    labels = [
        onnxruntime.InferenceSession(str(model / version / "model.onnx")).run(["label"], {"input": ROWS})[0]
        for version in ("1", "2")
    ]
    return int(np.count_nonzero(labels[0] == labels[1]))


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, tuple[Any, Stubber]]]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("OIP_ROLLOUT_CHECKS", "[]")  # the gate alone, unless a test brings the checks back
    made = {name: boto3.client(name, region_name="us-east-1") for name in ("lambda", "s3", "codedeploy")}
    stubbers = {name: Stubber(client) for name, client in made.items()}
    for stubber in stubbers.values():
        stubber.activate()
    yield {name: (made[name], stubbers[name]) for name in made}
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def body(payload: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(payload), len(payload))


def stub_source(stubber: Stubber, lines: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    stubber.add_response(
        "get_object",
        {"Body": body(text), "ContentLength": len(text)},
        {"Bucket": "oip-logs", "Key": "requests/sample.jsonl"},
    )


def stub_invokes(stubber: Stubber, lines: list[dict[str, Any]], current: Mangum, new: Mangum) -> None:
    """Per line, the alias's answer then the new version's: what each real app answers for the event."""
    for line in lines:
        event = gate.request_event(line, hook.http_event)
        for qualifier, app in (("live", current), ("8", new)):
            answer = json.dumps(app(event, LocalLambdaContext())).encode()
            stubber.add_response(
                "invoke",
                {"StatusCode": 200, "Payload": body(answer)},
                {"FunctionName": FUNCTION, "Qualifier": qualifier, "Payload": ANY},
            )


def settings(requests: int, min_agreement: float) -> gate.GateSettings:
    return gate.GateSettings.from_environ(
        {
            "OIP_ROLLOUT_AGREEMENT_REQUESTS": str(requests),
            "OIP_ROLLOUT_MIN_AGREEMENT": str(min_agreement),
            "OIP_ROLLOUT_COMPARISON_S3_URI": URI,
        }
    )


def report(
    clients: dict[str, tuple[Any, Stubber]],
    gate_settings: gate.GateSettings,
    status: str,
    invoke: hook.Invoke = lambda event: {"statusCode": 200, "body": "null"},
) -> dict[str, Any]:
    """check_and_report with the checks through ``invoke`` and the gate, CodeDeploy expecting ``status``."""
    codedeploy, stubber = clients["codedeploy"]
    expect_report(stubber, status)
    lambda_client, s3 = clients["lambda"][0], clients["s3"][0]
    return hook.check_and_report(
        HOOK_EVENT,
        invoke,
        codedeploy,
        lambda: gate.gate_failures(gate_settings, TARGET, lambda_client, s3, hook.http_event),
    )


def test_the_gate_refuses_a_perturbed_version(tmp_path: Path, clients: dict[str, tuple[Any, Stubber]]) -> None:
    current = lambda_version(tmp_path / "current", perturbed=True, default="1")
    new = lambda_version(tmp_path / "new", perturbed=True, default="2")
    agreeing = agreeing_by_onnxruntime(tmp_path / "current" / "clf")
    assert 0 < agreeing < len(ROWS)  # some rows change class, most do not
    stub_source(clients["s3"][1], LINES)
    stub_invokes(clients["lambda"][1], LINES, current, new)
    outcome = report(clients, settings(len(LINES), 0.99), "Failed")
    assert outcome["failures"] == [
        f"agreement gate: {agreeing} of {len(LINES)} requests agree ({agreeing / len(LINES):.4f} < 0.99)"
    ]


def test_the_gate_passes_an_identical_version(tmp_path: Path, clients: dict[str, tuple[Any, Stubber]]) -> None:
    current = lambda_version(tmp_path / "current", perturbed=False, default="1")
    new = lambda_version(tmp_path / "new", perturbed=False, default="2")
    assert agreeing_by_onnxruntime(tmp_path / "current" / "clf") == len(ROWS)
    stub_source(clients["s3"][1], LINES)
    stub_invokes(clients["lambda"][1], LINES, current, new)
    assert report(clients, settings(len(LINES), 0.99), "Succeeded") == {"status": "Succeeded", "failures": []}


def test_too_few_compared_requests_fail(tmp_path: Path, clients: dict[str, tuple[Any, Stubber]]) -> None:
    """Identical answers, but one line fewer than the gate needs; a line today's version refuses is not compared."""
    current = lambda_version(tmp_path / "current", perturbed=False, default="1")
    new = lambda_version(tmp_path / "new", perturbed=False, default="2")
    lines = [*LINES[:5], {"model": "missing", "inputs": LINES[0]["inputs"]}]
    stub_source(clients["s3"][1], lines)
    stub_invokes(clients["lambda"][1], lines[:5], current, new)
    event = gate.request_event(lines[5], hook.http_event)
    clients["lambda"][1].add_response(
        "invoke",
        {"StatusCode": 200, "Payload": body(json.dumps(current(event, LocalLambdaContext())).encode())},
        {"FunctionName": FUNCTION, "Qualifier": "live", "Payload": ANY},
    )
    outcome = report(clients, settings(6, 0.5), "Failed")
    assert outcome["failures"] == ["agreement gate: 5 requests compared, 6 needed"]


def test_an_unreadable_comparison_object_fails(clients: dict[str, tuple[Any, Stubber]]) -> None:
    clients["s3"][1].add_client_error("get_object", "NoSuchKey", "The specified key does not exist.")
    outcome = report(clients, settings(10, 0.9), "Failed")
    assert "NoSuchKey" in outcome["failures"][0]


def test_unset_parameters_keep_the_gate_off(
    clients: dict[str, tuple[Any, Stubber]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template's defaults: the demo checks on the shipped function decide; no S3 read, no qualified invoke
    (the Stubbers have no responses to give)."""
    from handler.http import lambda_handler

    monkeypatch.delenv("OIP_ROLLOUT_CHECKS")
    off = gate.GateSettings.from_environ({"OIP_ROLLOUT_AGREEMENT_REQUESTS": "0", "OIP_ROLLOUT_COMPARISON_S3_URI": ""})
    assert not off.on and not gate.GateSettings.from_environ({}).on
    shipped = report(clients, off, "Succeeded", lambda event: lambda_handler(event, LocalLambdaContext()))
    assert shipped == {"status": "Succeeded", "failures": []}


def test_check_lines_and_versioned_requests_become_events() -> None:
    assert (
        gate.request_event({"method": "GET", "path": "/v2/health/ready"}, hook.http_event)["rawPath"]
        == "/v2/health/ready"
    )
    event = gate.request_event({"model": "clf", "version": "2", "inputs": []}, hook.http_event)
    assert event["rawPath"] == "/v2/models/clf/versions/2/infer" and json.loads(event["body"]) == {"inputs": []}


def test_a_malformed_gate_setting_is_reported_failed(clients: dict[str, tuple[Any, Stubber]]) -> None:
    """The hook reads the gate's settings inside the report, so a typo fails the deployment instead of stalling it."""
    codedeploy, stubber = clients["codedeploy"]
    expect_report(stubber, "Failed")

    def malformed() -> list[str]:
        settings = gate.GateSettings.from_environ({"OIP_ROLLOUT_AGREEMENT_REQUESTS": "two hundred"})
        return gate.gate_failures(settings, TARGET, clients["lambda"][0], clients["s3"][0], hook.http_event)

    outcome = hook.check_and_report(HOOK_EVENT, lambda event: {"statusCode": 200}, codedeploy, malformed)
    assert outcome["status"] == "Failed" and outcome["failures"][0].startswith("the checks could not run: ValueError")
