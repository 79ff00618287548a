"""The batch function in the template as CloudFormation receives it: the SAM transform (samtranslator, as
``sam deploy`` runs it) of template.yaml, checked for the on-failure destination of asynchronous invocations,
its alarm, and the concurrency that keeps a batch backlog off the inference function's capacity."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts.tool_env import executable

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    """template.yaml through samtranslator, run in the sam tool venv (tests/tool_scripts/sam_transform.py)."""
    script = ROOT / "tests" / "tool_scripts" / "sam_transform.py"
    done = subprocess.run([executable("sam", "python"), str(script), str(ROOT / "template.yaml")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: body["Properties"] for name, body in template["Resources"].items() if body["Type"] == kind}


def test_failed_asynchronous_invocations_go_to_a_queue_with_an_alarm(transformed: dict[str, Any]) -> None:
    configs = _of_type(transformed, "AWS::Lambda::EventInvokeConfig")
    batch = next(c for c in configs.values() if c["FunctionName"] == {"Ref": "BatchFunction"})
    assert batch["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["BatchFailedFilesQueue", "Arn"]}
    assert batch["MaximumRetryAttempts"] == 2 and batch["Qualifier"] == "$LATEST"
    assert transformed["Resources"]["BatchFailedFilesQueue"]["Type"] == "AWS::SQS::Queue"
    # the S3 path is the asynchronous one: EventBridge's rule targets the function itself ($LATEST)
    rules = _of_type(transformed, "AWS::Events::Rule")
    targets = [t["Arn"] for rule in rules.values() for t in rule["Targets"]]
    assert {"Fn::GetAtt": ["BatchFunction", "Arn"]} in targets
    role = transformed["Resources"]["BatchFunctionRole"]["Properties"]["Policies"]
    statements = [s for p in role if "PolicyDocument" in p for s in p["PolicyDocument"]["Statement"]]
    sends = [s for s in statements if s["Action"] == "sqs:SendMessage"]
    assert {"Fn::GetAtt": ["BatchFailedFilesQueue", "Arn"]} in [s["Resource"] for s in sends]
    alarms = _of_type(transformed, "AWS::CloudWatch::Alarm")
    watched = [a["Dimensions"][0]["Value"] for a in alarms.values() if a.get("Namespace") == "AWS/SQS"]
    assert {"Fn::GetAtt": ["BatchFailedFilesQueue", "QueueName"]} in watched
    assert "oip redrive" in transformed["Outputs"]["BatchFailedFilesQueueUrl"]["Description"]


def test_batch_concurrency_is_bounded_by_parameters(transformed: dict[str, Any]) -> None:
    function = transformed["Resources"]["BatchFunction"]["Properties"]
    assert function["ReservedConcurrentExecutions"] == {"Ref": "BatchReservedConcurrency"}
    mappings = _of_type(transformed, "AWS::Lambda::EventSourceMapping")
    queue = next(m for m in mappings.values() if m["FunctionName"] == {"Ref": "BatchFunction"})
    assert queue["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "QueueMaximumConcurrency"}}
    parameters = transformed["Parameters"]
    assert parameters["QueueMaximumConcurrency"]["MinValue"] == 2  # Lambda's lower bound
    assert parameters["QueueMaximumConcurrency"]["Default"] <= parameters["BatchReservedConcurrency"]["Default"]
