"""template.yaml's part of the ``s3_tensors`` extension: off by default; when on, the function reads and writes
exactly the configured prefix (and may use the KMS key given), the server is told the same prefix, and a bucket the
stack makes expires its tensors. checkov and cfn-lint run over the whole template in test_iam.py and
test_templates.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_iam import _TagLoader

ROOT = Path(__file__).resolve().parents[2]
BUCKET = {"Bucket": {"!If": ["TensorBucketInStack", {"!Ref": "TensorStore"}, {"!Ref": "TensorBucket"}]}}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(), Loader=_TagLoader)


def test_the_extension_is_off_unless_a_storage_is_chosen(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    assert parameters["TensorStorage"]["Default"] == "off"
    assert parameters["TensorStorage"]["AllowedValues"] == ["off", "existing-bucket", "stack-bucket"]
    assert template["Conditions"]["S3TensorsOn"] == {"!Not": [{"!Equals": [{"!Ref": "TensorStorage"}, "off"]}]}
    variables = template["Resources"]["InferenceFunction"]["Properties"]["Environment"]["Variables"]
    prefixes = variables["OIP_S3_TENSOR_PREFIXES"]["!If"]
    assert prefixes[0] == "S3TensorsOn" and prefixes[2] == ""  # none configured: the server's extension is off
    assert prefixes[1] == {"!Sub": ["s3://${Bucket}/${TensorPrefix}", BUCKET]}
    assert variables["OIP_S3_TENSOR_KMS_KEY"] == {"!Ref": "TensorKmsKeyArn"}
    assert variables["OIP_S3_TENSOR_SSE"] == {"!If": ["TensorKmsKey", "aws:kms", ""]}


def test_the_function_may_read_and_write_exactly_the_prefix(template: dict[str, Any]) -> None:
    policies = template["Resources"]["InferenceFunctionRole"]["Properties"]["Policies"]
    tensors = [p["!If"] for p in policies if p["!If"][0] == "S3TensorsOn"]
    assert len(tensors) == 1 and tensors[0][2] == {"!Ref": "AWS::NoValue"}
    statements = tensors[0][1]["PolicyDocument"]["Statement"]
    objects = statements[0]
    assert objects["Effect"] == "Allow"
    assert objects["Action"] == ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    assert objects["Resource"] == {"!Sub": ["arn:${AWS::Partition}:s3:::${Bucket}/${TensorPrefix}*", BUCKET]}
    kms = statements[1]["!If"]
    assert kms[0] == "TensorKmsKey" and kms[1]["Resource"] == {"!Ref": "TensorKmsKeyArn"}
    assert kms[1]["Action"] == ["kms:GenerateDataKey", "kms:Decrypt"]
    text = json.dumps(tensors)
    assert "s3:ListBucket" not in text and "s3:DeleteObject" not in text and '"*"' not in text


def test_the_prefix_parameter_takes_only_plain_prefixes(template: dict[str, Any]) -> None:
    import re

    pattern = re.compile(template["Parameters"]["TensorPrefix"]["AllowedPattern"])
    assert all(pattern.fullmatch(p) for p in ["tensors/", "a/b-c/", "team_1/in/"])
    assert not any(pattern.fullmatch(p) for p in ["", "tensors", "/tensors/", "a//b/", "../x/", "./", "a/../"])


def test_a_stack_bucket_is_private_encrypted_and_expires_its_tensors(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    bucket = resources["TensorStore"]
    assert bucket["Condition"] == "TensorBucketInStack"
    properties = bucket["Properties"]
    assert all(properties["PublicAccessBlockConfiguration"].values())
    rules = properties["LifecycleConfiguration"]["Rules"]
    assert rules[0]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    expire = rules[1]["!If"]
    assert expire[0] == "TensorsExpire"
    assert expire[1]["Prefix"] == {"!Ref": "TensorPrefix"}
    assert expire[1]["ExpirationInDays"] == {"!Ref": "TensorExpirationDays"}
    assert template["Conditions"]["TensorsExpire"] == {
        "!And": [{"!Condition": "TensorBucketInStack"}, {"!Not": [{"!Equals": [{"!Ref": "TensorExpirationDays"}, 0]}]}]
    }
    deny = resources["TensorStorePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rule = template["Rules"]["ExistingTensorBucketNeedsAName"]
    assert rule["Assertions"][0]["Assert"] == {"!Not": [{"!Equals": [{"!Ref": "TensorBucket"}, ""]}]}
