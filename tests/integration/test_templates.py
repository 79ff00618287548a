"""Every template passes ``sam validate --lint`` and cfn-lint, and template.yaml declares what the issue names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from scripts.lambda_events import tool

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [ROOT / "template.yaml", *sorted((ROOT / "infra").glob("*.yaml"))]
SAM_ENV = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}

pytestmark = pytest.mark.integration


class _Loader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !If, ...) as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def load_template(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=_Loader)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_sam_validate_lint(template: Path) -> None:
    result = subprocess.run(
        [tool("sam"), "validate", "--lint", "-t", str(template)], capture_output=True, text=True, env=SAM_ENV, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a valid SAM Template" in result.stdout + result.stderr


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_cfn_lint(template: Path) -> None:
    result = subprocess.run([tool("cfn-lint"), str(template)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_template_declares_the_operational_knobs() -> None:
    template = load_template(ROOT / "template.yaml")
    parameters = set(template["Parameters"])
    assert {
        "Architecture", "MemorySize", "ReservedConcurrency", "ProvisionedConcurrencyMin", "ProvisionedConcurrencyMax",
        "SnapStart", "AuthType", "JwtIssuer", "CorsAllowOrigins", "RequestLoggingSamplingPercentage",
        "LogRetentionDays", "ModelSource", "ModelBucket", "ModelPrefix", "ModelLayerArn",
    } <= parameters  # fmt: skip
    assert template["Parameters"]["RequestLoggingSamplingPercentage"]["Default"] == 0
    resources = {name: body["Type"] for name, body in template["Resources"].items()}
    for kind in (
        "AWS::Serverless::Function", "AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Authorizer", "AWS::Logs::LogGroup",
        "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard", "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy", "AWS::KinesisFirehose::DeliveryStream", "AWS::Glue::Table",
    ):  # fmt: skip
        assert kind in resources.values(), kind
    function = template["Resources"]["InferenceFunction"]["Properties"]
    assert function["Runtime"] == "python3.12"
    assert function["Handler"] == "handler.http.lambda_handler"
    assert template["Resources"]["InferenceFunction"]["Metadata"]["BuildMethod"] == "makefile"
    batch = template["Resources"]["BatchFunction"]
    assert batch["Properties"]["Handler"] == "handler.batch.lambda_handler"
    sqs = batch["Properties"]["Events"]["Requests"]["Properties"]
    assert sqs["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert {"BatchSize", "MaximumBatchingWindowInSeconds"} <= set(sqs)
    assert "RedrivePolicy" in template["Resources"]["RequestQueue"]["Properties"]
    state_machine = template["Resources"]["BatchStateMachine"]["Properties"]["Definition"]
    map_state = state_machine["States"]["PredictPrefix"]
    assert map_state["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert map_state["ItemReader"]["Resource"] == "arn:aws:states:::s3:listObjectsV2"
    assert {"MaxConcurrency", "ToleratedFailurePercentage", "ItemBatcher"} <= set(map_state)
    columns = template["Resources"]["RequestLogTable"]["Properties"]["TableInput"]["StorageDescriptor"]["Columns"]
    assert [c["Name"] for c in columns] == [
        "model",
        "model_version",
        "time",
        "raw_data",
        "raw_prediction",
        "groundtruth",
    ]
